//! `list`: what is installed in the prefix.

use kpack_cli::counted;
use std::path::Path;

use kpack_cli::ByteSize;
use kpack_gpu::Target;
use kpack_repo_index::{PackageName, RelativePath};
use rocm_kpack_get::layout::Layout;
use serde::Serialize;

use super::{Context, Failure};
use crate::printer::{Printer, SCHEMA};

/// What is installed in a prefix.
#[derive(Debug, Serialize)]
struct ListReport<'a> {
    schema: u32,
    packages: Vec<Listed<'a>>,
    prefix: &'a Path,
}

/// An installed package.
#[derive(Debug, Serialize)]
struct Listed<'a> {
    artifacts: Vec<&'a RelativePath>,
    files: usize,
    layout: Layout,
    name: &'a PackageName,
    repo: &'a str,
    /// The installed files' bytes, for people.
    #[serde(skip)]
    size: u64,
    targets: &'a [Target],
    version: String,
}

impl ListReport<'_> {
    /// A line per package, or that nothing is installed.
    fn render_text(&self, printer: &Printer) {
        if self.packages.is_empty() {
            printer.line(format!("nothing installed in {}", self.prefix.display()));
        }
        for package in &self.packages {
            printer.line(format!(
                "{} {} ({}, {}, {}; for {}; layout {})",
                package.name,
                package.version,
                package.repo,
                counted(package.files, "file", "files"),
                ByteSize(package.size),
                if package.targets.is_empty() {
                    "no GPU: host parts only".to_owned()
                } else {
                    kpack_gpu::target::join_targets(package.targets)
                },
                package.layout
            ));
        }
    }
}

pub fn list(context: &Context) -> Result<(), Failure> {
    let prefix = context.prefix(false)?;
    // Read-only and without the lock: the record is one whole state.
    context.read_state(&prefix)?;
    let record = prefix.record()?;
    let packages = record.packages.iter().map(|(name, p)| Listed {
        artifacts: p.artifacts.iter().map(|a| &a.path).collect(),
        files: p.files.len(),
        layout: p.layout,
        name,
        repo: &p.repo,
        size: p.files.iter().filter_map(|f| f.size).sum(),
        targets: &p.targets,
        version: p.version.to_string(),
    });
    let report = ListReport {
        schema: SCHEMA,
        packages: packages.collect(),
        prefix: prefix.root(),
    };
    report.render_text(&context.printer);
    context.printer.report(&report);
    Ok(())
}

//! `list`: what is installed in the prefix.

use std::path::Path;

use kpack_gpu::Target;
use kpack_repo_index::{ByteSize, PackageName, RelativePath};
use rocm_kpack_get::layout::Layout;
use serde::Serialize;

use super::{Context, Failure};
use crate::printer::SCHEMA;

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
    targets: &'a [Target],
    version: String,
}

pub fn list(context: &Context) -> Result<(), Failure> {
    let prefix = context.prefix(false)?;
    // Read-only: a shared lock keeps a change from starting while the
    // record is read, and writes nothing (a root-owned prefix lists).
    let _lock = context.read_lock(&prefix)?;
    let record = prefix.record()?;
    if record.packages.is_empty() {
        context
            .printer
            .line(format!("nothing installed in {}", prefix.root().display()));
    }
    for (name, package) in &record.packages {
        let size: u64 = package.files.iter().filter_map(|f| f.size).sum();
        context.printer.line(format!(
            "{name} {} ({}, {} files, {}; for {}; layout {})",
            package.version,
            package.repo,
            package.files.len(),
            ByteSize(size),
            if package.targets.is_empty() {
                "no GPU: host parts only".to_owned()
            } else {
                kpack_gpu::target::join_targets(&package.targets)
            },
            package.layout
        ));
    }
    let packages = record.packages.iter().map(|(name, p)| Listed {
        artifacts: p.artifacts.iter().map(|a| &a.path).collect(),
        files: p.files.len(),
        layout: p.layout,
        name,
        repo: &p.repo,
        targets: &p.targets,
        version: p.version.to_string(),
    });
    context.printer.report(&ListReport {
        schema: SCHEMA,
        packages: packages.collect(),
        prefix: prefix.root(),
    });
    Ok(())
}

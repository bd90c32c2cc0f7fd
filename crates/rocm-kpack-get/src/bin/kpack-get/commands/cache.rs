//! `cache clean`: empty the download cache.

use kpack_cli::counted;
use std::path::Path;

use kpack_cli::ByteSize;
use serde::Serialize;

use super::{Context, Exit, Failure};
use crate::printer::{Printer, SCHEMA};

/// What `cache clean` removed.
#[derive(Debug, Serialize)]
struct CleanReport<'a> {
    schema: u32,
    bytes: u64,
    files: u64,
    /// The cache's directory.
    #[serde(skip)]
    root: &'a Path,
}

impl CleanReport<'_> {
    /// What was removed, and from where.
    fn render_text(&self, printer: &Printer) {
        printer.line(format!(
            "removed {} ({}) from {}",
            counted(
                usize::try_from(self.files).unwrap_or(usize::MAX),
                "file",
                "files"
            ),
            ByteSize(self.bytes),
            self.root.display()
        ));
    }
}

pub fn clean(context: &Context) -> Result<(), Failure> {
    let report = context.cache.clean().map_err(|e| {
        Failure::new(
            Exit::Local,
            anyhow::Error::new(e).context(format!("cleaning {}", context.cache.root().display())),
        )
    })?;
    let report = CleanReport {
        schema: SCHEMA,
        bytes: report.bytes,
        files: report.files,
        root: context.cache.root(),
    };
    report.render_text(&context.printer);
    context.printer.report(&report);
    Ok(())
}

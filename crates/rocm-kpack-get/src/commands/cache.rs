//! `cache clean`: empty the download cache.

use kpack_repo_index::ByteSize;
use serde::Serialize;

use super::{Context, Exit, Failure};
use crate::printer::SCHEMA;

/// What `cache clean` removed.
#[derive(Debug, Serialize)]
struct CleanReport {
    schema: u32,
    bytes: u64,
    files: u64,
}

pub fn clean(context: &Context) -> Result<(), Failure> {
    let report = context.cache.clean().map_err(|e| {
        Failure::new(
            Exit::Local,
            anyhow::Error::new(e).context(format!("cleaning {}", context.cache.root().display())),
        )
    })?;
    context.printer.line(format!(
        "removed {} files ({}) from {}",
        report.files,
        ByteSize(report.bytes),
        context.cache.root().display()
    ));
    context.printer.report(&CleanReport {
        schema: SCHEMA,
        bytes: report.bytes,
        files: report.files,
    });
    Ok(())
}

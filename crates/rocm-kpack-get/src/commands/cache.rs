//! `cache clean`: empty the download cache.

use serde_json::json;

use super::{Context, Exit, Failure};
use kpack_repo_index::ByteSize;

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
    context
        .printer
        .json(&json!({ "files": report.files, "bytes": report.bytes }));
    Ok(())
}

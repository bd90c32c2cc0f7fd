//! `list`: what is installed in the prefix.

use kpack_repo_index::ByteSize;
use serde_json::json;

use super::{Context, Failure};

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
    context.printer.json(&json!({
        "prefix": prefix.root(),
        "packages": record.packages.iter().map(|(name, p)| json!({
            "name": name,
            "version": p.version.to_string(),
            "repo": p.repo,
            "targets": p.targets,
            "layout": p.layout,
            "files": p.files.len(),
            "artifacts": p.artifacts.iter().map(|a| a.path.clone()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    }));
    Ok(())
}

//! `remove`: take packages and exactly their files out of the prefix.

use serde_json::json;

use super::{Context, Failure};
use rocm_kpack_get::install::InstallError;

pub fn remove(context: &Context, packages: &[String], dry_run: bool) -> Result<(), Failure> {
    let prefix = context.prefix(false)?;
    // The record is read under the lock, after an interrupted or concurrent
    // change is finished; a dry run only reads it. Without `.kpack` nothing
    // is installed, and the check below says so.
    let lock = if !dry_run && prefix.root().join(".kpack").is_dir() {
        Some(context.lock(&prefix)?)
    } else {
        None
    };
    let record = prefix.record()?;
    for name in packages {
        if !record.packages.contains_key(name) {
            return Err(InstallError::NotInstalled {
                name: name.clone(),
                prefix: prefix.root().to_owned(),
            }
            .into());
        }
    }
    if dry_run {
        for name in packages {
            let package = &record.packages[name];
            context.printer.line(format!(
                "would remove {name} {} ({} files)",
                package.version,
                package.files.len()
            ));
        }
        context
            .printer
            .json(&json!({ "remove": packages, "done": false }));
        return Ok(());
    }
    let lock = match lock {
        Some(lock) => lock,
        None => context.lock(&prefix)?,
    };
    let applied = prefix.apply(&lock, &[], packages)?;
    for name in packages {
        context
            .printer
            .line(format!("removed {name} {}", record.packages[name].version));
    }
    context.printer.line(format!(
        "{} files removed from {}",
        applied.files_removed,
        prefix.root().display()
    ));
    context.printer.json(&json!({
        "remove": packages,
        "done": true,
        "files_removed": applied.files_removed,
    }));
    Ok(())
}

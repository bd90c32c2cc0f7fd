//! `remove`: take packages and exactly their files out of the prefix.

use serde_json::json;

use kpack_repo_index::PackageName;
use rocm_kpack_get::install::record::InstalledPackage;
use rocm_kpack_get::install::InstallError;

use super::{Context, Failure};

pub fn remove(context: &Context, packages: &[PackageName], dry_run: bool) -> Result<(), Failure> {
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
    let installed = packages
        .iter()
        .map(|name| match record.packages.get(name) {
            Some(package) => Ok((name, package)),
            None => Err(InstallError::NotInstalled {
                name: name.clone(),
                prefix: prefix.root().to_owned(),
            }),
        })
        .collect::<Result<Vec<(&PackageName, &InstalledPackage)>, _>>()?;
    if dry_run {
        for (name, package) in &installed {
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
    for (name, package) in &installed {
        context
            .printer
            .line(format!("removed {name} {}", package.version));
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

//! `remove`: take packages and exactly their files out of the prefix.

use kpack_repo_index::PackageName;
use rocm_kpack_get::install::record::InstalledPackage;
use rocm_kpack_get::install::InstallError;
use serde::Serialize;

use super::{Context, Failure};
use crate::printer::SCHEMA;

/// The packages removed (or that would be), and the files.
#[derive(Debug, Serialize)]
struct RemoveReport<'a> {
    schema: u32,
    done: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    files_removed: Option<usize>,
    remove: &'a [PackageName],
}

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
        context.printer.report(&RemoveReport {
            schema: SCHEMA,
            done: false,
            files_removed: None,
            remove: packages,
        });
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
    context.printer.report(&RemoveReport {
        schema: SCHEMA,
        done: true,
        files_removed: Some(applied.files_removed),
        remove: packages,
    });
    Ok(())
}

//! `remove`: take packages and exactly their files out of the prefix.

use kpack_cli::counted;
use std::path::Path;

use kpack_repo_index::PackageName;
use rocm_kpack_get::install::record::InstalledPackage;
use rocm_kpack_get::install::InstallError;
use serde::Serialize;

use super::{Context, Failure};
use crate::printer::{Printer, SCHEMA};

/// The packages removed (or that would be), and the files.
#[derive(Debug, Serialize)]
struct RemoveReport<'a> {
    schema: u32,
    done: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    files_removed: Option<usize>,
    remove: &'a [PackageName],
    /// The packages as installed.
    #[serde(skip)]
    installed: &'a [(&'a PackageName, &'a InstalledPackage)],
    /// The prefix they are removed from.
    #[serde(skip)]
    prefix: &'a Path,
}

impl RemoveReport<'_> {
    /// Each package removed (or that would be), and how many files went.
    fn render_text(&self, printer: &Printer) {
        for (name, package) in self.installed {
            printer.line(match self.done {
                true => format!("removed {name} {}", package.version),
                false => format!(
                    "would remove {name} {} ({})",
                    package.version,
                    counted(package.files.len(), "file", "files")
                ),
            });
        }
        if let Some(files) = self.files_removed {
            printer.line(format!(
                "{files} files removed from {}",
                self.prefix.display()
            ));
        }
    }
}

pub fn remove(context: &Context, packages: &[PackageName], dry_run: bool) -> Result<(), Failure> {
    let prefix = context.prefix(false)?;
    // The record is read under the lock, after an interrupted or concurrent
    // change is finished; a dry run only reads it. Without `.kpack` nothing
    // is installed, and the check below says so.
    let lock = if !dry_run && prefix.root().join(rocm_kpack::format::KPACK_DIR).is_dir() {
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
    let mut report = RemoveReport {
        schema: SCHEMA,
        done: false,
        files_removed: None,
        remove: packages,
        installed: &installed,
        prefix: prefix.root(),
    };
    // Taken now when there was nothing to recover; a dry run takes none.
    let lock = match lock {
        None if !dry_run => Some(context.lock(&prefix)?),
        lock => lock,
    };
    if let Some(lock) = &lock {
        let applied = prefix.apply(lock, &[], packages)?;
        report.done = true;
        report.files_removed = Some(applied.files_removed);
    }
    report.render_text(&context.printer);
    context.printer.report(&report);
    Ok(())
}

//! `kpack-repo prune`: all but the newest versions of each package dropped
//! from the index in one root update.

use std::path::PathBuf;

use clap::Args;
use kpack_cli::{counted, JsonArg, Printer};
use kpack_repo_index::address::Address;
use serde::Serialize;

use super::options::{repository, secret, StorageArgs};
use super::report::{signing, VersionReport};

#[derive(Debug, Args)]
pub(super) struct PruneArgs {
    /// The repository: a directory or s3://bucket/prefix.
    #[arg(value_parser = repository)]
    repo: Address,
    /// How many versions of each package to keep, newest first (versions
    /// a kept one depends on exactly stay too).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    keep: u32,
    #[arg(long = "secret-key", alias = "key", value_name = "SECRET_KEY")]
    key: Option<PathBuf>,
    #[command(flatten)]
    pub(super) json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

#[derive(Debug, Serialize)]
struct PruneReport {
    repo: String,
    dropped: Vec<VersionReport>,
    /// The root published, if anything was dropped.
    repo_version: Option<u64>,
    signed: bool,
}

pub(super) fn run(printer: &Printer, args: PruneArgs) -> anyhow::Result<()> {
    let key = args.key.as_deref().map(secret).transpose()?;
    let (repo, keep) = (&args.repo, args.keep);
    let pruned = args
        .storage
        .open(repo)?
        .prune(keep as usize, key.as_ref())?;
    let report = PruneReport {
        repo: repo.to_string(),
        dropped: (pruned.dropped.iter())
            .map(|(name, version)| VersionReport {
                name: name.to_string(),
                version: version.to_string(),
            })
            .collect(),
        repo_version: pruned.root.as_ref().map(|root| root.repo.version),
        signed: key.is_some() && pruned.root.is_some(),
    };
    match report.repo_version {
        None => printer.line(format!(
            "nothing to prune: no package in {repo} has more than {} to drop",
            counted(keep as usize, "version", "versions")
        )),
        Some(version) => {
            for dropped in &report.dropped {
                printer.line(format!("  dropped {} {}", dropped.name, dropped.version));
            }
            printer.line(format!(
                "pruned {} from {repo} (repo version {version}, {}); `kpack-repo gc` deletes their files",
                counted(report.dropped.len(), "version", "versions"),
                signing(report.signed)
            ));
        }
    }
    printer.report(&report);
    Ok(())
}

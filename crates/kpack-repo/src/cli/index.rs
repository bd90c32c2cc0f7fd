//! `kpack-repo index`: every published file checked against its shard and
//! a new root published.

use std::path::PathBuf;

use clap::Args;
use kpack_cli::{JsonArg, Printer};
use kpack_repo_index::address::Address;
use serde::Serialize;

use super::options::{repository, secret, StorageArgs};

#[derive(Debug, Args)]
pub(super) struct IndexArgs {
    /// The repository: a directory or s3://bucket/prefix.
    #[arg(value_parser = repository)]
    repo: Address,
    #[arg(long = "secret-key", alias = "key", value_name = "SECRET_KEY")]
    key: Option<PathBuf>,
    #[command(flatten)]
    pub(super) json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

#[derive(Debug, Serialize)]
struct RootReport {
    repo: String,
    repo_version: u64,
    signed: bool,
}

pub(super) fn run(printer: &Printer, args: IndexArgs) -> anyhow::Result<()> {
    let key = args.key.as_deref().map(secret).transpose()?;
    let root = args.storage.open(&args.repo)?.reindex(key.as_ref())?;
    let report = RootReport {
        repo: args.repo.to_string(),
        repo_version: root.repo.version,
        signed: key.is_some(),
    };
    printer.line(format!(
        "reindexed {}: version {}",
        report.repo, report.repo_version
    ));
    printer.report(&report);
    Ok(())
}

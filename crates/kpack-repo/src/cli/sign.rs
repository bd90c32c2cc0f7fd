//! `kpack-repo sign`: the current root signed as it is.

use std::path::PathBuf;

use clap::Args;
use kpack_cli::{JsonArg, Printer};
use kpack_repo_index::address::Address;
use serde::Serialize;

use super::options::{repository, secret, StorageArgs};

#[derive(Debug, Args)]
pub(super) struct SignArgs {
    /// The repository: a directory or s3://bucket/prefix.
    #[arg(value_parser = repository)]
    repo: Address,
    #[arg(long = "secret-key", alias = "key", value_name = "SECRET_KEY")]
    key: PathBuf,
    #[command(flatten)]
    pub(super) json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

#[derive(Debug, Serialize)]
struct SignReport {
    signed: String,
}

pub(super) fn run(printer: &Printer, args: SignArgs) -> anyhow::Result<()> {
    let opened = args.storage.open(&args.repo)?;
    opened.sign(&secret(&args.key)?)?;
    let report = SignReport {
        signed: opened.store().location("index.toml"),
    };
    printer.line(format!("signed {}", report.signed));
    printer.report(&report);
    Ok(())
}

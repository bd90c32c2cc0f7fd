//! `kpack-repo build`: manifests' packages packed and published in one
//! root update (the batch itself is in `batch`).

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use kpack_cli::{counted, ByteSize, JsonArg, Printer};
use kpack_repo::manifest;
use kpack_repo_index::address::Address;
use serde::Serialize;

use super::batch::{build_set, BatchOptions};
use super::options::{repository, secret, StorageArgs, TransportArgs};
use super::report::{signing, VersionReport};

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("signing").args(["key", "unsigned"]).required(true)))]
pub(super) struct BuildArgs {
    /// The repository: a directory or s3://bucket/prefix.
    #[arg(value_parser = repository)]
    repo: Address,
    /// Manifests, and directories of manifests (a manifest set).
    #[arg(required = true)]
    manifests: Vec<PathBuf>,
    /// Directory holding the packages the manifests name (default: each
    /// manifest's directory).
    #[arg(long)]
    sources: Option<PathBuf>,
    /// Secret key to sign the new root with (`kpack-repo keygen` makes
    /// one); a repository is published signed unless --unsigned says not.
    #[arg(long = "secret-key", alias = "key", value_name = "SECRET_KEY")]
    key: Option<PathBuf>,
    /// Publish without signing (a staging area, tests): kpack-get, which
    /// verifies every root, refuses such a repository.
    #[arg(long)]
    unsigned: bool,
    /// Manifests built at once (default: one per core).
    #[arg(long, short = 'j', value_parser = clap::value_parser!(u16).range(1..))]
    jobs: Option<u16>,
    /// No progress bars, even on a terminal.
    #[arg(long)]
    no_progress: bool,
    #[command(flatten)]
    transport: TransportArgs,
    #[command(flatten)]
    pub(super) json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

#[derive(Debug, Serialize)]
struct BuildReport {
    repo: String,
    built: Vec<BuiltReport>,
    /// Versions the repository has already: left alone.
    left_alone: Vec<VersionReport>,
    /// The root published, if anything was built.
    repo_version: Option<u64>,
    signed: bool,
    /// Bytes of the artifacts built.
    size: u64,
}

#[derive(Debug, Serialize)]
struct BuiltReport {
    name: String,
    version: String,
    size: u64,
    seconds: f64,
}

pub(super) fn run(printer: &Printer, args: BuildArgs) -> anyhow::Result<()> {
    let key = args.key.as_deref().map(secret).transpose()?;
    let set = manifest::manifest_files(&args.manifests)?
        .iter()
        .map(|path| manifest::resolve(path, args.sources.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let options = BatchOptions {
        jobs: args.jobs.map_or(cores, usize::from),
        progress: !args.no_progress && printer.says() && std::io::stderr().is_terminal(),
    };
    let opened = args
        .storage
        .open_with(&args.repo, args.transport.policy())?;
    let say = |line: &str| printer.line(line);
    let repo = &args.repo;
    let batch = build_set(set, &opened, key.as_ref(), options, &say)
        .with_context(|| format!("nothing was published to {repo}"))?;
    let report = BuildReport {
        repo: repo.to_string(),
        built: (batch.built.iter())
            .map(|(staged, took)| BuiltReport {
                name: staged.new.name.to_string(),
                version: staged.new.version.to_string(),
                size: staged.bytes(),
                seconds: took.as_secs_f64(),
            })
            .collect(),
        left_alone: (batch.published.iter())
            .map(|r| VersionReport {
                name: r.new.name.to_string(),
                version: r.new.version.to_string(),
            })
            .collect(),
        repo_version: batch.root.as_ref().map(|root| root.repo.version),
        signed: key.is_some() && batch.root.is_some(),
        size: batch.built.iter().map(|(s, _)| s.bytes()).sum(),
    };
    build_text(printer, &report);
    printer.report(&report);
    Ok(())
}

/// What `build` did, as text.
fn build_text(printer: &Printer, report: &BuildReport) {
    let left_alone = published_list(&report.left_alone);
    let Some(version) = report.repo_version else {
        printer.line(format!(
            "nothing to publish: {left_alone} in {} already",
            report.repo
        ));
        return;
    };
    if !report.left_alone.is_empty() {
        printer.line(format!("left alone: {left_alone}"));
    }
    printer.line(format!(
        "published {} ({}) in {} as one root update (repo version {version}, {})",
        counted(report.built.len(), "package", "packages"),
        ByteSize(report.size),
        report.repo,
        signing(report.signed)
    ));
}

/// `rocm-blas 5.5.1+dfsg.deb.7, ... published`, or `no packages`.
fn published_list(published: &[VersionReport]) -> String {
    let names: Vec<String> = published
        .iter()
        .map(|r| format!("{} {}", r.name, r.version))
        .collect();
    if names.is_empty() {
        "no packages".into()
    } else {
        format!("{} published", names.join(", "))
    }
}

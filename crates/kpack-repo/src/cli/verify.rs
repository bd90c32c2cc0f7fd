//! `kpack-repo verify`: a repository checked as a client would (signature,
//! expiry, every pinned hash and size, trees' unpacked sizes).

use anyhow::Context;
use clap::Args;
use kpack_cli::{counted, ByteSize, JsonArg, Printer};
use kpack_repo::unpacked::verify_unpacked_sizes;
use kpack_repo::verify::verify_repository_with;
use kpack_repo_index::types::Timestamp;
use kpack_sign::PublicKey;
use serde::Serialize;

use super::options::{open_source, read_s3, LimitArgs};

#[derive(Debug, Args)]
pub(super) struct VerifyArgs {
    /// A repository: a directory, an http(s):// URL or s3://bucket/prefix.
    repo: String,
    /// Public key file, or the key itself.
    #[arg(long = "key", alias = "pubkey", value_name = "PUBLIC_KEY")]
    pubkey: String,
    /// A partial mirror: artifacts that are absent are not errors.
    #[arg(long)]
    partial: bool,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    pub(super) json: JsonArg,
}

#[derive(Debug, Serialize)]
struct VerifyReport {
    repo: String,
    repo_name: String,
    repo_version: u64,
    expires: String,
    packages: usize,
    versions: usize,
    artifacts: usize,
    /// Bytes of the artifacts checked.
    size: u64,
    /// Trees that unpack to the size they declare, and that size.
    trees: usize,
    unpacked_size: u64,
    /// Artifacts absent (a partial mirror).
    missing: usize,
}

pub(super) fn run(printer: &Printer, args: VerifyArgs) -> anyhow::Result<()> {
    let repo = &args.repo;
    let source = open_source(repo, &read_s3(), &args.limits)?;
    let key = PublicKey::load(&args.pubkey)?;
    let (root, checked) =
        verify_repository_with(&source, &key, Timestamp::now(), None, args.partial)
            .with_context(|| format!("{repo} does not verify"))?;
    let unpacked =
        verify_unpacked_sizes(&source, &root).with_context(|| format!("{repo} does not verify"))?;
    let report = VerifyReport {
        repo: repo.clone(),
        repo_name: root.repo.name.to_string(),
        repo_version: root.repo.version,
        expires: root.repo.expires.to_string(),
        packages: checked.packages,
        versions: checked.versions,
        artifacts: checked.artifacts,
        size: checked.bytes,
        trees: unpacked.trees,
        unpacked_size: unpacked.bytes,
        missing: checked.missing,
    };
    verify_text(printer, &report);
    printer.report(&report);
    Ok(())
}

/// What `verify` checked, as text.
fn verify_text(printer: &Printer, report: &VerifyReport) {
    printer.line(format!(
        "{} version {} (expires {}): signature good; {}, {}, {} ({}) match their hashes",
        report.repo_name,
        report.repo_version,
        report.expires,
        counted(report.packages, "package", "packages"),
        counted(report.versions, "version", "versions"),
        counted(report.artifacts, "artifact", "artifacts"),
        ByteSize(report.size)
    ));
    if report.trees > 0 {
        printer.line(format!(
            "{} to the {} {}",
            counted(report.trees, "tree unpacks", "trees unpack"),
            ByteSize(report.unpacked_size),
            kpack_cli::plural(report.trees, "it declares", "they declare")
        ));
    }
    if report.missing > 0 {
        printer.line(format!(
            "{} not mirrored here",
            counted(report.missing, "artifact", "artifacts")
        ));
    }
}

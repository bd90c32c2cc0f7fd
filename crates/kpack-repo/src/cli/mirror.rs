//! `kpack-repo mirror`: a repository copied, checked, with only the chosen
//! packages and GPUs.

use anyhow::Context;
use clap::Args;
use kpack_cli::{counted, ByteSize, JsonArg, Printer};
use kpack_gpu::Target;
use kpack_repo::mirror::{mirror as mirror_repository, Scope};
use kpack_repo::store::Store;
use kpack_repo_index::address::Address;
use kpack_repo_index::types::{PackageName, Timestamp};
use kpack_sign::PublicKey;
use serde::Serialize;

use super::options::{open_source, repository, LimitArgs, StorageArgs};

#[derive(Debug, Args)]
pub(super) struct MirrorArgs {
    /// The upstream repository: a directory, an http(s):// URL or
    /// s3://bucket/prefix.
    upstream: String,
    /// The mirror: a directory or s3://bucket/prefix.
    #[arg(value_parser = repository)]
    dest: Address,
    /// The upstream's public key file, or the key itself.
    #[arg(long = "key", alias = "pubkey", value_name = "PUBLIC_KEY")]
    pubkey: String,
    /// Mirror only the device code these GPU targets need, comma
    /// separated or repeated.
    #[arg(long = "target", alias = "targets", value_delimiter = ',', value_parser = Target::parse_given)]
    targets: Vec<Target>,
    #[arg(long, value_delimiter = ',')]
    packages: Vec<PackageName>,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    pub(super) json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

#[derive(Debug, Serialize)]
struct MirrorReport {
    upstream: String,
    dest: String,
    shards: usize,
    artifacts: Vec<String>,
    /// Bytes of the artifacts copied.
    size: u64,
}

pub(super) fn run(printer: &Printer, args: MirrorArgs) -> anyhow::Result<()> {
    let scope = Scope {
        targets: args.targets.clone(),
        packages: args.packages.clone(),
    };
    let key = PublicKey::load(&args.pubkey)?;
    let s3 = args.storage.s3();
    let source = open_source(&args.upstream, &s3, &args.limits)?;
    // Copied verbatim, so no publishing protocol: a plain store.
    let store = Store::open(&args.dest, &s3)?;
    let copied = mirror_repository(&source, &key, Timestamp::now(), &store, &scope)
        .with_context(|| format!("cannot mirror {}", args.upstream))?;
    let report = MirrorReport {
        upstream: args.upstream.clone(),
        dest: args.dest.to_string(),
        shards: copied.shards,
        artifacts: copied.artifacts,
        size: copied.bytes,
    };
    for artifact in &report.artifacts {
        printer.line(format!("  {artifact}"));
    }
    printer.line(format!(
        "mirrored {} and {} ({}) into {}",
        counted(report.shards, "shard", "shards"),
        counted(report.artifacts.len(), "artifact", "artifacts"),
        ByteSize(report.size),
        report.dest
    ));
    printer.report(&report);
    Ok(())
}

//! The `kpack-repo` command line: arguments here, one function per
//! command in `commands`. Exit codes: 0 success, 1 the command failed, 2
//! bad usage.

mod batch;
mod commands;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use kpack_cli::{JsonArg, OutputArgs, Printer};
use kpack_env::EnvVars;

use kpack_gpu::Target;
use kpack_repo::encode::TransportPolicy;
use kpack_repo::publish::{PublishOptions, Publisher};
use kpack_repo::source::Source;
use kpack_repo::store::{store_address, S3Options, StoreError};
use kpack_repo_index::address::Address;
use kpack_repo_index::fetch::Progress;
use kpack_repo_index::limits::{self, Limits};
use kpack_repo_index::types::{Component, Dependency, Listed, PackageName};
use kpack_sign::SecretKey;

/// Builds, signs and checks kpack repositories.
#[derive(Debug, Parser)]
#[command(name = "kpack-repo", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    output: OutputArgs,
}

/// How commands that write reach `s3://bucket/prefix` repositories;
/// credentials and region come from the usual AWS_* environment.
#[derive(Debug, Args)]
struct StorageArgs {
    /// The S3 API endpoint of a non-AWS store (MinIO, Ceph, R2, a local
    /// server); path-style addressing. Default: AWS_ENDPOINT_URL.
    #[arg(long, value_name = "URL", help_heading = "S3 options")]
    endpoint: Option<String>,
    /// Publish to a store that ignores conditional writes (If-None-Match,
    /// If-Match); safe only with a single publisher.
    #[arg(long, help_heading = "S3 options")]
    no_conditional_writes: bool,
    /// Part size of multipart uploads, in MiB (at least 5).
    #[arg(long, value_name = "MIB", default_value_t = 8, help_heading = "S3 options",
          value_parser = clap::value_parser!(u32).range(5..=4096))]
    part_size: u32,
}

/// How a command that only reads reaches an `s3://` repository: the
/// AWS_* environment (AWS_ENDPOINT_URL, AWS_REGION, credentials).
fn read_s3() -> S3Options {
    S3Options {
        endpoint: env(EnvVars::AWS_ENDPOINT_URL),
        region: env(EnvVars::AWS_REGION).or_else(|| env(EnvVars::AWS_DEFAULT_REGION)),
        part_size: 8 << 20,
    }
}

impl StorageArgs {
    fn s3(&self) -> S3Options {
        S3Options {
            endpoint: (self.endpoint.clone()).or_else(|| env(EnvVars::AWS_ENDPOINT_URL)),
            part_size: (self.part_size as usize) << 20,
            ..read_s3()
        }
    }

    fn open(&self, location: &Address) -> anyhow::Result<Publisher> {
        self.open_with(location, TransportPolicy::default())
    }

    /// Opens `location` for publishing archives as `transport` says.
    fn open_with(
        &self,
        location: &Address,
        transport: TransportPolicy,
    ) -> anyhow::Result<Publisher> {
        let options = PublishOptions {
            s3: self.s3(),
            check_conditional_writes: !self.no_conditional_writes,
            transport,
        };
        Publisher::open_at(location, &options)
            .with_context(|| format!("cannot publish to {location}"))
    }
}

/// Whether archives are compressed once more for the download
/// (04-repo-index.md, transport encodings).
#[derive(Debug, Args)]
struct TransportArgs {
    /// Publish every .kpack archive as it is, never zstd-encoded for the
    /// download.
    #[arg(long)]
    no_transport_encoding: bool,
    /// The least saving, in per cent of an archive's size, for which it is
    /// published zstd-encoded for the download (kpack-get 0.3.0 and later
    /// decode it; older clients refuse the version).
    #[arg(long, value_name = "PERCENT", default_value_t = TransportPolicy::default().min_saving_percent,
          value_parser = saving_percent)]
    transport_min_saving: f64,
}

impl TransportArgs {
    fn policy(&self) -> TransportPolicy {
        TransportPolicy {
            enabled: !self.no_transport_encoding,
            min_saving_percent: self.transport_min_saving,
        }
    }
}

/// A per cent from 0 to 100.
fn saving_percent(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(percent) if (0.0..=100.0).contains(&percent) => Ok(percent),
        _ => Err(format!("{text:?} is not a per cent from 0 to 100")),
    }
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make a minisign key pair (KEY.key, KEY.pub).
    Keygen(KeygenArgs),
    /// Add a package version's artifacts and publish.
    ///
    /// Artifacts are .kpack archives, .tar.zst trees, or directories packed
    /// into trees.
    Add(AddArgs),
    /// Pack manifests' packages and publish them in one root update.
    ///
    /// The packages are split with the packer; what is published already
    /// is left alone.
    Build(BuildArgs),
    /// Check every published file and publish a new root.
    ///
    /// Every file is checked against its shard; the new root has its
    /// version bumped and its dates refreshed.
    Index(IndexArgs),
    /// Drop all but the newest N versions of each package from the index.
    ///
    /// One root update; the files stay until `gc`.
    Prune(PruneArgs),
    /// Delete files no root a reader may still hold pins.
    ///
    /// Root copies, shards and pool files go once older than the grace
    /// period; a dry run unless --yes.
    Gc(GcArgs),
    /// Sign the current root.
    Sign(SignArgs),
    /// Check signature, expiry and every pinned hash and size.
    Verify(VerifyArgs),
    /// Copy a repository, checked, with only the chosen packages and GPUs.
    ///
    /// Metadata is copied verbatim, artifacts only for the chosen packages
    /// and GPU targets; everything is checked against the upstream's key
    /// and pinned hashes before it is written.
    Mirror(MirrorArgs),
}

#[derive(Debug, Args)]
struct KeygenArgs {
    /// Path of the key pair without extension.
    key: PathBuf,
    /// Store the secret key without a password (for CI); otherwise the
    /// password comes from KPACK_REPO_PASSWORD.
    #[arg(long)]
    unencrypted: bool,
    #[command(flatten)]
    json: JsonArg,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("device").args(["targets", "owner"])))]
#[command(group(clap::ArgGroup::new("signing").args(["key", "unsigned"]).required(true)))]
struct AddArgs {
    /// The repository: a directory or s3://bucket/prefix.
    #[arg(value_parser = repository)]
    repo: Address,
    package: PackageName,
    version: semver::Version,
    /// Artifacts: .kpack archives, .tar.zst trees, or directories (packed
    /// into <name>.tar.zst trees).
    #[arg(required = true)]
    artifacts: Vec<PathBuf>,
    /// A dependency, e.g. "rocm-core >=5.3, <6" (repeatable).
    #[arg(long = "depends")]
    depends: Vec<Dependency>,
    /// Marks the .tar.zst trees as device code for these targets.
    #[arg(long, value_delimiter = ',')]
    targets: Option<Vec<Listed>>,
    /// Marks the .tar.zst trees as device code every GPU of this
    /// sub-family or family needs (`gfx11`, `gfx12_0`): installed once
    /// when any of a machine's GPUs belongs to it.
    #[arg(long, value_name = "KEY", value_parser = group_owner)]
    owner: Option<kpack_gpu::Owner>,
    /// The component of device code the trees marked with --targets or
    /// --owner are, e.g. "tensile" for a kernel database payload (default
    /// "kernels", as for .kpack archives).
    #[arg(long, value_name = "NAME", requires = "device")]
    component: Option<Component>,
    #[arg(long)]
    summary: Option<String>,
    /// The fat package (a .deb, a wheel, a compressed tree) the artifacts
    /// were split from (repeatable): recorded with its size, so kpack-get
    /// can compare what it downloads with it.
    #[arg(long, value_name = "FILE")]
    built_from: Vec<PathBuf>,
    /// Secret key to sign the new root with (`kpack-repo keygen` makes
    /// one); a repository is published signed unless --unsigned says not.
    #[arg(long = "secret-key", alias = "key", value_name = "SECRET_KEY")]
    key: Option<PathBuf>,
    /// Publish without signing (a staging area, tests): kpack-get, which
    /// verifies every root, refuses such a repository.
    #[arg(long)]
    unsigned: bool,
    #[command(flatten)]
    transport: TransportArgs,
    #[command(flatten)]
    json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("signing").args(["key", "unsigned"]).required(true)))]
struct BuildArgs {
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
    json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

#[derive(Debug, Args)]
struct IndexArgs {
    /// The repository: a directory or s3://bucket/prefix.
    #[arg(value_parser = repository)]
    repo: Address,
    #[arg(long = "secret-key", alias = "key", value_name = "SECRET_KEY")]
    key: Option<PathBuf>,
    #[command(flatten)]
    json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

#[derive(Debug, Args)]
struct PruneArgs {
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
    json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

#[derive(Debug, Args)]
struct GcArgs {
    /// The repository: a directory or s3://bucket/prefix.
    #[arg(value_parser = repository)]
    repo: Address,
    /// How old an unpinned file must be to go, and how long a root stays
    /// readable after a newer one replaced it: `90s`, `30m`, `24h`, `7d`.
    #[arg(long, value_name = "AGE", default_value = "24h", value_parser = age)]
    grace: Duration,
    /// Delete; without it, only say what would go.
    #[arg(long)]
    yes: bool,
    #[command(flatten)]
    json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

/// `90s`, `30m`, `24h`, `7d`, or plain seconds.
fn age(text: &str) -> Result<Duration, String> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = match &text[digits.len()..] {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: an age is a number with s, m, h or d")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?}: an age is a number with s, m, h or d"))
}

#[derive(Debug, Args)]
struct SignArgs {
    /// The repository: a directory or s3://bucket/prefix.
    #[arg(value_parser = repository)]
    repo: Address,
    #[arg(long = "secret-key", alias = "key", value_name = "SECRET_KEY")]
    key: PathBuf,
    #[command(flatten)]
    json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

#[derive(Debug, Args)]
struct VerifyArgs {
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
    json: JsonArg,
}

/// Bounds on reading a repository (the signed index pins the size of
/// everything but the root and its signature).
#[derive(Debug, Args)]
struct LimitArgs {
    /// The most bytes read of the root index, and of a shard whose root
    /// pins no size.
    #[arg(long, value_name = "BYTES", env = EnvVars::KPACK_REPO_MAX_INDEX_SIZE,
          default_value_t = limits::DEFAULT_INDEX_SIZE)]
    max_index_size: u64,
    /// Fewer bytes per second than this over --low-speed-time fails the
    /// transfer (0: no minimum).
    #[arg(long, value_name = "BYTES", env = EnvVars::KPACK_REPO_LOW_SPEED_LIMIT,
          default_value_t = limits::DEFAULT_LOW_SPEED_LIMIT)]
    low_speed_limit: u64,
    /// The window the minimum rate is judged over.
    #[arg(long, value_name = "SECONDS", env = EnvVars::KPACK_REPO_LOW_SPEED_TIME,
          default_value_t = limits::DEFAULT_LOW_SPEED_TIME.as_secs_f64(), value_parser = seconds)]
    low_speed_time: f64,
    /// The longest the root, its signature or a shard may take to arrive.
    #[arg(long, value_name = "SECONDS", env = EnvVars::KPACK_REPO_INDEX_TIMEOUT,
          default_value_t = limits::DEFAULT_INDEX_TIMEOUT.as_secs_f64(), value_parser = seconds)]
    index_timeout: f64,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        Limits {
            index_size: self.max_index_size,
            low_speed_limit: self.low_speed_limit,
            low_speed_time: Duration::from_secs_f64(self.low_speed_time),
            index_timeout: Duration::from_secs_f64(self.index_timeout),
            ..Limits::default()
        }
    }
}

/// A positive number of seconds.
fn seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value > 0.0 && value < 1e9 => Ok(value),
        _ => Err(format!("{text:?} is not a positive number of seconds")),
    }
}

#[derive(Debug, Args)]
struct MirrorArgs {
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
    json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

/// The secret key's password, from the environment.
fn password() -> Result<String, std::env::VarError> {
    std::env::var(EnvVars::KPACK_REPO_PASSWORD)
}

/// An environment variable the command line reads besides its flags'.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn secret(path: &Path) -> anyhow::Result<SecretKey> {
    Ok(SecretKey::load(path, password().ok())?)
}

/// Parses arguments, runs the command, renders errors.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command, cli.output) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => kpack_cli::fail(&*error, None, kpack_cli::FAILURE),
    }
}

fn run(command: Command, output: OutputArgs) -> anyhow::Result<()> {
    let printer = |json: JsonArg| Printer::new(output, json.json);
    match command {
        Command::Keygen(args) => commands::keygen(&printer(args.json), args),
        Command::Add(args) => commands::add(&printer(args.json), args),
        Command::Build(args) => commands::build(&printer(args.json), args),
        Command::Index(args) => commands::index(&printer(args.json), args),
        Command::Prune(args) => commands::prune(&printer(args.json), args),
        Command::Gc(args) => commands::gc(&printer(args.json), args),
        Command::Sign(args) => commands::sign(&printer(args.json), args),
        Command::Verify(args) => commands::verify(&printer(args.json), args),
        Command::Mirror(args) => commands::mirror(&printer(args.json), args),
    }
}

/// `--owner`'s value: a sub-family or family; a target's trees are listed
/// with `--targets`.
fn group_owner(text: &str) -> Result<kpack_gpu::Owner, String> {
    let owner = kpack_gpu::Owner::parse(text).map_err(|e| e.to_string())?;
    if owner.level() == kpack_gpu::Level::Target {
        return Err(format!(
            "{text} is a target: --owner takes a sub-family or family (gfx12_0, gfx11); a target's trees take --targets"
        ));
    }
    Ok(owner)
}

/// A repository to write: a path or `s3://bucket/prefix`, never another URL
/// that would become a directory named after its scheme.
fn repository(text: &str) -> Result<Address, StoreError> {
    store_address(text)
}

/// The repository at `location`, read within `limits`; retries and
/// resumed transfers are told on stderr.
fn open_source(location: &str, s3: &S3Options, limits: &LimitArgs) -> anyhow::Result<Source> {
    let source = Source::open(location, s3, limits.limits())?;
    Ok(source.reporting_to(std::sync::Arc::new(Notes)))
}

/// Prints what a fetch has to tell (a retry, a resumed transfer).
struct Notes;

impl Progress for Notes {
    fn start(&self, _: &kpack_repo_index::Sha256, _: &str, _: u64, _: u64) {}
    fn advance(&self, _: &kpack_repo_index::Sha256, _: u64) {}
    fn finish(&self, _: &kpack_repo_index::Sha256, _: bool) {}
    fn note(&self, text: &str) {
        kpack_cli::write_err(&format!("note: {text}"));
    }
}

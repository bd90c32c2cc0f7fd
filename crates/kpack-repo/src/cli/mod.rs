//! The `kpack-repo` command line. Exit codes: 0 success, 1 the command
//! failed, 2 bad usage.
#![allow(clippy::print_stdout)]

mod batch;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use kpack_env::EnvVars;

use batch::{build_set, BatchOptions};
use kpack_gpu::Target;
use kpack_repo::build::{write_tree, TreeCompression};
use kpack_repo::encode::TransportPolicy;
use kpack_repo::manifest;
use kpack_repo::mirror::{mirror, Scope};
use kpack_repo::publish::{self, NewArtifact, NewVersion, PublishOptions, Publisher};
use kpack_repo::source::Source;
use kpack_repo::store::{store_address, S3Options, Store, StoreError};
use kpack_repo::tidy::collect_garbage;
use kpack_repo::unpacked::verify_unpacked_sizes;
use kpack_repo::verify::verify_repository_with;
use kpack_repo_index::address::Address;
use kpack_repo_index::fetch::Progress;
use kpack_repo_index::limits::{self, Limits};
use kpack_repo_index::types::{Component, Dependency, Listed, PackageName, Timestamp};
use kpack_repo_index::ByteSize;
use kpack_sign::{keygen, PublicKey, SecretKey};

/// Builds, signs and checks kpack repositories.
#[derive(Debug, Parser)]
#[command(name = "kpack-repo", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    storage: StorageArgs,
}

/// How to reach `s3://bucket/prefix` repositories; credentials and region
/// come from the usual AWS_* environment.
#[derive(Debug, Args)]
struct StorageArgs {
    /// The S3 API endpoint of a non-AWS store (MinIO, Ceph, R2, a local
    /// server); path-style addressing. Default: AWS_ENDPOINT_URL.
    #[arg(long, global = true, value_name = "URL")]
    endpoint: Option<String>,
    /// Publish to a store that ignores conditional writes (If-None-Match,
    /// If-Match); safe only with a single publisher.
    #[arg(long, global = true)]
    no_conditional_writes: bool,
    /// Part size of multipart uploads, in MiB (at least 5).
    #[arg(long, global = true, value_name = "MIB", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(5..=4096))]
    part_size: u32,
}

impl StorageArgs {
    fn s3(&self) -> S3Options {
        S3Options {
            endpoint: (self.endpoint.clone()).or_else(|| env(EnvVars::AWS_ENDPOINT_URL)),
            region: env(EnvVars::AWS_REGION).or_else(|| env(EnvVars::AWS_DEFAULT_REGION)),
            part_size: (self.part_size as usize) << 20,
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
    /// Add a package version's artifacts (.kpack archives, .tar.zst trees)
    /// and publish.
    Add(AddArgs),
    /// Pack manifests' packages with the packer and publish them, in one
    /// root update; what is published already is left alone.
    Build(BuildArgs),
    /// Check every published file against its shard and publish a new
    /// root (version bumped, dates refreshed).
    Index(IndexArgs),
    /// Drop all but the newest N versions of each package from the index,
    /// in one root update (files stay until `gc`).
    Prune(PruneArgs),
    /// Delete root copies, shards and pool files that no root a reader may
    /// still hold pins, once older than the grace period (a dry run unless
    /// --yes).
    Gc(GcArgs),
    /// Sign the current root.
    Sign(SignArgs),
    /// Check signature, expiry and every pinned hash and size.
    Verify(VerifyArgs),
    /// Copy a repository: metadata verbatim, artifacts only for the chosen
    /// packages and GPU targets; everything checked against the upstream's
    /// key and pinned hashes before it is written.
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
}

#[derive(Debug, Args)]
struct IndexArgs {
    /// The repository: a directory or s3://bucket/prefix.
    #[arg(value_parser = repository)]
    repo: Address,
    #[arg(long = "secret-key", alias = "key", value_name = "SECRET_KEY")]
    key: Option<PathBuf>,
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
    match run(cli.command, &cli.storage) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => kpack_cli::fail(&*error, None, kpack_cli::FAILURE),
    }
}

fn run(command: Command, storage: &StorageArgs) -> anyhow::Result<()> {
    match command {
        Command::Keygen(args) => keygen_command(args),
        Command::Add(args) => add_command(args, storage),
        Command::Build(args) => build_command(args, storage),
        Command::Index(args) => index_command(args, storage),
        Command::Prune(args) => prune_command(args, storage),
        Command::Gc(args) => gc_command(args, storage),
        Command::Sign(args) => sign_command(args, storage),
        Command::Verify(args) => verify_command(args, storage),
        Command::Mirror(args) => mirror_command(args, storage),
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

fn keygen_command(KeygenArgs { key, unencrypted }: KeygenArgs) -> anyhow::Result<()> {
    let password = if unencrypted {
        None
    } else {
        Some(password().context(
            "set KPACK_REPO_PASSWORD to the secret key's password, or pass --unencrypted",
        )?)
    };
    let (secret_path, public_path) = (key.with_extension("key"), key.with_extension("pub"));
    keygen(&secret_path, &public_path, password)?;
    println!(
        "wrote {} and {}",
        secret_path.display(),
        public_path.display()
    );
    // What users configure kpack-get with: the file or this line.
    let public = PublicKey::load(&public_path.to_string_lossy())?;
    println!(
        "public key: {} (kpack-get --key, or `key` in its configuration)",
        public.to_base64()
    );
    Ok(())
}

fn add_command(
    AddArgs {
        repo,
        package,
        version,
        artifacts,
        depends,
        targets,
        owner,
        component,
        summary,
        built_from,
        key,
        unsigned: _,
        transport,
    }: AddArgs,
    storage: &StorageArgs,
) -> anyhow::Result<()> {
    let key = key.as_deref().map(secret).transpose()?;
    let packed = tempfile::tempdir()?;
    let mut files = Vec::new();
    for artifact in artifacts {
        if artifact.is_dir() {
            let name = fs_err::canonicalize(&artifact)?
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "tree".into());
            let file = packed.path().join(format!("{name}.tar.zst"));
            let unpacked_size = write_tree(&artifact, &file, TreeCompression::Host)?;
            files.push((file, Some(unpacked_size)));
        } else {
            // A tree given as a file is decoded to count its unpacked size.
            files.push((artifact, None));
        }
    }
    let artifacts: Vec<NewArtifact> = files
        .into_iter()
        .map(|(file, unpacked_size)| {
            // --component is the trees'; an archive is of the default one.
            let archive = file.extension().is_some_and(|e| e == "kpack");
            NewArtifact {
                owner: owner.clone(),
                component: component.clone().filter(|_| !archive),
                file,
                targets: targets.clone(),
                unpacked_size,
            }
        })
        .collect();
    let new = NewVersion {
        name: package.clone(),
        version: version.clone(),
        depends,
        system_requires: Vec::new(),
        summary,
        built_from: built_from
            .iter()
            .map(|path| publish::built_from(path, None))
            .collect::<Result<_, _>>()?,
    };
    let root = storage
        .open_with(&repo, transport.policy())?
        .add(&new, &artifacts, key.as_ref())?;
    println!(
        "published {package} {version} in {repo} (repo {} version {}{})",
        root.repo.name,
        root.repo.version,
        if key.is_some() {
            ", signed"
        } else {
            ", unsigned"
        }
    );
    Ok(())
}

fn build_command(
    BuildArgs {
        repo,
        manifests,
        sources,
        key,
        unsigned: _,
        jobs,
        no_progress,
        transport,
    }: BuildArgs,
    storage: &StorageArgs,
) -> anyhow::Result<()> {
    let key = key.as_deref().map(secret).transpose()?;
    let set = manifest::manifest_files(&manifests)?
        .iter()
        .map(|path| manifest::resolve(path, sources.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let options = BatchOptions {
        jobs: jobs.map_or(cores, usize::from),
        progress: !no_progress && std::io::stderr().is_terminal(),
    };
    let opened = storage.open_with(&repo, transport.policy())?;
    let say = |line: &str| println!("{line}");
    let report = build_set(set, &opened, key.as_ref(), options, &say)
        .with_context(|| format!("nothing was published to {repo}"))?;
    let Some(root) = report.root else {
        println!(
            "nothing to publish: {} in {repo} already",
            published_list(&report.published)
        );
        return Ok(());
    };
    if !report.published.is_empty() {
        println!("left alone: {}", published_list(&report.published));
    }
    let bytes: u64 = report.built.iter().map(|(s, _)| s.bytes()).sum();
    println!(
        "published {} packages ({}) in {repo} as one root update (repo version {}, {})",
        report.built.len(),
        ByteSize(bytes),
        root.repo.version,
        if key.is_some() { "signed" } else { "unsigned" }
    );
    Ok(())
}

/// `rocm-blas 5.5.1+dfsg.deb.7, ...`.
fn published_list(published: &[manifest::Resolved]) -> String {
    let names: Vec<String> = published
        .iter()
        .map(|r| format!("{} {}", r.new.name, r.new.version))
        .collect();
    if names.is_empty() {
        "no packages".into()
    } else {
        format!("{} published", names.join(", "))
    }
}

fn index_command(IndexArgs { repo, key }: IndexArgs, storage: &StorageArgs) -> anyhow::Result<()> {
    let key = key.as_deref().map(secret).transpose()?;
    let root = storage.open(&repo)?.reindex(key.as_ref())?;
    println!("reindexed {repo}: version {}", root.repo.version);
    Ok(())
}

fn prune_command(
    PruneArgs { repo, keep, key }: PruneArgs,
    storage: &StorageArgs,
) -> anyhow::Result<()> {
    let key = key.as_deref().map(secret).transpose()?;
    let pruned = storage.open(&repo)?.prune(keep as usize, key.as_ref())?;
    let Some(root) = pruned.root else {
        println!("nothing to prune: no package in {repo} has more than {keep} versions to drop");
        return Ok(());
    };
    for (name, version) in &pruned.dropped {
        println!("  dropped {name} {version}");
    }
    println!(
        "pruned {} versions from {repo} (repo version {}, {}); `kpack-repo gc` deletes their files",
        pruned.dropped.len(),
        root.repo.version,
        if key.is_some() { "signed" } else { "unsigned" }
    );
    Ok(())
}

fn gc_command(GcArgs { repo, grace, yes }: GcArgs, storage: &StorageArgs) -> anyhow::Result<()> {
    // Deleting needs no publishing protocol: a plain store.
    let store = Store::open(&repo, &storage.s3())?;
    let collected = collect_garbage(&store, grace, Timestamp::now(), yes)
        .with_context(|| format!("cannot collect the garbage of {repo}"))?;
    let roots: Vec<String> = collected.roots.iter().map(u64::to_string).collect();
    println!("roots still readable: {}", roots.join(", "));
    for object in &collected.garbage {
        println!("  {} ({})", object.key, ByteSize(object.size));
    }
    let (files, bytes) = (collected.garbage.len(), ByteSize(collected.bytes()));
    if yes {
        println!("deleted {files} files ({bytes}) from {repo}");
    } else {
        println!("would delete {files} files ({bytes}) from {repo}; --yes deletes them");
    }
    if !collected.young.is_empty() {
        let young: u64 = collected.young.iter().map(|o| o.size).sum();
        println!(
            "kept {} unpinned files ({}) younger than the grace period",
            collected.young.len(),
            ByteSize(young)
        );
    }
    Ok(())
}

fn sign_command(SignArgs { repo, key }: SignArgs, storage: &StorageArgs) -> anyhow::Result<()> {
    let opened = storage.open(&repo)?;
    opened.sign(&secret(&key)?)?;
    println!("signed {}", opened.store().location("index.toml"));
    Ok(())
}

fn verify_command(
    VerifyArgs {
        repo,
        pubkey,
        partial,
        limits,
    }: VerifyArgs,
    storage: &StorageArgs,
) -> anyhow::Result<()> {
    let source = open_source(&repo, storage, &limits)?;
    let key = PublicKey::load(&pubkey)?;
    let (root, report) = verify_repository_with(&source, &key, Timestamp::now(), None, partial)
        .with_context(|| format!("{repo} does not verify"))?;
    let unpacked =
        verify_unpacked_sizes(&source, &root).with_context(|| format!("{repo} does not verify"))?;
    println!(
        "{} version {} (expires {}): signature good; {} packages, {} versions, {} artifacts ({} bytes) match their hashes",
        root.repo.name,
        root.repo.version,
        root.repo.expires,
        report.packages,
        report.versions,
        report.artifacts,
        report.bytes
    );
    if unpacked.trees > 0 {
        println!(
            "{} trees unpack to the {} bytes they declare",
            unpacked.trees, unpacked.bytes
        );
    }
    if report.missing > 0 {
        println!("{} artifacts not mirrored here", report.missing);
    }
    Ok(())
}

fn mirror_command(
    MirrorArgs {
        upstream,
        dest,
        pubkey,
        targets,
        packages,
        limits,
    }: MirrorArgs,
    storage: &StorageArgs,
) -> anyhow::Result<()> {
    let scope = Scope { targets, packages };
    let key = PublicKey::load(&pubkey)?;
    let source = open_source(&upstream, storage, &limits)?;
    // Copied verbatim, so no publishing protocol: a plain store.
    let store = Store::open(&dest, &storage.s3())?;
    let report = mirror(&source, &key, Timestamp::now(), &store, &scope)
        .with_context(|| format!("cannot mirror {upstream}"))?;
    for artifact in &report.artifacts {
        println!("  {artifact}");
    }
    println!(
        "mirrored {} shards and {} artifacts ({} bytes) into {dest}",
        report.shards,
        report.artifacts.len(),
        report.bytes,
    );
    Ok(())
}

/// The repository at `location`, read within `limits`; retries and
/// resumed transfers are told on stderr.
fn open_source(
    location: &str,
    storage: &StorageArgs,
    limits: &LimitArgs,
) -> anyhow::Result<Source> {
    let source = Source::open(location, &storage.s3(), limits.limits())?;
    Ok(source.reporting_to(std::sync::Arc::new(Notes)))
}

/// Prints what a fetch has to tell (a retry, a resumed transfer).
struct Notes;

impl Progress for Notes {
    fn start(&self, _: &kpack_repo_index::Sha256, _: &str, _: u64, _: u64) {}
    fn advance(&self, _: &kpack_repo_index::Sha256, _: u64) {}
    fn finish(&self, _: &kpack_repo_index::Sha256, _: bool) {}
    fn note(&self, text: &str) {
        eprintln!("note: {text}");
    }
}

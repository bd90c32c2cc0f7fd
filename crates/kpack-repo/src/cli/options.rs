//! What several commands share: how a repository to write is reached
//! (`StorageArgs`) and a repository to read (`LimitArgs`, the AWS_*
//! environment), whether archives are encoded for transport
//! (`TransportArgs`), the secret key and its password, and the parsers of
//! their values.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use kpack_env::EnvVars;
use kpack_repo::encode::TransportPolicy;
use kpack_repo::publish::{PublishOptions, Publisher};
use kpack_repo::source::Source;
use kpack_repo::store::{store_address, S3Options, StoreError};
use kpack_repo_index::address::Address;
use kpack_repo_index::fetch::Progress;
use kpack_repo_index::limits::{self, Limits};
use kpack_sign::SecretKey;

/// How commands that write reach `s3://bucket/prefix` repositories;
/// credentials and region come from the usual AWS_* environment.
#[derive(Debug, Args)]
pub(super) struct StorageArgs {
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
pub(super) fn read_s3() -> S3Options {
    S3Options {
        endpoint: env(EnvVars::AWS_ENDPOINT_URL),
        region: env(EnvVars::AWS_REGION).or_else(|| env(EnvVars::AWS_DEFAULT_REGION)),
        part_size: 8 << 20,
    }
}

impl StorageArgs {
    /// The S3 options: these flags, else the AWS_* environment.
    pub(super) fn s3(&self) -> S3Options {
        S3Options {
            endpoint: (self.endpoint.clone()).or_else(|| env(EnvVars::AWS_ENDPOINT_URL)),
            part_size: (self.part_size as usize) << 20,
            ..read_s3()
        }
    }

    /// Opens `location` for publishing, archives encoded for transport as
    /// the default policy says.
    pub(super) fn open(&self, location: &Address) -> anyhow::Result<Publisher> {
        self.open_with(location, TransportPolicy::default())
    }

    /// Opens `location` for publishing archives as `transport` says.
    pub(super) fn open_with(
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
pub(super) struct TransportArgs {
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
    pub(super) fn policy(&self) -> TransportPolicy {
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

/// Bounds on reading a repository (the signed index pins the size of
/// everything but the root and its signature).
#[derive(Debug, Args)]
pub(super) struct LimitArgs {
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

/// The secret key's password, from the environment.
pub(super) fn password() -> Result<String, std::env::VarError> {
    std::env::var(EnvVars::KPACK_REPO_PASSWORD)
}

/// An environment variable the command line reads besides its flags'.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The secret key at `path`, unlocked with the password from the
/// environment.
pub(super) fn secret(path: &Path) -> anyhow::Result<SecretKey> {
    Ok(SecretKey::load(path, password().ok())?)
}

/// A repository to write: a path or `s3://bucket/prefix`, never another URL
/// that would become a directory named after its scheme.
pub(super) fn repository(text: &str) -> Result<Address, StoreError> {
    store_address(text)
}

/// The repository at `location`, read within `limits`; retries and
/// resumed transfers are told on stderr.
pub(super) fn open_source(
    location: &str,
    s3: &S3Options,
    limits: &LimitArgs,
) -> anyhow::Result<Source> {
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

//! The HTTP client: rustls, HTTP/2 where offered, bounded concurrency,
//! sha256 while streaming, resume, retries with backoff and failover to
//! the next mirror.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::limits::{Cap, Limits};
use crate::schema::{Pin, Transport};
use crate::{RelativePath, Sha256};

use super::download;
use super::failover::Walk;
use super::small::Small;
use super::transfer::Transfer;
use super::{AttemptError, Cache, Mirror, Progress, Silent};

/// Why files could not be fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    #[error("{path} is not in the download cache and --offline forbids downloading it")]
    Offline { path: String },
    #[error("{}", list_failures(path, failures))]
    AllMirrorsFailed {
        path: String,
        failures: Vec<MirrorFailure>,
    },
    #[error("the download cache")]
    Cache(#[source] std::io::Error),
    /// The writer a file was streamed into failed.
    #[error("{path}: writing what was fetched")]
    Output {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the HTTP client: {0}")]
    Setup(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("cannot start the HTTP client: a download task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
}

/// One mirror's last failure for a file.
#[derive(Debug)]
pub struct MirrorFailure {
    pub url: String,
    pub error: AttemptError,
    /// The mirror served bytes that do not match the index's pin.
    pub integrity: bool,
    /// The mirror does not have the file.
    pub missing: bool,
}

impl MirrorFailure {
    /// A failure whose URL is filled in when its mirror is given up.
    pub(super) fn new(error: AttemptError, integrity: bool, missing: bool) -> MirrorFailure {
        MirrorFailure {
            url: String::new(),
            error,
            integrity,
            missing,
        }
    }
}

/// One mirror's failure as the URL and the error; several, listed.
fn list_failures(path: &str, failures: &[MirrorFailure]) -> String {
    match failures {
        [one] => format!("{}: {}", one.url, one.error),
        _ => failures
            .iter()
            .fold(format!("{path}: every mirror failed:"), |text, f| {
                text + &format!("\n  {}: {}", f.url, f.error)
            }),
    }
}

impl ClientError {
    /// Whether a mirror served tampered or wrong bytes (a verification
    /// failure rather than a network one).
    pub fn is_integrity(&self) -> bool {
        matches!(self, ClientError::AllMirrorsFailed { failures, .. } if failures.iter().any(|f| f.integrity))
    }

    /// Whether no mirror has the file (and none failed otherwise).
    pub fn is_missing(&self) -> bool {
        matches!(self, ClientError::AllMirrorsFailed { failures, .. }
            if !failures.is_empty() && failures.iter().all(|f| f.missing))
    }
}

/// A small pinned file (a shard) to fetch: the mirrors of its
/// repository, its path and the sha256 (and size, if pinned) it must have.
#[derive(Debug, Clone, Copy)]
pub struct PinnedFile<'a> {
    pub mirrors: &'a [Mirror],
    pub path: &'a str,
    pub sha256: Sha256,
    pub size: Option<u64>,
}

/// Tuning for the client; defaults suit a user's installs.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub concurrency: usize,
    /// Attempts per mirror before moving to the next.
    pub attempts: u32,
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes of a response (no total timeout:
    /// large files on slow links are fine while bytes flow).
    pub read_timeout: Duration,
    /// First retry delay; doubled for each further attempt.
    pub backoff: Duration,
    pub offline: bool,
    /// Caps on what nothing signed pins, the minimum rate, and the
    /// deadline of the small index files.
    pub limits: Limits,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            concurrency: 8,
            attempts: 3,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            backoff: Duration::from_millis(250),
            offline: false,
            limits: Limits::default(),
        }
    }
}

/// A pinned file to fetch from any of `mirrors`: `sha256` and `size` pin
/// the bytes served; a transport-encoded file is decoded as it arrives and
/// cached as it decodes.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub path: RelativePath,
    pub sha256: Sha256,
    pub size: u64,
    pub transport: Option<Transport>,
    pub mirrors: Arc<[Mirror]>,
}

impl Wanted {
    /// The file the cache keeps: what a transport-encoded file decodes
    /// to, otherwise the file served.
    pub fn stored(&self) -> Pin {
        match &self.transport {
            Some(transport) => transport.decoded,
            None => Pin {
                sha256: self.sha256,
                size: self.size,
            },
        }
    }
}

/// The HTTP client and the runtime it runs on.
#[derive(Debug)]
pub struct Client {
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
    options: ClientOptions,
}

impl Client {
    pub fn new(options: ClientOptions) -> Result<Client, ClientError> {
        let setup = |error: Box<dyn std::error::Error + Send + Sync>| ClientError::Setup(error);
        // The ring provider, installed once per process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| setup(Box::new(e)))?;
        let http = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .read_timeout(options.read_timeout)
            .user_agent(concat!("kpack-get/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| setup(Box::new(e)))?;
        Ok(Client {
            runtime,
            http,
            options,
        })
    }

    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// An unpinned small file (the root index, its signature) from the
    /// first mirror that has it, read up to its cap.
    pub fn fetch_unpinned(&self, mirrors: &[Mirror], path: &str) -> Result<Vec<u8>, ClientError> {
        let cap = self.options.limits.unpinned(path);
        self.fetch_small(mirrors, path, Small::capped(cap), &Silent)
    }

    /// A small pinned file (a shard) from the first mirror whose copy has
    /// the pinned hash, read up to the pinned size (the index cap when
    /// the root pins none).
    pub fn fetch_verified(
        &self,
        mirrors: &[Mirror],
        path: &str,
        sha256: Sha256,
        size: Option<u64>,
    ) -> Result<Vec<u8>, ClientError> {
        let file = PinnedFile {
            mirrors,
            path,
            sha256,
            size,
        };
        self.fetch_small(mirrors, path, self.pinned(&file), &Silent)
    }

    /// Small pinned files (shards), each as [`Client::fetch_verified`]
    /// fetches one, at most `concurrency` at once: their bytes or errors,
    /// in the order given.
    pub fn fetch_verified_all(
        &self,
        files: &[PinnedFile<'_>],
    ) -> Vec<Result<Vec<u8>, ClientError>> {
        use futures_util::stream::{self, StreamExt};
        if self.options.offline {
            let offline = |file: &PinnedFile<'_>| ClientError::Offline {
                path: file.path.to_owned(),
            };
            return files.iter().map(|file| Err(offline(file))).collect();
        }
        let transfer = self.transfer(&Silent);
        let fetches = files
            .iter()
            .map(|file| transfer.small(file.mirrors, file.path, self.pinned(file)));
        let concurrency = self.options.concurrency.max(1);
        self.runtime
            .block_on(stream::iter(fetches).buffered(concurrency).collect())
    }

    /// How `file` is read: its pin, within its pinned size (the index cap
    /// when the root pins none).
    fn pinned(&self, file: &PinnedFile<'_>) -> Small<'static> {
        let cap = self.options.limits.pinned_or_unpinned(file.path, file.size);
        Small {
            pin: Some(file.sha256),
            ..Small::capped(cap)
        }
    }

    /// A small file from the first mirror that has it, read up to `cap`;
    /// `None` when no mirror has it. Retries are told to `progress`.
    pub fn fetch_optional(
        &self,
        mirrors: &[Mirror],
        path: &str,
        cap: Cap,
        progress: &dyn Progress,
    ) -> Result<Option<Vec<u8>>, ClientError> {
        self.fetch_page(mirrors, path, cap, None, progress)
    }

    /// As [`Client::fetch_optional`], asking for the media types `accept`
    /// names (a package index's JSON pages before its HTML ones, say).
    pub fn fetch_page(
        &self,
        mirrors: &[Mirror],
        path: &str,
        cap: Cap,
        accept: Option<&str>,
        progress: &dyn Progress,
    ) -> Result<Option<Vec<u8>>, ClientError> {
        let small = Small {
            accept,
            ..Small::capped(cap)
        };
        match self.fetch_small(mirrors, path, small, progress) {
            Err(error) if error.is_missing() => Ok(None),
            fetched => fetched.map(Some),
        }
    }

    /// A file of any size streamed into `out`, at most `cap` bytes, with
    /// the retries, resume and failover of every other fetch; `false`,
    /// with nothing written, when no mirror has it.
    pub fn stream(
        &self,
        mirrors: &[Mirror],
        path: &str,
        cap: Cap,
        out: &mut dyn std::io::Write,
        progress: &dyn Progress,
    ) -> Result<bool, ClientError> {
        if self.options.offline {
            return Err(ClientError::Offline {
                path: path.to_owned(),
            });
        }
        let transfer = self.transfer(progress);
        self.runtime
            .block_on(transfer.stream(mirrors, path, cap, out))
    }

    /// What every transfer of this client shares.
    fn transfer<'a>(&'a self, progress: &'a dyn Progress) -> Transfer<'a> {
        Transfer {
            http: &self.http,
            options: &self.options,
            progress,
        }
    }

    /// Runs `attempt` on each of `mirrors` in turn until one succeeds, in
    /// the order every fetch fails over in (the attempt's own fetches
    /// retry); when none does, every mirror's failure, in that order.
    pub fn first_mirror<'m, T, E>(
        &self,
        mirrors: &'m [Mirror],
        mut attempt: impl FnMut(&Mirror) -> Result<T, E>,
    ) -> Result<T, Vec<(&'m Mirror, E)>> {
        let mut walk = Walk::new(mirrors);
        while let Some(mirror) = walk.current() {
            match attempt(mirror) {
                Ok(value) => return Ok(value),
                Err(error) => walk.failed(error),
            }
            walk.give_up(|_, error| error);
        }
        Err(walk.into_failures())
    }

    fn fetch_small(
        &self,
        mirrors: &[Mirror],
        path: &str,
        small: Small<'_>,
        progress: &dyn Progress,
    ) -> Result<Vec<u8>, ClientError> {
        if self.options.offline {
            return Err(ClientError::Offline {
                path: path.to_owned(),
            });
        }
        let transfer = self.transfer(progress);
        self.runtime.block_on(transfer.small(mirrors, path, small))
    }

    /// Every file of `wanted` into `cache`, at most `concurrency` at once;
    /// afterwards each is in the cache under its hash
    /// ([`Cache::blob`]; a transport-encoded file decoded, under its
    /// decoded hash). Files already cached are not fetched. On the
    /// first failure the others stop (their partial files stay for a
    /// resume) and that failure is returned.
    pub fn fetch_all(
        &self,
        cache: &Cache,
        wanted: &[Wanted],
        progress: Arc<dyn Progress>,
    ) -> Result<(), ClientError> {
        cache.create_dirs().map_err(ClientError::Cache)?;
        let mut seen = BTreeSet::new();
        let mut missing = Vec::new();
        for item in wanted.iter().filter(|w| seen.insert(w.stored().sha256)) {
            let stored = item.stored();
            if cache.get_verified(&stored.sha256, stored.size).is_some() {
                progress.start(&item.sha256, item.path.as_str(), item.size, item.size);
                progress.finish(&item.sha256, true);
            } else if self.options.offline {
                return Err(ClientError::Offline {
                    path: item.path.to_string(),
                });
            } else {
                missing.push(item.clone());
            }
        }
        if !missing.is_empty() {
            self.runtime.block_on(download::fetch_many(
                &self.http,
                &self.options,
                cache,
                missing,
                progress,
            ))?;
        }
        match wanted
            .iter()
            .map(Wanted::stored)
            .find(|stored| cache.get(&stored.sha256, stored.size).is_none())
        {
            Some(gone) => Err(ClientError::Cache(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "{} was removed from the cache while in use",
                    cache.blob(&gone.sha256).display()
                ),
            ))),
            None => Ok(()),
        }
    }
}

//! Where a repository's files come from: a directory (or `file://` URL),
//! an HTTP(S) server (through the [`Client`], with its retries and resume)
//! or a bucket. Each gives the same bytes for a relative path, so the same
//! verification runs against any.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kpack_repo_index::address::{Address, Refusal};
use kpack_repo_index::fetch::{Client, ClientError, ClientOptions, Mirror, Progress, Silent};
use kpack_repo_index::limits::{Cap, LimitError, Limits, LowSpeed};

/// Why a file cannot be fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// Reading a directory source; the error names the path.
    #[error(transparent)]
    Io(std::io::Error),
    /// Fetching over HTTP, after the client's retries and resume.
    #[error(transparent)]
    Client(ClientError),
    #[error("{location}: not found")]
    NotFound { location: String },
    #[error("{location}: {limit}")]
    Limit { location: String, limit: LimitError },
    /// An address this source cannot read (a bucket without S3 options).
    #[error("{location}: {refusal}")]
    Refused {
        location: String,
        #[source]
        refusal: Refusal,
    },
    #[error(transparent)]
    Address(kpack_repo_index::address::InvalidAddress),
    /// Reading a bucket; the error names the object.
    #[error(transparent)]
    Store(Box<crate::store::StoreError>),
}

pub use kpack_repo_index::address::url_scheme;

/// A repository location, and the bounds its reads keep to.
pub struct Source {
    origin: Origin,
    limits: Limits,
    /// Told of retries and resumed transfers.
    progress: Arc<dyn Progress>,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("origin", &self.origin)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
enum Origin {
    Local(Local),
    /// Through the client, with its retries and resume.
    Http {
        client: Box<Client>,
        mirror: Mirror,
    },
}

/// Read directly, not through the HTTP client: a directory, or a bucket
/// through the S3 API.
#[derive(Debug)]
enum Local {
    Dir(PathBuf),
    /// A bucket, read through the S3 API (with credentials).
    Store(Box<crate::store::Store>),
}

impl Source {
    /// `http://` and `https://` URLs are fetched; `file://` URLs and paths
    /// are directories; other URLs are refused. Reads keep to `limits`.
    pub fn parse(location: &str, limits: Limits) -> Result<Source, FetchError> {
        let origin = match Address::parse(location).map_err(FetchError::Address)? {
            Address::Dir(path) => Origin::Local(Local::Dir(path)),
            Address::Http(base) => {
                // Each wait for bytes ends within the low-speed window,
                // which the client then judges.
                let client = Client::new(ClientOptions {
                    connect_timeout: Duration::from_secs(15),
                    read_timeout: limits.low_speed_time.max(Duration::from_secs(1)),
                    limits,
                    ..ClientOptions::default()
                })
                .map_err(FetchError::Client)?;
                Origin::Http {
                    client: Box::new(client),
                    mirror: Mirror::http(base),
                }
            }
            Address::S3 { .. } => {
                return Err(FetchError::Refused {
                    location: location.to_owned(),
                    refusal: Refusal::Scheme("s3".to_owned()),
                })
            }
        };
        Ok(Source::new(origin, limits))
    }

    fn new(origin: Origin, limits: Limits) -> Source {
        Source {
            origin,
            limits,
            progress: Arc::new(Silent),
        }
    }

    /// Tells `progress` of retries and resumed transfers.
    pub fn reporting_to(mut self, progress: Arc<dyn Progress>) -> Source {
        self.progress = progress;
        self
    }

    /// As [`Source::parse`], and `s3://bucket/prefix` read through the S3
    /// API as `s3` says.
    pub fn open(
        location: &str,
        s3: &crate::store::S3Options,
        limits: Limits,
    ) -> Result<Source, FetchError> {
        use crate::store::{store_address, Store};
        if url_scheme(location) != Some("s3") {
            return Source::parse(location, limits);
        }
        let store = store_address(location)
            .and_then(|parsed| Store::open(&parsed, s3))
            .map_err(|e| FetchError::Store(Box::new(e)))?;
        Ok(Source::new(
            Origin::Local(Local::Store(Box::new(store))),
            limits,
        ))
    }

    /// A directory source, with the default limits.
    pub fn dir(path: &Path) -> Source {
        Source::new(
            Origin::Local(Local::Dir(path.to_owned())),
            Limits::default(),
        )
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Where `relative` is, for messages.
    pub fn location(&self, relative: &str) -> String {
        match &self.origin {
            Origin::Local(Local::Dir(dir)) => dir.join(relative).display().to_string(),
            Origin::Http { mirror, .. } => mirror.locate(relative).to_string(),
            Origin::Local(Local::Store(store)) => store.location(relative),
        }
    }

    /// The bytes of `relative`, which must exist, within `cap` and the
    /// index timeout.
    pub fn read_capped(&self, relative: &str, cap: Cap) -> Result<Vec<u8>, FetchError> {
        self.read_small(relative, cap)?
            .ok_or_else(|| FetchError::NotFound {
                location: self.location(relative),
            })
    }

    /// The bytes of `relative`, which must exist, within its cap.
    pub fn read(&self, relative: &str) -> Result<Vec<u8>, FetchError> {
        self.read_capped(relative, self.limits.unpinned(relative))
    }

    fn read_small(&self, relative: &str, cap: Cap) -> Result<Option<Vec<u8>>, FetchError> {
        let local = match &self.origin {
            Origin::Local(local) => local,
            Origin::Http { client, mirror } => {
                let mirrors = std::slice::from_ref(mirror);
                return client
                    .fetch_optional(mirrors, relative, cap, self.progress.as_ref())
                    .map_err(FetchError::Client);
            }
        };
        let deadline = Instant::now() + self.limits.index_timeout;
        let mut bytes = Vec::new();
        let found = self.copy_local(local, relative, &mut bytes, cap, Some(deadline))?;
        Ok(found.then_some(bytes))
    }

    /// Streams `relative` into `out` (an artifact may be gigabytes), at
    /// most `cap` bytes and no slower than the minimum rate; `false`, with
    /// nothing written, when it does not exist.
    pub fn copy_to(
        &self,
        relative: &str,
        out: &mut dyn Write,
        cap: Cap,
    ) -> Result<bool, FetchError> {
        match &self.origin {
            Origin::Local(local) => self.copy_local(local, relative, out, cap, None),
            Origin::Http { client, mirror } => {
                let mirrors = std::slice::from_ref(mirror);
                let progress = self.progress.as_ref();
                client
                    .stream(mirrors, relative, cap, out, progress)
                    .map_err(FetchError::Client)
            }
        }
    }

    /// A directory's or a bucket's file into `out`, within `cap`, the
    /// minimum rate and the deadline.
    fn copy_local(
        &self,
        local: &Local,
        relative: &str,
        out: &mut dyn Write,
        cap: Cap,
        deadline: Option<Instant>,
    ) -> Result<bool, FetchError> {
        let Some(reader) = local.reader(relative)? else {
            return Ok(false);
        };
        let mut bounded = Bounded::new(reader, cap, &self.limits, deadline);
        std::io::copy(&mut bounded, out).map_err(|e| match limit_of(&e) {
            Some(limit) => FetchError::Limit {
                location: self.location(relative),
                limit,
            },
            None => FetchError::Io(e),
        })?;
        Ok(true)
    }
}

impl Local {
    /// A reader of `relative`; `None` when it does not exist.
    fn reader(&self, relative: &str) -> Result<Option<Box<dyn Read + '_>>, FetchError> {
        Ok(Some(match self {
            Local::Dir(dir) => match fs_err::File::open(dir.join(relative)) {
                Ok(file) => Box::new(file),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(source) => return Err(FetchError::Io(source)),
            },
            Local::Store(store) => match store.reader(relative) {
                Ok(Some(reader)) => reader,
                Ok(None) => return Ok(None),
                Err(e) => return Err(FetchError::Store(Box::new(e))),
            },
        }))
    }
}

/// The bound a reader went past, if that is why it failed.
fn limit_of(error: &std::io::Error) -> Option<LimitError> {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<LimitError>())
        .cloned()
}

/// A reader kept to a cap (reading at most one byte past it, to tell a
/// longer file from an exact one), the minimum rate, and a deadline.
struct Bounded<R> {
    inner: R,
    cap: Cap,
    read: u64,
    speed: LowSpeed,
    deadline: Option<(Instant, Duration)>,
}

impl<R: Read> Bounded<R> {
    fn new(inner: R, cap: Cap, limits: &Limits, deadline: Option<Instant>) -> Bounded<R> {
        Bounded {
            inner,
            cap,
            read: 0,
            speed: LowSpeed::new(limits),
            deadline: deadline.map(|at| (at, limits.index_timeout)),
        }
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let room = (self.cap.bytes() + 1).saturating_sub(self.read);
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        self.read += n as u64;
        let now = Instant::now();
        self.cap.check(self.read).map_err(std::io::Error::other)?;
        if let Some((at, timeout)) = self.deadline {
            if now > at {
                return Err(std::io::Error::other(LimitError::Deadline(timeout)));
            }
        }
        self.speed
            .received(n as u64, now)
            .map_err(std::io::Error::other)?;
        Ok(n)
    }
}

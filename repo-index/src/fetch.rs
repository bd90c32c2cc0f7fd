//! Where a repository's files come from: a directory (or `file://` URL) or
//! an HTTP(S) server. Both give the same bytes for a relative path, so the
//! same verification runs against either.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a file cannot be fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// Reading a directory source; the error names the path.
    #[error(transparent)]
    Io(std::io::Error),
    #[error("{location}: {message}")]
    Http { location: String, message: String },
    #[error("{location}: not found")]
    NotFound { location: String },
    #[error("{location}: a {scheme}:// URL; a repository is a directory, a file:// URL, an http(s):// URL or an s3://bucket/prefix")]
    UnsupportedScheme { location: String, scheme: String },
    /// Reading a bucket; the error names the object.
    #[cfg(feature = "publish")]
    #[error(transparent)]
    Store(Box<crate::store::StoreError>),
}

/// The scheme of a URL (`s3` of `s3://bucket/prefix`), or `None` for a
/// path: something a path argument must never quietly become a directory
/// named after (`s3:`).
pub fn url_scheme(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once("://")?;
    let mut bytes = scheme.bytes();
    let starts = bytes.next().is_some_and(|b| b.is_ascii_alphabetic());
    (starts && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
        .then_some(scheme)
}

/// A repository location.
#[derive(Debug)]
pub enum Source {
    Dir(PathBuf),
    Http {
        base: String,
        client: reqwest::blocking::Client,
    },
    /// A bucket, read through the S3 API (with credentials).
    #[cfg(feature = "publish")]
    Store(Box<crate::store::Store>),
}

impl Source {
    /// `http://` and `https://` URLs are fetched; `file://` URLs and paths
    /// are directories; other URLs are refused.
    pub fn parse(location: &str) -> Result<Source, FetchError> {
        match url_scheme(location) {
            None | Some("http" | "https" | "file") => {}
            Some(scheme) => {
                return Err(FetchError::UnsupportedScheme {
                    location: location.to_owned(),
                    scheme: scheme.to_owned(),
                })
            }
        }
        if location.starts_with("http://") || location.starts_with("https://") {
            // The ring provider, installed once per process; a second
            // install is refused harmlessly.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let client = reqwest::blocking::Client::builder()
                .connect_timeout(Duration::from_secs(15))
                .timeout(Duration::from_secs(600))
                .build()
                .map_err(|e| FetchError::Http {
                    location: location.to_owned(),
                    message: e.to_string(),
                })?;
            let base = if location.ends_with('/') {
                location.to_owned()
            } else {
                format!("{location}/")
            };
            return Ok(Source::Http { base, client });
        }
        let path = location.strip_prefix("file://").unwrap_or(location);
        Ok(Source::Dir(PathBuf::from(path)))
    }

    /// As [`Source::parse`], and `s3://bucket/prefix` read through the S3
    /// API as `s3` says.
    #[cfg(feature = "publish")]
    pub fn open(location: &str, s3: &crate::store::S3Options) -> Result<Source, FetchError> {
        use crate::store::{Location, Store};
        if url_scheme(location) != Some("s3") {
            return Source::parse(location);
        }
        let store = Location::parse(location)
            .and_then(|parsed| Store::open(&parsed, s3))
            .map_err(|e| FetchError::Store(Box::new(e)))?;
        Ok(Source::Store(Box::new(store)))
    }

    /// A directory source.
    pub fn dir(path: &Path) -> Source {
        Source::Dir(path.to_owned())
    }

    /// Where `relative` is, for messages.
    pub fn location(&self, relative: &str) -> String {
        match self {
            Source::Dir(dir) => dir.join(relative).display().to_string(),
            Source::Http { base, .. } => format!("{base}{relative}"),
            #[cfg(feature = "publish")]
            Source::Store(store) => store.location(relative),
        }
    }

    /// The bytes of `relative`; `Ok(None)` when it does not exist.
    pub fn read_optional(&self, relative: &str) -> Result<Option<Vec<u8>>, FetchError> {
        let mut bytes = Vec::new();
        Ok(self.copy_to(relative, &mut bytes)?.then_some(bytes))
    }

    /// Streams `relative` into `out` (an artifact may be gigabytes);
    /// `false`, with nothing written, when it does not exist.
    pub fn copy_to(&self, relative: &str, out: &mut dyn Write) -> Result<bool, FetchError> {
        let location = self.location(relative);
        let http = |message: String| FetchError::Http {
            location: location.clone(),
            message,
        };
        let mut reader: Box<dyn Read + '_> = match self {
            Source::Dir(dir) => match fs_err::File::open(dir.join(relative)) {
                Ok(file) => Box::new(file),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
                Err(source) => return Err(FetchError::Io(source)),
            },
            Source::Http { client, .. } => {
                let response = client
                    .get(&location)
                    .send()
                    .map_err(|e| http(e.to_string()))?;
                if response.status() == reqwest::StatusCode::NOT_FOUND {
                    return Ok(false);
                }
                if !response.status().is_success() {
                    return Err(http(format!("HTTP {}", response.status())));
                }
                Box::new(response)
            }
            #[cfg(feature = "publish")]
            Source::Store(store) => match store.reader(relative) {
                Ok(Some(reader)) => reader,
                Ok(None) => return Ok(false),
                Err(e) => return Err(FetchError::Store(Box::new(e))),
            },
        };
        std::io::copy(&mut reader, out).map_err(|e| match self {
            Source::Http { .. } => http(e.to_string()),
            _ => FetchError::Io(e),
        })?;
        Ok(true)
    }

    /// The bytes of `relative`, which must exist.
    pub fn read(&self, relative: &str) -> Result<Vec<u8>, FetchError> {
        self.read_optional(relative)?
            .ok_or_else(|| FetchError::NotFound {
                location: self.location(relative),
            })
    }
}

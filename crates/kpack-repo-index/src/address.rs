//! Where a repository is, as an operator or a user writes it: the one
//! parser of repository addresses, so `kpack-repo` and `kpack-get` accept
//! and refuse the same strings, each refusal a [`Refusal`].
//!
//! A `file://` URL must name an absolute directory (`file:///srv/rocm`):
//! in `file://rocm/stable`, RFC 8089 reads `rocm` as a host, so guessing a
//! relative directory would give one string two meanings. A relative
//! directory is written as a plain path.

use std::fmt;
use std::path::{Path, PathBuf};

/// A repository's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// A directory: a path, or a `file:///absolute/path` URL.
    Dir(PathBuf),
    /// An `http://` or `https://` base URL, kept with a trailing `/`.
    Http(String),
    /// `s3://bucket/prefix`, reached through the S3 API.
    S3 { bucket: String, prefix: String },
}

/// Why text names no repository, or none of the kind a use takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    #[error("is empty")]
    Empty,
    #[error(
        "a file:// URL names an absolute directory (file:///srv/rocm); write a relative \
         directory as a plain path"
    )]
    RelativeFileUrl,
    #[error("not a valid URL")]
    InvalidUrl,
    #[error("names no host")]
    NoHost,
    #[error("a repository's URL has no query or fragment")]
    QueryOrFragment,
    #[error("no bucket (s3://bucket/prefix)")]
    NoBucket,
    #[error("the prefix has . or .. parts")]
    DotSegments,
    #[error(
        "a {0}:// URL; a repository is a directory, a file:/// URL, an http(s):// URL or an \
         s3://bucket/prefix"
    )]
    Scheme(String),
    /// A mirror is read over HTTP or from a directory.
    #[error(
        "an s3:// URL; a mirror is an http(s):// URL (a bucket's HTTP URL), a file:/// URL or \
         a directory"
    )]
    S3Mirror,
    /// A store is written as a directory or a bucket.
    #[error("an http(s):// URL; kpack-repo writes to a directory or an s3://bucket/prefix")]
    HttpStore,
}

/// An address that names no repository, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?}: {refusal}")]
pub struct InvalidAddress {
    pub text: String,
    #[source]
    pub refusal: Refusal,
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

impl Address {
    /// A path, a `file:///` URL, an `http(s)://` URL or an
    /// `s3://bucket/prefix`; anything else is refused, naming why.
    pub fn parse(text: &str) -> Result<Address, InvalidAddress> {
        Address::parse_refusing(text).map_err(|refusal| InvalidAddress {
            text: text.to_owned(),
            refusal,
        })
    }

    fn parse_refusing(text: &str) -> Result<Address, Refusal> {
        if text.is_empty() {
            return Err(Refusal::Empty);
        }
        match url_scheme(text) {
            None => Ok(Address::Dir(PathBuf::from(text))),
            Some("file") => {
                let path = &text["file://".len()..];
                if !Path::new(path).is_absolute() {
                    return Err(Refusal::RelativeFileUrl);
                }
                Ok(Address::Dir(PathBuf::from(path)))
            }
            Some("http" | "https") => parse_http(text),
            Some("s3") => parse_s3(&text["s3://".len()..]),
            Some(scheme) => Err(Refusal::Scheme(scheme.to_owned())),
        }
    }
}

/// An `http(s)://` base URL with a host and neither query nor fragment.
fn parse_http(text: &str) -> Result<Address, Refusal> {
    let url = reqwest::Url::parse(text).map_err(|_| Refusal::InvalidUrl)?;
    if url.host().is_none() {
        return Err(Refusal::NoHost);
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Refusal::QueryOrFragment);
    }
    let base = if text.ends_with('/') {
        text.to_owned()
    } else {
        format!("{text}/")
    };
    Ok(Address::Http(base))
}

/// `bucket/prefix` of an `s3://` URL.
fn parse_s3(rest: &str) -> Result<Address, Refusal> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(Refusal::NoBucket);
    }
    let prefix = prefix.trim_matches('/');
    if prefix.split('/').any(|part| part == ".." || part == ".") {
        return Err(Refusal::DotSegments);
    }
    Ok(Address::S3 {
        bucket: bucket.to_owned(),
        prefix: prefix.to_owned(),
    })
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Dir(path) => write!(f, "{}", path.display()),
            Address::Http(base) => f.write_str(base),
            Address::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Address::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

impl std::str::FromStr for Address {
    type Err = InvalidAddress;

    fn from_str(text: &str) -> Result<Address, InvalidAddress> {
        Address::parse(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_once() {
        let dir = |p: &str| Address::Dir(PathBuf::from(p));
        assert_eq!(Address::parse("repo/dir").unwrap(), dir("repo/dir"));
        assert_eq!(
            Address::parse("file:///srv/rocm").unwrap(),
            dir("/srv/rocm")
        );
        assert_eq!(
            Address::parse("https://repo.example/rocm").unwrap(),
            Address::Http("https://repo.example/rocm/".into())
        );
        assert_eq!(
            Address::parse("s3://bucket/a/b/").unwrap(),
            Address::S3 {
                bucket: "bucket".into(),
                prefix: "a/b".into()
            }
        );
        assert_eq!(
            Address::parse("s3://bucket").unwrap().to_string(),
            "s3://bucket"
        );
    }

    #[test]
    fn a_relative_file_url_is_refused_with_the_plain_path_to_use() {
        let error = Address::parse("file://relative/dir").unwrap_err();
        assert_eq!(error.refusal, Refusal::RelativeFileUrl);
        assert!(error.to_string().contains("plain path"), "{error}");
    }

    #[test]
    fn unusable_addresses_say_why() {
        for (text, refusal) in [
            ("", Refusal::Empty),
            ("gs://bucket/x", Refusal::Scheme("gs".into())),
            ("http://", Refusal::InvalidUrl),
            ("https://repo.example/rocm?x=1", Refusal::QueryOrFragment),
            ("s3://", Refusal::NoBucket),
            ("s3://b/../x", Refusal::DotSegments),
        ] {
            assert_eq!(Address::parse(text).unwrap_err().refusal, refusal, "{text}");
        }
    }
}

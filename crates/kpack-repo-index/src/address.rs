//! Where a repository is, as an operator or a user writes it: the one
//! parser of repository addresses, so `kpack-repo` and `kpack-get` accept
//! and refuse the same strings.
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

/// An address that names no repository, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?}: {reason}")]
pub struct InvalidAddress {
    pub text: String,
    pub reason: String,
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
        let invalid = |reason: &str| InvalidAddress {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        if text.is_empty() {
            return Err(invalid("is empty"));
        }
        match url_scheme(text) {
            None => Ok(Address::Dir(PathBuf::from(text))),
            Some("file") => {
                let path = &text["file://".len()..];
                if !Path::new(path).is_absolute() {
                    return Err(invalid(
                        "a file:// URL names an absolute directory (file:///srv/rocm); \
                         write a relative directory as a plain path",
                    ));
                }
                Ok(Address::Dir(PathBuf::from(path)))
            }
            Some("http" | "https") => {
                let url = reqwest::Url::parse(text).map_err(|_| invalid("not a valid URL"))?;
                if url.host().is_none() {
                    return Err(invalid("names no host"));
                }
                if url.query().is_some() || url.fragment().is_some() {
                    return Err(invalid("a repository's URL has no query or fragment"));
                }
                let base = if text.ends_with('/') {
                    text.to_owned()
                } else {
                    format!("{text}/")
                };
                Ok(Address::Http(base))
            }
            Some("s3") => {
                let rest = &text["s3://".len()..];
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.is_empty() {
                    return Err(invalid("no bucket (s3://bucket/prefix)"));
                }
                let prefix = prefix.trim_matches('/');
                if prefix.split('/').any(|part| part == ".." || part == ".") {
                    return Err(invalid("the prefix has . or .. parts"));
                }
                Ok(Address::S3 {
                    bucket: bucket.to_owned(),
                    prefix: prefix.to_owned(),
                })
            }
            Some(scheme) => Err(invalid(&format!(
                "a {scheme}:// URL; a repository is a directory, a file:/// URL, an \
                 http(s):// URL or an s3://bucket/prefix"
            ))),
        }
    }
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
        assert!(error.reason.contains("plain path"), "{error}");
    }

    #[test]
    fn unusable_addresses_say_why() {
        for (text, why) in [
            ("", "is empty"),
            ("gs://bucket/x", "a gs:// URL"),
            ("http://", "not a valid URL"),
            ("https://repo.example/rocm?x=1", "no query or fragment"),
            ("s3://", "no bucket"),
            ("s3://b/../x", ". or .. parts"),
        ] {
            let error = Address::parse(text).unwrap_err();
            assert!(error.reason.contains(why), "{text}: {error}");
        }
    }
}

//! A mirror of a repository, parsed once from the configuration: a base
//! URL served over HTTP(S), or a directory on this machine.

use std::fmt;
use std::path::PathBuf;

use crate::address::Address;

/// Where a repository is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mirror {
    /// An `http://` or `https://` base URL, kept with a trailing `/`.
    Http(String),
    /// A directory, given as a path or a `file://` URL.
    Directory(PathBuf),
}

/// Why a mirror's address cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mirror {text:?}: {reason}")]
pub struct InvalidMirror {
    pub text: String,
    pub reason: String,
}

/// Where one file is on one mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorFile {
    Url(String),
    File(PathBuf),
}

impl Mirror {
    pub fn parse(text: &str) -> Result<Mirror, InvalidMirror> {
        let invalid = |reason: String| InvalidMirror {
            text: text.to_owned(),
            reason,
        };
        match Address::parse(text).map_err(|e| invalid(e.reason))? {
            Address::Http(base) => Ok(Mirror::Http(base)),
            Address::Dir(path) => Ok(Mirror::Directory(path)),
            Address::S3 { .. } => Err(invalid(
                "an s3:// URL; a mirror is an http(s):// URL (a bucket's HTTP URL), a file:/// \
                 URL or a directory"
                    .into(),
            )),
        }
    }

    /// Where `path` (relative to the repository's root) is on this mirror.
    pub fn locate(&self, path: &str) -> MirrorFile {
        match self {
            Mirror::Http(base) => MirrorFile::Url(format!("{base}{path}")),
            Mirror::Directory(dir) => MirrorFile::File(dir.join(path)),
        }
    }
}

impl fmt::Display for MirrorFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MirrorFile::Url(url) => f.write_str(url),
            MirrorFile::File(path) => write!(f, "{}", path.display()),
        }
    }
}

impl fmt::Display for Mirror {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mirror::Http(base) => f.write_str(base),
            Mirror::Directory(dir) => write!(f, "{}", dir.display()),
        }
    }
}

impl std::str::FromStr for Mirror {
    type Err = InvalidMirror;

    fn from_str(text: &str) -> Result<Mirror, InvalidMirror> {
        Mirror::parse(text)
    }
}

impl<'de> serde::Deserialize<'de> for Mirror {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Mirror, D::Error> {
        let text = String::deserialize(deserializer)?;
        Mirror::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_directories_locate_files_under_them() {
        let http = Mirror::parse("https://repo.example/rocm").unwrap();
        assert_eq!(
            http.locate("index.toml"),
            MirrorFile::Url("https://repo.example/rocm/index.toml".into())
        );
        let slash = Mirror::parse("http://127.0.0.1:8000/").unwrap();
        assert_eq!(
            slash.locate("pool/a.kpack").to_string(),
            "http://127.0.0.1:8000/pool/a.kpack"
        );
        for text in ["file:///srv/rocm", "/srv/rocm"] {
            assert_eq!(
                Mirror::parse(text).unwrap().locate("index.toml"),
                MirrorFile::File("/srv/rocm/index.toml".into()),
                "{text}"
            );
        }
        assert_eq!(
            Mirror::parse("mirror").unwrap(),
            Mirror::Directory("mirror".into())
        );
    }

    #[test]
    fn unusable_addresses_are_refused_with_the_reason() {
        for (text, reason) in [
            ("ftp://repo.example/rocm", "http(s)://"),
            ("https://", "not a valid URL"),
            ("https://repo.example/r?x=1", "no query"),
            ("file://relative/dir", "absolute"),
            ("", "empty"),
            ("s3://bucket/rocm", "a bucket's HTTP URL"),
        ] {
            let error = Mirror::parse(text).unwrap_err();
            assert!(error.to_string().contains(reason), "{text}: {error}");
        }
    }
}

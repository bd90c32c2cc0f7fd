//! A mirror of a repository, parsed once from the configuration: an
//! [`Address`] served over HTTP(S) or a directory on this machine (never
//! a bucket's S3 API).

use std::fmt;
use std::path::PathBuf;

use crate::address::{Address, InvalidAddress, Refusal};

/// Where a repository is served: an address that is not `s3://`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mirror(Address);

/// Why a mirror's address cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mirror {0}")]
pub struct InvalidMirror(#[source] pub InvalidAddress);

/// Where one file is on one mirror.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MirrorFile {
    Url(String),
    File(PathBuf),
}

impl Mirror {
    pub fn parse(text: &str) -> Result<Mirror, InvalidMirror> {
        match Address::parse(text).map_err(InvalidMirror)? {
            Address::S3 { .. } => Err(InvalidMirror(InvalidAddress {
                text: text.to_owned(),
                refusal: Refusal::S3Mirror,
            })),
            address => Ok(Mirror(address)),
        }
    }

    /// The mirror at an `http(s)://` base URL already parsed, ending in `/`.
    pub fn http(base: String) -> Mirror {
        Mirror(Address::Http(base))
    }

    /// The mirror's address.
    pub fn address(&self) -> &Address {
        &self.0
    }

    /// Where `path` (relative to the repository's root) is on this mirror.
    pub fn locate(&self, path: &str) -> MirrorFile {
        match &self.0 {
            Address::Http(base) => MirrorFile::Url(format!("{base}{path}")),
            Address::Dir(dir) => MirrorFile::File(dir.join(path)),
            // Never a mirror (`parse` refuses it); named by its URL, which
            // no fetch reaches.
            bucket @ Address::S3 { .. } => MirrorFile::Url(format!("{bucket}/{path}")),
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
        self.0.fmt(f)
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
            Mirror::parse("mirror").unwrap().address(),
            &Address::Dir("mirror".into())
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

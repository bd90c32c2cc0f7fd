//! Transport encodings of artifacts (`zstd`).

use std::fmt;
use std::str::FromStr;

use super::name::is_name;
use super::{invalid, InvalidValue};

/// How an artifact's bytes are stored for the download (04-repo-index.md):
/// the whole artifact compressed once more, decoded by the client while it
/// arrives. An encoding this build does not know is kept by name, so that
/// the version using it is refused saying which, rather than the shard
/// failing to parse.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// One zstd frame.
    Zstd,
    /// Spelt like a name, `[a-z0-9][a-z0-9._-]*`, but not one this build
    /// decodes.
    Unknown(String),
}

impl Encoding {
    pub fn as_str(&self) -> &str {
        match self {
            Encoding::Zstd => "zstd",
            Encoding::Unknown(name) => name,
        }
    }

    /// Whether this build can decode it.
    pub fn is_known(&self) -> bool {
        !matches!(self, Encoding::Unknown(_))
    }
}

impl FromStr for Encoding {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "zstd" => Ok(Encoding::Zstd),
            _ if is_name(s) => Ok(Encoding::Unknown(s.to_owned())),
            _ => Err(invalid(s, "an encoding is [a-z0-9][a-z0-9._-]*")),
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

string_serde!(Encoding);

//! Relative paths inside a repository or a prefix.

use std::fmt;
use std::str::FromStr;

use super::{invalid, InvalidValue, PackageName, Sha256};

/// A path inside a repository or a prefix: relative, `/`-separated, with
/// no empty, `.` or `..` parts, so joining it to a root stays inside.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelativePath(String);

impl RelativePath {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `packages/<name>/<sha256>.toml`: valid by construction.
    pub fn usual_shard(name: &PackageName, sha256: &Sha256) -> RelativePath {
        RelativePath(format!("packages/{name}/{sha256}.toml"))
    }

    /// The directories above this path, outermost first (`a`, `a/b` for
    /// `a/b/c`): valid, as parts of a valid path.
    pub fn parents(&self) -> Vec<RelativePath> {
        self.0
            .match_indices('/')
            .map(|(at, _)| RelativePath(self.0[..at].to_owned()))
            .collect()
    }

    /// The last part: the file's own name.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }
}

impl FromStr for RelativePath {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(invalid(s, "empty path"));
        }
        // A colon in the first part could read as a URL scheme or a drive.
        let first = s.split('/').next().unwrap_or(s);
        if s.starts_with('/') || s.contains('\\') || first.contains(':') {
            return Err(invalid(s, "must be a relative path with / separators"));
        }
        if s.split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
        {
            return Err(invalid(s, "must not contain empty, . or .. parts"));
        }
        if s.bytes().any(|b| b.is_ascii_control()) {
            return Err(invalid(s, "must not contain control characters"));
        }
        Ok(RelativePath(s.to_owned()))
    }
}

impl fmt::Display for RelativePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_serde!(RelativePath);

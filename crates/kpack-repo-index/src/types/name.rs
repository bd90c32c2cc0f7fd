//! Package names: spelt `[a-z0-9][a-z0-9._-]*`, so safe as a path part.

use std::fmt;
use std::str::FromStr;

use super::{invalid, InvalidValue};

/// A package name: `[a-z0-9][a-z0-9._-]*`, so it is safe as a path part.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PackageName(String);

impl PackageName {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `kpack`, the name of a repository its publisher did not name.
    pub fn unnamed_repository() -> PackageName {
        PackageName("kpack".to_owned())
    }
}

/// Whether `s` is spelt as a name: `[a-z0-9][a-z0-9._-]*`.
pub(super) fn is_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    first_ok
        && bytes.all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
}

impl FromStr for PackageName {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if is_name(s) {
            Ok(PackageName(s.to_owned()))
        } else {
            Err(invalid(s, "a package name is [a-z0-9][a-z0-9._-]*"))
        }
    }
}

impl fmt::Display for PackageName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_serde!(PackageName);

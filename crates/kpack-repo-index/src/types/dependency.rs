//! Dependencies on other packages, and the packages a user asks for: a
//! name and a semver requirement.

use std::fmt;
use std::str::FromStr;

use super::{invalid, InvalidValue, PackageName};

/// A dependency, or a package asked for: in an index `"rocm-core >=5.5,
/// <6"` (a name, then a semver requirement; no requirement means any
/// version), read by [`FromStr`]; resolution takes the same type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    pub name: PackageName,
    pub requirement: semver::VersionReq,
}

impl Dependency {
    /// `name`, at any version.
    pub fn any(name: PackageName) -> Dependency {
        Dependency {
            name,
            requirement: semver::VersionReq::STAR,
        }
    }

    /// `name` at exactly `version` (`=1.2.3-rc.1`; build metadata, which
    /// requirements ignore, left out).
    pub fn exact(name: PackageName, version: &semver::Version) -> Dependency {
        Dependency::compared(name, semver::Op::Exact, version)
    }

    /// `name` at `version` or newer.
    pub fn at_least(name: PackageName, version: &semver::Version) -> Dependency {
        Dependency::compared(name, semver::Op::GreaterEq, version)
    }

    fn compared(name: PackageName, op: semver::Op, version: &semver::Version) -> Dependency {
        let comparator = semver::Comparator {
            op,
            major: version.major,
            minor: Some(version.minor),
            patch: Some(version.patch),
            pre: version.pre.clone(),
        };
        Dependency {
            name,
            requirement: semver::VersionReq {
                comparators: vec![comparator],
            },
        }
    }
}

impl FromStr for Dependency {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let trimmed = s.trim();
        let (name, requirement) =
            match trimmed.find(|c: char| c.is_whitespace() || "<>=^~*".contains(c)) {
                Some(at) => (&trimmed[..at], trimmed[at..].trim()),
                None => (trimmed, ""),
            };
        let name: PackageName = name
            .parse()
            .map_err(|_| invalid(s, "a dependency starts with a package name"))?;
        let requirement = if requirement.is_empty() {
            semver::VersionReq::STAR
        } else {
            requirement
                .parse()
                .map_err(|_| invalid(s, "the requirement is not a semver requirement"))?
        };
        Ok(Dependency { name, requirement })
    }
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.requirement == semver::VersionReq::STAR {
            write!(f, "{}", self.name)
        } else {
            write!(f, "{} {}", self.name, self.requirement)
        }
    }
}

string_serde!(Dependency);

//! Dependencies on other packages: a name and a semver requirement.

use std::fmt;
use std::str::FromStr;

use super::{invalid, InvalidValue, PackageName};

/// A dependency: `"rocm-core >=5.5, <6"` (a name, then a semver
/// requirement; no requirement means any version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency {
    pub name: PackageName,
    pub requirement: semver::VersionReq,
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

//! Relative paths that stay inside the directory they are joined to: the
//! one rule every tool applies to paths it did not make (an index's
//! `path` and `install-as`, a tree's or a wheel's members, files placed in
//! a prefix).

use std::fmt;
use std::str::FromStr;

/// A path inside a repository, a prefix or an archive: relative,
/// `/`-separated, with no empty, `.` or `..` parts, no backslash, no
/// control character, and no colon in its first part (which could read as
/// a URL scheme or a drive), so joining it to a root stays inside.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelativePath(String);

/// A path refused by [`RelativePath`]'s rule, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?}: {reason}")]
pub struct InvalidPath {
    pub value: String,
    pub reason: &'static str,
}

impl RelativePath {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The path of `parts` joined with `/`, each checked by the rule.
    pub fn from_parts<'a>(
        parts: impl IntoIterator<Item = &'a str>,
    ) -> Result<RelativePath, InvalidPath> {
        parts.into_iter().collect::<Vec<_>>().join("/").parse()
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

    /// Its parts, in order: each a plain name.
    pub fn parts(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }
}

impl FromStr for RelativePath {
    type Err = InvalidPath;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |reason| {
            Err(InvalidPath {
                value: s.to_owned(),
                reason,
            })
        };
        if s.is_empty() {
            return invalid("empty path");
        }
        let first = s.split('/').next().unwrap_or(s);
        if s.starts_with('/') || s.contains('\\') || first.contains(':') {
            return invalid("must be a relative path with / separators");
        }
        if s.split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
        {
            return invalid("must not contain empty, . or .. parts");
        }
        if s.bytes().any(|b| b.is_ascii_control()) {
            return invalid("must not contain control characters");
        }
        Ok(RelativePath(s.to_owned()))
    }
}

impl fmt::Display for RelativePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for RelativePath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for RelativePath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_stay_inside() {
        for good in [
            "pool/rocm/5.5.1/a.kpack",
            ".kpack/x.kpack",
            "share/man/man3/Foo::Bar.3pm",
        ] {
            assert!(good.parse::<RelativePath>().is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "pool/../../x",
            "a//b",
            "./a",
            "a\\b",
            "c:/x",
            "https:/x",
            "a/",
            "a:b",
            "a/b\0c",
            "a/\tb",
        ] {
            assert!(bad.parse::<RelativePath>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_relative_path_knows_its_parents_name_and_parts() {
        let path: RelativePath = "lib/rocm/librocrand.so".parse().unwrap();
        let parents: Vec<String> = path.parents().iter().map(ToString::to_string).collect();
        assert_eq!(parents, ["lib", "lib/rocm"]);
        assert_eq!(path.file_name(), "librocrand.so");
        assert_eq!(
            path.parts().collect::<Vec<_>>(),
            ["lib", "rocm", "librocrand.so"]
        );
        let top: RelativePath = "README".parse().unwrap();
        assert!(top.parents().is_empty());
        assert_eq!(top.file_name(), "README");
        let joined = RelativePath::from_parts(["packages", "rocm-rand", "ab.toml"]).unwrap();
        assert_eq!(joined.as_str(), "packages/rocm-rand/ab.toml");
        assert!(RelativePath::from_parts(["a", ".."]).is_err());
    }
}

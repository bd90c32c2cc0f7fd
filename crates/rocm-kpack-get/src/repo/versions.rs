//! `versions.toml`: rollback state, kept per configured repository and
//! key, never per the name a root gives itself (a mirror chooses that):
//!
//! ```toml
//! [[repo]]
//! config = "rocm"       # the repository's name in kpack-get's configuration
//! key = "RWQ..."        # the public key its roots verify with
//! name = "rocm"         # the name its first root gave: every later root must give it
//! version = 42          # the highest version seen
//! ```
//!
//! Migration: kpack-get before this format kept `<root name> = <version>`
//! at the top level. Those entries are kept (rewritten under
//! `[root-names]`, where no root name can collide with `repo`), and each
//! is the floor of the first update of any configured repository whose
//! root gives that name, so upgrading never weakens rollback protection;
//! from then on that repository's own entry rules.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The table the older format's entries are kept in once rewritten.
const ROOT_NAMES: &str = "root-names";

/// What is remembered of one configured repository with one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Seen {
    pub config: String,
    pub key: String,
    pub name: String,
    pub version: u64,
}

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Versions {
    repos: Vec<Seen>,
    /// Entries of the older format: root name -> highest version.
    legacy: BTreeMap<String, u64>,
}

/// Why the versions seen cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    #[error("{0}")]
    Parse(#[source] toml::de::Error),
    #[error("[[repo]]: {0}")]
    Repos(#[source] toml::de::Error),
    #[error("{name}: neither a version nor [[repo]]")]
    NotAVersion { name: String },
    #[error("{0}")]
    TooLarge(#[source] std::num::TryFromIntError),
    #[error("{0}")]
    Serialize(#[source] toml::ser::Error),
}

impl Versions {
    /// Parses the file's text, in either format.
    pub(super) fn parse(text: &str) -> Result<Versions, StateError> {
        let table: toml::Table = toml::from_str(text).map_err(StateError::Parse)?;
        let mut versions = Versions::default();
        for (key, value) in table {
            match value {
                toml::Value::Array(_) if key == "repo" => {
                    versions.repos = value.try_into().map_err(StateError::Repos)?;
                }
                toml::Value::Table(names) if key == ROOT_NAMES => {
                    for (name, value) in names {
                        versions.add_legacy(name, value)?;
                    }
                }
                value => versions.add_legacy(key, value)?,
            }
        }
        Ok(versions)
    }

    fn add_legacy(&mut self, name: String, value: toml::Value) -> Result<(), StateError> {
        let Some(version) = value.as_integer().and_then(|v| u64::try_from(v).ok()) else {
            return Err(StateError::NotAVersion { name });
        };
        self.legacy.insert(name, version);
        Ok(())
    }

    /// The file's text: `[[repo]]`, and the older entries under
    /// `[root-names]`.
    pub(super) fn to_toml(&self) -> Result<String, StateError> {
        let mut table = toml::Table::new();
        let mut names = toml::Table::new();
        for (name, version) in &self.legacy {
            let version = i64::try_from(*version).map_err(StateError::TooLarge)?;
            names.insert(name.clone(), toml::Value::Integer(version));
        }
        if !names.is_empty() {
            table.insert(ROOT_NAMES.to_owned(), toml::Value::Table(names));
        }
        if !self.repos.is_empty() {
            let repos = toml::Value::try_from(&self.repos).map_err(StateError::Serialize)?;
            table.insert("repo".to_owned(), repos);
        }
        toml::to_string(&table).map_err(StateError::Serialize)
    }

    /// What was seen of the configured repository `config` with `key`.
    pub(super) fn get(&self, config: &str, key: &str) -> Option<&Seen> {
        self.repos
            .iter()
            .find(|seen| seen.config == config && seen.key == key)
    }

    /// The highest version an older kpack-get recorded for roots named
    /// `name`.
    pub(crate) fn legacy(&self, name: &str) -> Option<u64> {
        self.legacy.get(name).copied()
    }

    /// Records `version` of the root named `name` for `config` with `key`:
    /// the highest version stays (an accepted rollback does not lower
    /// it), the first root's name is kept.
    pub(super) fn record(&mut self, config: &str, key: &str, name: &str, version: u64) {
        let floor = self.legacy(name).unwrap_or(0);
        match self
            .repos
            .iter_mut()
            .find(|seen| seen.config == config && seen.key == key)
        {
            Some(seen) => seen.version = seen.version.max(version),
            None => self.repos.push(Seen {
                config: config.to_owned(),
                key: key.to_owned(),
                name: name.to_owned(),
                version: version.max(floor),
            }),
        }
    }
}

/// Reads `path`; a missing file is no state.
pub(super) fn load(path: &Path) -> Result<Option<String>, std::io::Error> {
    match fs_err::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_older_format_is_kept_and_floors_a_first_update() {
        let mut versions = Versions::parse("rocm = 7\nrepo = 3\n").unwrap();
        assert_eq!(versions.legacy("rocm"), Some(7));
        assert_eq!(versions.legacy("repo"), Some(3));
        versions.record("main", "RWQkey", "rocm", 5);
        assert_eq!(versions.get("main", "RWQkey").unwrap().version, 7);
        versions.record("main", "RWQkey", "rocm", 9);
        versions.record("main", "RWQkey", "rocm", 8);
        assert_eq!(versions.get("main", "RWQkey").unwrap().version, 9);
        assert_eq!(versions.get("main", "RWQother"), None);

        let text = versions.to_toml().unwrap();
        assert_eq!(Versions::parse(&text).unwrap(), versions, "{text}");
        assert!(
            text.contains("rocm = 7") && text.contains("repo = 3"),
            "{text}"
        );
        assert!(text.contains("[[repo]]"), "{text}");
    }

    #[test]
    fn anything_else_is_refused() {
        assert!(Versions::parse("rocm = \"x\"\n").is_err());
        assert!(Versions::parse("rocm = -1\n").is_err());
        assert!(Versions::parse("[[repo]]\nconfig = \"a\"\n").is_err());
    }
}

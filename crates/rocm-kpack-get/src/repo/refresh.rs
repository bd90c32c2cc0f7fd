//! When a stored root is fetched again before it is read: never fetched,
//! expired, or older than the configured age, unless offline; a refresh
//! that fails for any reason but trust leaves the stored root in use.

use std::time::{Duration, SystemTime};

use kpack_repo_index::fetch::Client;

use super::{Repo, RepoError, RepoStore, Trust};
use crate::config::RepoConfig;

/// How old a stored root may be, and whether the network may be used.
#[derive(Debug, Clone, Copy)]
pub struct Refresh {
    pub offline: bool,
    pub max_age: Duration,
}

/// A repository ready to read, and what to tell the user about it (in
/// order).
#[derive(Debug, Clone)]
pub struct Opened {
    pub repo: Repo,
    pub warnings: Vec<String>,
}

impl Refresh {
    /// Whether `repo`, stored, is recent enough to use as it is.
    fn fresh(&self, repo: &Repo) -> bool {
        SystemTime::now()
            .duration_since(repo.fetched)
            .map(|age| age < self.max_age)
            .unwrap_or(true)
    }
}

impl RepoStore {
    /// `config`'s root, the stored one when recent enough (or offline),
    /// else fetched again; a stored root that cannot be refreshed for a
    /// reason other than trust is used with a warning.
    pub fn open(
        &self,
        client: &Client,
        config: &RepoConfig,
        trust: Trust,
        refresh: Refresh,
    ) -> Result<Opened, RepoError> {
        let mut warnings = Vec::new();
        let stored = self.load(config, trust, &mut warnings);
        let repo = match stored {
            Ok(Some(repo)) if refresh.offline || refresh.fresh(&repo) => repo,
            Ok(Some(repo)) => match self.update(client, config, trust) {
                Ok(updated) => {
                    warnings.extend(updated.warnings);
                    updated.repo
                }
                Err(error) if !error.is_verification() => {
                    warnings.insert(0, format!("{error}; using the index fetched before"));
                    repo
                }
                Err(error) => return Err(error),
            },
            Ok(None) | Err(RepoError::Expired { .. }) if !refresh.offline => {
                let updated = self.update(client, config, trust)?;
                warnings.extend(updated.warnings);
                updated.repo
            }
            Ok(None) => {
                return Err(RepoError::NotUpdated {
                    repo: config.name.clone(),
                })
            }
            Err(error) => return Err(error),
        };
        Ok(Opened { repo, warnings })
    }
}

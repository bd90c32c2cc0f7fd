//! When a stored root is fetched again before it is read: never fetched,
//! expired, or older than the configured age, unless offline; a refresh
//! that fails for any reason but trust leaves the stored root in use, and
//! an old root in use is said with its age.

use std::time::{Duration, SystemTime};

use kpack_repo_index::fetch::Client;

use super::{Repo, RepoError, RepoStore};
use crate::config::{Refresh, RepoConfig, Trust};

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
        age(repo) < self.max_age
    }
}

/// How long ago `repo`'s root was fetched (none for a clock gone back).
fn age(repo: &Repo) -> Duration {
    SystemTime::now()
        .duration_since(repo.fetched)
        .unwrap_or_default()
}

/// An age for people: `40 seconds`, `3 hours`, `2 days`.
pub(crate) fn human_age(age: Duration) -> String {
    let seconds = age.as_secs();
    let (count, unit) = match seconds {
        0..120 => (seconds, "second"),
        120..7_200 => (seconds / 60, "minute"),
        7_200..172_800 => (seconds / 3_600, "hour"),
        _ => (seconds / 86_400, "day"),
    };
    format!("{count} {unit}{}", if count == 1 { "" } else { "s" })
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
            Ok(Some(repo)) if refresh.fresh(&repo) => repo,
            Ok(Some(repo)) if refresh.offline => {
                warnings.push(format!(
                    "repository {}: using its index fetched {} ago (--offline); `kpack-get update` fetches the current one",
                    config.name,
                    human_age(age(&repo))
                ));
                repo
            }
            Ok(Some(repo)) => match self.update(client, config, trust) {
                Ok(updated) => {
                    warnings.extend(updated.warnings);
                    updated.repo
                }
                Err(error) if !error.is_verification() => {
                    warnings.insert(
                        0,
                        format!(
                            "{error}; using the index fetched {} ago",
                            human_age(age(&repo))
                        ),
                    );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_people_say_them() {
        let age = |seconds| human_age(Duration::from_secs(seconds));
        assert_eq!(age(1), "1 second");
        assert_eq!(age(59), "59 seconds");
        assert_eq!(age(3_600), "60 minutes");
        assert_eq!(age(10_800), "3 hours");
        assert_eq!(age(86_400 * 3), "3 days");
    }
}

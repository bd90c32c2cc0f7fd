//! What an install or upgrade asks for, and the plan made from it: the
//! requests an upgrade makes from the record, the packages a change of
//! layout rewrites, and the rule that an upgrade never silently takes a
//! package to an older version.

use std::path::Path;

use kpack_gpu::Target;
use kpack_repo_index::fetch::Client;
use kpack_repo_index::{Dependency, PackageName, ResolveError};

use super::plan::{make_plan, Plan, PlanError};
use super::record::InstalledRecord;
use super::InstallError;
use crate::layout::Layout;
use crate::repo::Repo;
use kpack_repo_index::fetch::Cache;

/// What to install: packages asked for, or newer versions of installed
/// ones (all, or those named), decided from the record read under the lock.
#[derive(Debug, Clone)]
pub enum Wanted {
    /// Packages asked for; with `reinstall`, installed again even when
    /// installed as planned.
    Requests {
        requests: Vec<Dependency>,
        reinstall: bool,
    },
    /// Installed packages to upgrade (all when none are named); with
    /// `allow_downgrade`, to the highest version offered even if older.
    Upgrades {
        names: Vec<PackageName>,
        allow_downgrade: bool,
    },
}

impl Wanted {
    /// Whether this is an upgrade.
    pub fn upgrading(&self) -> bool {
        matches!(self, Wanted::Upgrades { .. })
    }

    /// The requests to plan, read from `record` (of the prefix at
    /// `prefix`), and whether to install them again even when installed
    /// as planned.
    pub fn requests(
        self,
        record: &InstalledRecord,
        prefix: &Path,
    ) -> Result<(Vec<Dependency>, bool), InstallError> {
        Ok(match self {
            Wanted::Requests {
                requests,
                reinstall,
            } => (requests, reinstall),
            Wanted::Upgrades {
                names,
                allow_downgrade,
            } => (
                upgrade_requests(record, &names, allow_downgrade, prefix)?,
                false,
            ),
        })
    }
}

/// The requests an upgrade makes: every installed package named (or all),
/// at its installed version or newer, never older: a repository offering
/// only older versions (a stale mirror replaying an older root, a version
/// withdrawn) must not downgrade silently. With `allow_downgrade`, at
/// the highest version offered.
fn upgrade_requests(
    record: &InstalledRecord,
    packages: &[PackageName],
    allow_downgrade: bool,
    prefix: &Path,
) -> Result<Vec<Dependency>, InstallError> {
    if let Some(name) = packages.iter().find(|n| !record.packages.contains_key(*n)) {
        return Err(InstallError::NotInstalled {
            name: name.clone(),
            prefix: prefix.to_owned(),
        });
    }
    Ok(record
        .packages
        .iter()
        .filter(|(name, _)| packages.is_empty() || packages.contains(name))
        .map(|(name, installed)| match allow_downgrade {
            true => Dependency::any(name.clone()),
            false => Dependency::at_least(name.clone(), &installed.version),
        })
        .collect())
}

/// An installed package an upgrade keeps: the repositories offer only
/// older versions (`offered`, the highest, if any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptNewer {
    pub name: PackageName,
    pub installed: semver::Version,
    pub offered: Option<semver::Version>,
}

/// A plan, the requests it was made for and the packages kept back.
#[derive(Debug)]
pub struct Planned {
    pub plan: Plan,
    pub requests: Vec<Dependency>,
    pub kept: Vec<KeptNewer>,
}

/// Makes plans for `gpus` in `layout` from `repos`, against the prefix's
/// `record`.
#[derive(Debug, Clone, Copy)]
pub struct Planner<'a> {
    pub client: &'a Client,
    pub cache: &'a Cache,
    pub repos: &'a [Repo],
    pub gpus: &'a [Target],
    pub layout: Layout,
    pub record: &'a InstalledRecord,
}

impl Planner<'_> {
    /// Plans `requests`, plus every installed package whose layout is not
    /// the planner's (a change of layout rewrites them all). For an
    /// upgrade, a package the repositories offer no version of at or above
    /// the installed one is kept as it is and the rest planned again; with
    /// `reinstall`, the requested packages are installed again even when
    /// installed as planned.
    pub fn plan(
        &self,
        requests: Vec<Dependency>,
        reinstall: bool,
        upgrading: bool,
    ) -> Result<Planned, PlanError> {
        let mut requests = self.with_relayout(requests);
        let mut kept = Vec::new();
        loop {
            let error = match self.plan_once(&requests) {
                Ok(mut plan) => {
                    if reinstall {
                        plan.reinstall(&requests);
                    }
                    return Ok(Planned {
                        plan,
                        requests,
                        kept,
                    });
                }
                Err(error) => error,
            };
            let Some(newer) = upgrading.then(|| self.kept_newer(&error)).flatten() else {
                return Err(error);
            };
            requests.retain(|r| r.name != newer.name);
            kept.push(newer);
        }
    }

    fn plan_once(&self, requests: &[Dependency]) -> Result<Plan, PlanError> {
        make_plan(
            self.client,
            self.cache,
            self.repos,
            requests,
            self.gpus,
            self.layout,
            self.record,
        )
    }

    /// The installed package `error` found only older versions of.
    fn kept_newer(&self, error: &PlanError) -> Option<KeptNewer> {
        let PlanError::Resolve(ResolveError::NoVersion {
            name, available, ..
        }) = error
        else {
            return None;
        };
        let installed = self.record.packages.get(name)?;
        available
            .iter()
            .all(|v| *v < installed.version)
            .then(|| KeptNewer {
                name: name.clone(),
                installed: installed.version.clone(),
                offered: available.iter().max().cloned(),
            })
    }

    /// `requests`, plus every installed package whose layout is not the
    /// planner's, at the version installed.
    fn with_relayout(&self, mut requests: Vec<Dependency>) -> Vec<Dependency> {
        for (name, package) in &self.record.packages {
            if package.layout != self.layout && !requests.iter().any(|r| &r.name == name) {
                requests.push(Dependency::exact(name.clone(), &package.version));
            }
        }
        requests
    }
}

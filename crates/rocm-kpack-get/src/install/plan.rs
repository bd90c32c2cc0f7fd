//! Planning: requests to package versions (dependencies included, across
//! the configured repositories in order) and each version's artifacts to
//! the ones this machine's GPUs need.

use std::collections::BTreeMap;
use std::sync::Arc;

use kpack_gpu::Target;
use kpack_repo_index::{
    select_artifacts, Artifact, Dependency, Explanation, Families, Listed, PackageName,
    ResolveError, Resolved, Resolver, Shard, VersionEntry,
};

use super::record::{InstalledPackage, InstalledRecord};
use super::{PackageInstall, ReadyArtifact};
use crate::detect::{gfx_override, Detection};
use crate::layout::Layout;
use crate::repo::{put_shard, Repo, RepoError};
use kpack_repo_index::fetch::{Cache, Client, Mirror, PinnedFile, Wanted};
use kpack_repo_index::schema::BuiltFrom;

/// Why no plan can be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    #[error(transparent)]
    Repo(#[from] RepoError),
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(
        "{package} {version} has no device code for {}; it offers code for {}{}",
        kpack_gpu::target::join_targets(&unserved.gpus),
        kpack_repo_index::resolve::join_listed(&unserved.offered),
        unserved.other_versions()
    )]
    NoDeviceCode {
        package: PackageName,
        version: semver::Version,
        unserved: Box<Unserved>,
    },
    #[error("repository {repo}: its root is version {found}, older than version {installed} that packages in this prefix were installed from: a stale or malicious mirror (--allow-rollback overrides)")]
    OlderThanPrefix {
        repo: String,
        found: u64,
        installed: u64,
    },
}

/// Refuses a repository whose root is older than one a package in the
/// prefix was installed from: a mirror replaying an old, unexpired root to
/// a client whose state directory never saw the newer one (another admin,
/// a wiped state, a container). With `allow_rollback`, the warnings to
/// show instead.
pub fn check_prefix_roots(
    repos: &[Repo],
    installed: &InstalledRecord,
    allow_rollback: bool,
) -> Result<Vec<String>, PlanError> {
    let mut warnings = Vec::new();
    for repo in repos {
        let found = repo.root.repo.version;
        let Some(newest) = installed.repo_version(&repo.config.name) else {
            continue;
        };
        if found >= newest {
            continue;
        }
        let error = PlanError::OlderThanPrefix {
            repo: repo.config.name.clone(),
            found,
            installed: newest,
        };
        if !allow_rollback {
            return Err(error);
        }
        warnings.push(format!("accepted anyway (--allow-rollback): {error}"));
    }
    Ok(warnings)
}

/// The repository a planned package comes from, as far as installing it
/// needs: its name, the version of the root read, and its mirrors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub name: String,
    pub root_version: u64,
    pub mirrors: Arc<[Mirror]>,
}

impl From<&Repo> for Origin {
    fn from(repo: &Repo) -> Origin {
        Origin {
            name: repo.config.name.clone(),
            root_version: repo.root.repo.version,
            mirrors: Arc::from(repo.config.mirrors.as_slice()),
        }
    }
}

/// One package version to install, with what was chosen and why.
#[derive(Debug, Clone)]
pub struct PlannedPackage {
    pub name: PackageName,
    pub version: semver::Version,
    /// The repository it comes from.
    pub repo: Origin,
    pub chosen: Vec<Artifact>,
    pub explanations: Vec<Explanation>,
    /// Every artifact of the version, for every target.
    pub full_size: u64,
    /// The fat packages the version was built from, where recorded.
    pub built_from: Vec<BuiltFrom>,
    /// The version installed now, if any.
    pub installed: Option<semver::Version>,
    /// Installed already, with these very artifacts.
    pub up_to_date: bool,
    /// Set when the version has device code but none for these GPUs.
    pub unserved: Option<Unserved>,
}

impl PlannedPackage {
    pub fn size(&self) -> u64 {
        self.chosen.iter().map(|a| a.size).sum()
    }
}

/// A package version with device code for none of the GPUs: host parts
/// alone would not run there, so it is not installed; a dry run shows
/// the plan and says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unserved {
    pub gpus: Vec<Target>,
    /// What the version has code for.
    pub offered: Vec<Listed>,
    /// Other versions of the package that have code for one of the GPUs,
    /// newest first.
    pub with_code: Vec<semver::Version>,
}

impl Unserved {
    /// Whether `entry`, a version of `shard`, has device code but none for
    /// `gpus`: what it offers, and the other versions that have code for
    /// one of them.
    pub fn find(
        entry: &VersionEntry,
        shard: &Shard,
        gpus: &[Target],
        families: &Families,
    ) -> Option<Unserved> {
        let serves = |version: &VersionEntry| {
            select_artifacts(version, gpus, families)
                .artifacts
                .iter()
                .any(|a| a.is_device())
        };
        let has_device = entry.artifacts.iter().any(Artifact::is_device);
        if gpus.is_empty() || !has_device || serves(entry) {
            return None;
        }
        let mut with_code: Vec<semver::Version> = shard
            .versions
            .iter()
            .filter(|other| other.version != entry.version && serves(other))
            .map(|other| other.version.clone())
            .collect();
        with_code.sort_by(|a, b| b.cmp(a));
        Some(Unserved {
            gpus: gpus.to_vec(),
            offered: entry.offered(),
            with_code,
        })
    }

    /// How ROCm users run each detected GPU here whose sibling has code in
    /// the version (the per-node override, by the GPU's node number).
    pub fn override_suggestions(&self, detection: &Detection) -> Vec<String> {
        let offered: Vec<Target> = self
            .offered
            .iter()
            .filter_map(|listed| match listed {
                Listed::Target(target) => Some(target.clone()),
                Listed::Family(_) => None,
            })
            .collect();
        detection
            .gpus
            .iter()
            .filter(|gpu| self.gpus.contains(&gpu.target))
            .filter_map(|gpu| gfx_override::suggestion(&gpu.target, gpu.node, &offered))
            .collect()
    }

    /// `; versions 5.3.3 and 5.2.0 have code for it`, or that none has.
    fn other_versions(&self) -> String {
        let list: Vec<String> = self.with_code.iter().map(ToString::to_string).collect();
        match list.as_slice() {
            [] => "; no other version has code for it".to_owned(),
            [one] => format!("; version {one} has code for it"),
            [first @ .., last] => format!(
                "; versions {} and {last} have code for it",
                first.join(", ")
            ),
        }
    }
}

/// What an install would do.
#[derive(Debug, Clone)]
pub struct Plan {
    pub packages: Vec<PlannedPackage>,
    pub gpus: Vec<Target>,
    /// How the packages' device code is to be installed.
    pub layout: Layout,
}

impl Plan {
    /// Why the plan must not be carried out: a package with device code
    /// for none of the GPUs (the first such).
    pub fn refusal(&self) -> Option<PlanError> {
        self.packages.iter().find_map(|package| {
            Some(PlanError::NoDeviceCode {
                package: package.name.clone(),
                version: package.version.clone(),
                unserved: Box::new(package.unserved.clone()?),
            })
        })
    }

    /// Bytes of the chosen artifacts of packages that need installing.
    pub fn size(&self) -> u64 {
        self.pending().map(PlannedPackage::size).sum()
    }

    /// Bytes a fat install of the same packages would take.
    pub fn full_size(&self) -> u64 {
        self.pending().map(|p| p.full_size).sum()
    }

    /// Of the chosen artifacts, the bytes still to fetch: files not in the
    /// cache, less what partial downloads of them keep; each file once.
    pub fn download_size(&self, cache: &Cache) -> u64 {
        let mut seen = std::collections::HashSet::new();
        self.pending()
            .flat_map(|p| &p.chosen)
            .filter(|a| seen.insert(a.sha256))
            .filter(|a| {
                let stored = a.installed();
                cache.get(&stored.sha256, stored.size).is_none()
            })
            .map(|a| a.size.saturating_sub(cache.kept(&a.sha256)))
            .sum()
    }

    /// The packages that are not installed as planned yet.
    pub fn pending(&self) -> impl Iterator<Item = &PlannedPackage> {
        self.packages.iter().filter(|p| !p.up_to_date)
    }

    /// The chosen artifacts of the pending packages, each from its
    /// repository's mirrors.
    pub fn downloads(&self) -> Vec<Wanted> {
        self.pending()
            .flat_map(|package| {
                package.chosen.iter().map(|artifact| Wanted {
                    path: artifact.path.clone(),
                    sha256: artifact.sha256,
                    size: artifact.size,
                    transport: artifact.transport(),
                    mirrors: package.repo.mirrors.clone(),
                })
            })
            .collect()
    }

    /// The pending packages as installs of their artifacts, which are in
    /// `cache` once [`Plan::downloads`] are fetched.
    pub fn installs(&self, cache: &Cache) -> Vec<PackageInstall> {
        self.pending()
            .map(|package| PackageInstall {
                name: package.name.clone(),
                version: package.version.clone(),
                repo: package.repo.name.clone(),
                repo_version: package.repo.root_version,
                targets: self.gpus.clone(),
                layout: self.layout,
                artifacts: package
                    .chosen
                    .iter()
                    .map(|artifact| {
                        ReadyArtifact::new(
                            artifact.clone(),
                            cache.blob(&artifact.installed().sha256),
                        )
                    })
                    .collect(),
            })
            .collect()
    }

    /// Installs the packages `requests` name again even where they are
    /// installed as planned (`install --reinstall`): files deleted or
    /// changed in the prefix are written anew. Their dependencies are not.
    pub fn reinstall(&mut self, requests: &[Dependency]) {
        for package in &mut self.packages {
            if requests.iter().any(|r| r.name == package.name) {
                package.up_to_date = false;
            }
        }
    }
}

/// The shards the plan reads, fetched as resolution asks for them.
struct Shards<'a> {
    client: &'a Client,
    cache: &'a Cache,
    repos: &'a [Repo],
    shards: BTreeMap<PackageName, Shard>,
    origin: BTreeMap<PackageName, usize>,
}

impl Shards<'_> {
    /// Keeps `shard`, of `name`, from repository `index`.
    fn add(&mut self, name: PackageName, index: usize, shard: Shard) {
        self.shards.insert(name.clone(), shard);
        self.origin.insert(name, index);
    }

    /// Fetches the shards `missing` names, each from the first repository
    /// listing it, as many at once as the client fetches; a package no
    /// repository lists is unknown.
    fn fetch_round(&mut self, missing: Vec<(PackageName, String)>) -> Result<(), PlanError> {
        let mut located = Vec::with_capacity(missing.len());
        for (name, required_by) in missing {
            let found =
                self.repos.iter().enumerate().find_map(|(index, repo)| {
                    repo.shard_file(&name).map(|file| (index, repo, file))
                });
            let Some((index, repo, file)) = found else {
                return Err(ResolveError::UnknownPackage { name, required_by }.into());
            };
            let cached = self.cache.shard(&file.sha256);
            located.push((name, index, repo, file, cached));
        }
        let (cached, to_fetch): (Vec<_>, Vec<_>) = located
            .into_iter()
            .partition(|(.., cached)| cached.is_some());
        let pinned: Vec<PinnedFile<'_>> = to_fetch
            .iter()
            .map(|(_, _, _, file, _)| file.pinned())
            .collect();
        let fetched = self.client.fetch_verified_all(&pinned);
        for ((name, index, repo, file, _), bytes) in to_fetch.into_iter().zip(fetched) {
            let bytes = bytes.map_err(RepoError::Fetch)?;
            put_shard(self.cache, &file, &bytes)?;
            let shard = repo.read_shard(&name, &file, &bytes)?;
            self.add(name, index, shard);
        }
        for (name, index, repo, file, bytes) in cached {
            let shard = repo.read_shard(&name, &file, &bytes.unwrap_or_default())?;
            self.add(name, index, shard);
        }
        Ok(())
    }
}

/// Resolves `requests` and chooses artifacts for `gpus`.
pub fn make_plan(
    client: &Client,
    cache: &Cache,
    repos: &[Repo],
    requests: &[Dependency],
    gpus: &[Target],
    layout: Layout,
    installed: &InstalledRecord,
) -> Result<Plan, PlanError> {
    let mut shards = Shards {
        client,
        cache,
        repos,
        shards: BTreeMap::new(),
        origin: BTreeMap::new(),
    };
    // Each run names every package it lacks; fetch them all and go on.
    let mut resolver = Resolver::new(requests);
    let versions = loop {
        match resolver.run(&shards.shards)? {
            Resolved::Versions(versions) => break versions,
            Resolved::Missing(missing) => shards.fetch_round(missing)?,
        }
    };
    let mut packages = Vec::new();
    for (name, version) in versions {
        // Every version resolved is of a shard fetched, from a repository.
        let found = shards.shards.get(&name).zip(shards.origin.get(&name));
        let Some((entry, shard, repo)) = found.and_then(|(shard, &index)| {
            let entry = shard.versions.iter().find(|v| v.version == version)?;
            Some((entry, shard, repos.get(index)?))
        }) else {
            continue;
        };
        let goal = Goal { gpus, layout };
        let origin = Origin::from(repo);
        packages.push(plan_package(
            name,
            (entry, shard),
            origin,
            &repo.families,
            goal,
            installed,
        ));
    }
    Ok(Plan {
        packages,
        gpus: gpus.to_vec(),
        layout,
    })
}

/// The GPUs an install is for and how their code is installed.
#[derive(Debug, Clone, Copy)]
struct Goal<'a> {
    gpus: &'a [Target],
    layout: Layout,
}

impl Goal<'_> {
    /// Whether `current`, installed from `chosen` artifacts, is what this
    /// goal would install: in the fat layout the binaries hold exactly the
    /// installed targets' code, so other targets mean writing them again.
    fn met_by(&self, current: &InstalledPackage, chosen: &[Artifact]) -> bool {
        let mut have: Vec<_> = current.artifacts.iter().map(|a| a.sha256).collect();
        let mut want: Vec<_> = chosen.iter().map(|a| a.installed().sha256).collect();
        have.sort();
        want.sort();
        let same_targets = || {
            let mut installed = current.targets.clone();
            let mut wanted = self.gpus.to_vec();
            installed.sort();
            wanted.sort();
            installed == wanted
        };
        have == want
            && current.layout == self.layout
            && (self.layout == Layout::Kpack || same_targets())
    }
}

/// One resolved version (`entry`, of `shard`) and its artifacts for
/// `gpus`; a version with device code for none of them is planned all the
/// same, marked [`Unserved`] with the other versions that have their code.
fn plan_package(
    name: PackageName,
    (entry, shard): (&VersionEntry, &Shard),
    repo: Origin,
    families: &Families,
    goal: Goal<'_>,
    installed: &InstalledRecord,
) -> PlannedPackage {
    let gpus = goal.gpus;
    let version = entry.version.clone();
    let selection = select_artifacts(entry, gpus, families);
    let unserved = Unserved::find(entry, shard, gpus, families);
    let chosen: Vec<Artifact> = selection.artifacts.iter().map(|a| (*a).clone()).collect();
    let current = installed.packages.get(&name);
    let up_to_date = current.is_some_and(|c| c.version == version && goal.met_by(c, &chosen));
    PlannedPackage {
        full_size: entry.artifacts.iter().map(|a| a.size).sum(),
        built_from: entry.built_from.clone(),
        installed: current.map(|c| c.version.clone()),
        up_to_date,
        name,
        version,
        repo,
        chosen,
        explanations: selection.explanations,
        unserved,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(gpus: &[&str]) -> Result<Vec<String>, Unserved> {
        let shard = Shard::parse("shard.toml", kpack_test_support::COMPONENTS_SHARD).unwrap();
        let gpus: Vec<Target> = gpus.iter().map(|g| Target::parse(g).unwrap()).collect();
        let planned = plan_package(
            shard.name.clone(),
            (&shard.versions[0], &shard),
            Origin {
                name: "test".to_owned(),
                root_version: 1,
                mirrors: Arc::from([]),
            },
            &Families::builtin(),
            Goal {
                gpus: &gpus,
                layout: Layout::Kpack,
            },
            &InstalledRecord::empty(),
        );
        if let Some(unserved) = planned.unserved {
            return Err(unserved);
        }
        Ok(planned
            .chosen
            .iter()
            .map(|a| a.path.file_name().to_owned())
            .collect())
    }

    #[test]
    fn a_gpu_any_component_serves_is_planned_and_one_none_serves_is_refused() {
        assert_eq!(
            plan(&["gfx1100"]).unwrap(),
            [
                "host.tar.zst",
                "blas_gfx1100.kpack",
                "tensile-gfx1100.tar.zst"
            ]
        );
        // Only a Tensile payload for this GPU: that is still device code.
        assert_eq!(
            plan(&["gfx942:sramecc+:xnack-"]).unwrap(),
            ["host.tar.zst", "tensile-gfx942.tar.zst"]
        );
        assert_eq!(plan(&[]).unwrap(), ["host.tar.zst"]);
        match plan(&["gfx1030"]) {
            Err(unserved) => {
                let error = PlanError::NoDeviceCode {
                    package: "rocm-blas".parse().unwrap(),
                    version: semver::Version::new(5, 5, 1),
                    unserved: Box::new(unserved),
                };
                let message = error.to_string();
                assert!(
                    message.contains("has no device code for gfx1030")
                        && message.contains("gfx110X-all")
                        && message.contains("gfx942")
                        && message.ends_with("; no other version has code for it"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

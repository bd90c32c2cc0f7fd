//! Version resolution: package requests and their dependencies to one
//! version per package, the highest that satisfies every requirement on it.
//!
//! [`Resolver`] works incrementally from a worklist: choosing a version
//! withdraws the requirements the previous choice brought and adds the new
//! one's, and only the packages whose requirements changed are looked at
//! again, once per round (every package dirtied by one round is looked at
//! in the next, after its requirers of this one have spoken). Each
//! package keeps its merged requirement and the versions it admits, so a
//! new requirement is checked against those alone. Shards can arrive
//! between runs: a run names every package it lacks at once, so a caller
//! fetches a whole round before resolving on. A chain of N packages costs
//! O(N) steps in all, not a resolution per fetched shard.

use std::collections::{BTreeMap, BTreeSet};

use semver::{Version, VersionReq};

use super::admitted::Admitted;
use crate::schema::{Shard, VersionEntry};
use crate::types::{Dependency, Encoding, PackageName, RelativePath};

/// Why requests cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    #[error("no package {name} (required by {required_by})")]
    UnknownPackage {
        name: PackageName,
        required_by: String,
    },
    #[error(
        "no version of {name} satisfies {}; available: {}",
        list_requirements(requirements),
        list_versions(available)
    )]
    NoVersion {
        name: PackageName,
        /// `(who requires it, what they require)`.
        requirements: Vec<(String, VersionReq)>,
        available: Vec<Version>,
    },
    #[error("the dependency requirements do not settle on one version per package")]
    DoesNotSettle,
    #[error(
        "{name} {version} needs kpack-get {requires} or newer (this is {}); upgrade kpack-get to install it",
        crate::schema::CLIENT_VERSION
    )]
    NeedsNewerClient {
        name: PackageName,
        version: Version,
        requires: Version,
    },
    #[error(
        "{name} {version}: {path} is stored with the transport encoding \"{encoding}\", which kpack-get {} cannot decode; upgrade kpack-get to install it",
        crate::schema::CLIENT_VERSION
    )]
    UnknownEncoding {
        name: PackageName,
        version: Version,
        path: RelativePath,
        encoding: Encoding,
    },
}

fn list_requirements(requirements: &[(String, VersionReq)]) -> String {
    requirements
        .iter()
        .map(|(by, req)| format!("{req} (from {by})"))
        .collect::<Vec<_>>()
        .join(" and ")
}

fn list_versions(versions: &[Version]) -> String {
    if versions.is_empty() {
        return "none".into();
    }
    versions
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Resolves `requests` and their dependencies to the highest versions that
/// satisfy every requirement on them; returns name -> version. A package
/// without a shard in `shards` is an [`ResolveError::UnknownPackage`].
pub fn resolve(
    shards: &BTreeMap<PackageName, Shard>,
    requests: &[Dependency],
) -> Result<BTreeMap<PackageName, Version>, ResolveError> {
    match Resolver::new(requests).run(shards)? {
        Resolved::Versions(versions) => Ok(versions),
        Resolved::Missing(mut missing) => {
            let (name, required_by) = missing.swap_remove(0);
            Err(ResolveError::UnknownPackage { name, required_by })
        }
    }
}

/// What a run of the resolver came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Every required package has its version.
    Versions(BTreeMap<PackageName, Version>),
    /// The packages required that have no shard yet, each with who requires
    /// it, in name order; add their shards and run again.
    Missing(Vec<(PackageName, String)>),
}

/// Who a requirement comes from; requests sort first, as they are listed
/// first in messages.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    Request(usize),
    Package(PackageName),
}

/// Incremental version resolution over shards that may arrive between runs.
#[derive(Debug)]
pub struct Resolver {
    /// What each package must satisfy, by who asks.
    requirements: BTreeMap<PackageName, BTreeMap<Source, Vec<VersionReq>>>,
    /// The same requirements merged per package, with the versions they
    /// admit.
    admitted: BTreeMap<PackageName, Admitted>,
    /// Requirements tested against versions so far.
    checks: usize,
    chosen: BTreeMap<PackageName, Version>,
    /// The packages each chosen version put requirements on.
    given: BTreeMap<PackageName, Vec<PackageName>>,
    /// Packages whose requirements changed since they were last looked at.
    dirty: BTreeSet<PackageName>,
    /// Required packages without a shard when last looked at.
    missing: BTreeSet<PackageName>,
    /// Steps taken, against the bound that stops requirements which never
    /// settle (version choices that undo each other).
    steps: usize,
}

impl Resolver {
    pub fn new(requests: &[Dependency]) -> Resolver {
        let mut requirements: BTreeMap<PackageName, BTreeMap<Source, Vec<VersionReq>>> =
            BTreeMap::new();
        let mut admitted: BTreeMap<PackageName, Admitted> = BTreeMap::new();
        for (index, request) in requests.iter().enumerate() {
            requirements
                .entry(request.name.clone())
                .or_default()
                .entry(Source::Request(index))
                .or_default()
                .push(request.requirement.clone());
            admitted
                .entry(request.name.clone())
                .or_default()
                .add(&request.requirement);
        }
        Resolver {
            dirty: requirements.keys().cloned().collect(),
            requirements,
            admitted,
            checks: 0,
            chosen: BTreeMap::new(),
            given: BTreeMap::new(),
            missing: BTreeSet::new(),
            steps: 0,
        }
    }

    /// Resolves as far as `shards` allow. Call again with more shards after
    /// [`Resolved::Missing`]; the work done so far is kept.
    pub fn run(&mut self, shards: &BTreeMap<PackageName, Shard>) -> Result<Resolved, ResolveError> {
        let arrived: Vec<PackageName> = self
            .missing
            .iter()
            .filter(|name| shards.contains_key(*name))
            .cloned()
            .collect();
        for name in arrived {
            self.missing.remove(&name);
            self.dirty.insert(name);
        }
        // Counting every shard's versions each run would make a chain
        // fetched a shard per run quadratic: count them only once the
        // steps pass what the packages alone allow.
        let mut versions = None;
        while !self.dirty.is_empty() {
            for name in std::mem::take(&mut self.dirty) {
                // Dirtied again earlier in this round: looked at now.
                self.dirty.remove(&name);
                self.steps += 1;
                if self.steps > self.step_budget(0) {
                    let versions = *versions
                        .get_or_insert_with(|| shards.values().map(|s| s.versions.len()).sum());
                    if self.steps > self.step_budget(versions) {
                        return Err(ResolveError::DoesNotSettle);
                    }
                }
                self.look_at(&name, shards)?;
            }
        }
        if self.missing.is_empty() {
            return Ok(Resolved::Versions(self.chosen.clone()));
        }
        let missing = self
            .missing
            .iter()
            .map(|name| (name.clone(), self.required_by(name)))
            .collect();
        Ok(Resolved::Missing(missing))
    }

    /// The steps taken so far: each is one package looked at again.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The version checks made so far: each is one requirement tested
    /// against one version.
    pub fn checks(&self) -> usize {
        self.checks
    }

    /// Chooses `name`'s version anew from what is required of it now.
    fn look_at(
        &mut self,
        name: &PackageName,
        shards: &BTreeMap<PackageName, Shard>,
    ) -> Result<(), ResolveError> {
        let required = self.requirements.get(name).is_some_and(|r| !r.is_empty());
        if !required {
            // No longer required by anything chosen: drop it and what it asked.
            self.missing.remove(name);
            if self.chosen.remove(name).is_some() {
                self.withdraw(name);
            }
            return Ok(());
        }
        let Some(shard) = shards.get(name) else {
            self.missing.insert(name.clone());
            return Ok(());
        };
        let entry = self.best(shard)?;
        refuse_newer_client(shard, entry)?;
        refuse_unknown_encoding(shard, entry)?;
        if self.chosen.get(name) == Some(&entry.version) {
            return Ok(());
        }
        if self.chosen.contains_key(name) {
            self.withdraw(name);
        }
        self.chosen.insert(name.clone(), entry.version.clone());
        let given = entry.depends.iter().map(|d| d.name.clone()).collect();
        self.given.insert(name.clone(), given);
        for dependency in &entry.depends {
            self.requirements
                .entry(dependency.name.clone())
                .or_default()
                .entry(Source::Package(name.clone()))
                .or_default()
                .push(dependency.requirement.clone());
            self.admitted
                .entry(dependency.name.clone())
                .or_default()
                .add(&dependency.requirement);
            self.dirty.insert(dependency.name.clone());
        }
        Ok(())
    }

    /// The highest version of `shard` meeting every requirement on it.
    fn best<'s>(&mut self, shard: &'s Shard) -> Result<&'s VersionEntry, ResolveError> {
        let admitted = self.admitted.entry(shard.name.clone()).or_default();
        admitted
            .best(shard, &mut self.checks)
            .map(|index| &shard.versions[index])
            .ok_or_else(|| {
                let mut available: Vec<Version> =
                    shard.versions.iter().map(|v| v.version.clone()).collect();
                available.sort();
                ResolveError::NoVersion {
                    name: shard.name.clone(),
                    requirements: self.listed_requirements(&shard.name),
                    available,
                }
            })
    }

    /// Takes back the requirements `name`'s chosen version put on others.
    fn withdraw(&mut self, name: &PackageName) {
        let source = Source::Package(name.clone());
        for dependency in self.given.remove(name).unwrap_or_default() {
            if let Some(requirements) = self.requirements.get_mut(&dependency) {
                let withdrawn = requirements.remove(&source).unwrap_or_default();
                if let Some(admitted) = self.admitted.get_mut(&dependency) {
                    withdrawn.iter().for_each(|r| admitted.remove(r));
                }
            }
            self.dirty.insert(dependency);
        }
    }

    /// `(who, requirement)` pairs on `name`, as messages list them.
    fn listed_requirements(&self, name: &PackageName) -> Vec<(String, VersionReq)> {
        let Some(requirements) = self.requirements.get(name) else {
            return Vec::new();
        };
        requirements
            .iter()
            .flat_map(|(source, reqs)| {
                let by = self.describe(source);
                reqs.iter().map(move |req| (by.clone(), req.clone()))
            })
            .collect()
    }

    fn required_by(&self, name: &PackageName) -> String {
        let Some(requirements) = self.requirements.get(name) else {
            return String::new();
        };
        requirements
            .keys()
            .map(|source| self.describe(source))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// How many steps resolution may take before it is judged not to
    /// settle: each of `versions` (of every shard) and each package
    /// required may be looked at a few times over.
    fn step_budget(&self, versions: usize) -> usize {
        1000 + 16 * (versions + self.requirements.len())
    }

    fn describe(&self, source: &Source) -> String {
        match source {
            Source::Request(_) => "the request".into(),
            Source::Package(name) => match self.chosen.get(name) {
                Some(version) => format!("{name} {version}"),
                None => name.to_string(),
            },
        }
    }
}

/// Refuses `entry` of `shard` when it states a `requires-client` newer
/// than this build: installing it could put device code where no GPU
/// needs it, or leave it out where one does.
fn refuse_newer_client(shard: &Shard, entry: &VersionEntry) -> Result<(), ResolveError> {
    let Some(requires) = &entry.requires_client else {
        return Ok(());
    };
    let this: Version = crate::schema::CLIENT_VERSION
        .parse()
        .unwrap_or_else(|_| Version::new(0, 0, 0));
    if *requires > this {
        return Err(ResolveError::NeedsNewerClient {
            name: shard.name.clone(),
            version: entry.version.clone(),
            requires: requires.clone(),
        });
    }
    Ok(())
}

/// Refuses `entry` of `shard` when one of its artifacts is stored with an
/// encoding this build cannot decode: installed as served, it would not be
/// the archive or tree the index describes.
fn refuse_unknown_encoding(shard: &Shard, entry: &VersionEntry) -> Result<(), ResolveError> {
    let unknown = entry.artifacts.iter().find_map(|a| {
        a.encoding
            .as_ref()
            .filter(|e| !e.is_known())
            .map(|e| (a, e))
    });
    match unknown {
        Some((artifact, encoding)) => Err(ResolveError::UnknownEncoding {
            name: shard.name.clone(),
            version: entry.version.clone(),
            path: artifact.path.clone(),
            encoding: encoding.clone(),
        }),
        None => Ok(()),
    }
}

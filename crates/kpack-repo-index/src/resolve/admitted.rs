//! The versions of one package that its requirements still admit, kept as
//! requirements come and go, so resolution costs versions plus
//! requirements per package, not their product per requirer.

use std::collections::HashMap;

use semver::{Version, VersionReq};

use crate::schema::Shard;

/// One package's merged requirement and the versions it admits.
#[derive(Debug, Default)]
pub(super) struct Admitted {
    /// Each distinct requirement and how many requirers state it: a
    /// requirement already stated costs nothing more.
    merged: HashMap<VersionReq, usize>,
    /// Distinct requirements stated since `versions` last narrowed.
    fresh: Vec<VersionReq>,
    /// Indices into the shard's versions meeting every requirement but
    /// the fresh ones, in shard order; `None` when they must be found
    /// anew (at first, or after a requirement was withdrawn).
    versions: Option<Vec<usize>>,
}

impl Admitted {
    /// Adds one requirer's `requirement`.
    pub(super) fn add(&mut self, requirement: &VersionReq) {
        let count = self.merged.entry(requirement.clone()).or_insert(0);
        *count += 1;
        if *count == 1 {
            self.fresh.push(requirement.clone());
        }
    }

    /// Takes back one requirer's `requirement`; the last one withdrawn
    /// may admit versions again, so they are found anew next time.
    pub(super) fn remove(&mut self, requirement: &VersionReq) {
        let Some(count) = self.merged.get_mut(requirement) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            self.merged.remove(requirement);
            self.versions = None;
            self.fresh.clear();
        }
    }

    /// The highest version of `shard` meeting every requirement, as an
    /// index into its versions; `checks` counts each requirement tested
    /// against a version.
    pub(super) fn best(&mut self, shard: &Shard, checks: &mut usize) -> Option<usize> {
        let count = shard.versions.len();
        let mut meets = |version: &Version, requirements: &mut dyn Iterator<Item = &VersionReq>| {
            for requirement in requirements {
                *checks += 1;
                if !requirement.matches(version) {
                    return false;
                }
            }
            true
        };
        match &mut self.versions {
            Some(versions) if versions.last().is_none_or(|&last| last < count) => {
                versions.retain(|&i| meets(&shard.versions[i].version, &mut self.fresh.iter()));
            }
            _ => {
                let all = (0..count)
                    .filter(|&i| meets(&shard.versions[i].version, &mut self.merged.keys()))
                    .collect();
                self.versions = Some(all);
            }
        }
        self.fresh.clear();
        let versions = self.versions.as_deref().unwrap_or_default();
        versions
            .iter()
            .copied()
            .max_by(|&a, &b| shard.versions[a].version.cmp(&shard.versions[b].version))
    }
}

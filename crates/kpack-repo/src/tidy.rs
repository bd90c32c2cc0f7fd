//! Keeping a repository tidy: `prune` drops old versions from the index
//! (one signed root update); `gc` deletes what no root a reader may still
//! hold pins, once it is older than a grace period. Publishing never
//! deletes, so these are the only ways a repository shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::publish::{PublishError, Publisher};
use crate::store::{Store, StoredObject};
use kpack_repo_index::schema::RootIndex;
use kpack_repo_index::types::{PackageName, Timestamp};
use kpack_sign::SecretKey;

/// What `prune` dropped, and the root it published (none when it had
/// nothing to drop).
#[derive(Debug)]
pub struct Pruned {
    pub dropped: Vec<(PackageName, semver::Version)>,
    pub root: Option<RootIndex>,
}

/// What `gc` found to delete (and deleted, unless it was a dry run).
#[derive(Debug, Default)]
pub struct Collected {
    /// Root copies, then shards and pool files, in the order deleted.
    pub garbage: Vec<StoredObject>,
    /// Unpinned files kept because they are younger than the grace period.
    pub young: Vec<StoredObject>,
    /// The root versions whose files were kept pinned.
    pub roots: Vec<u64>,
}

impl Collected {
    pub fn bytes(&self) -> u64 {
        self.garbage.iter().map(|o| o.size).sum()
    }
}

impl Publisher {
    /// Drops all but the newest `keep` versions of every package from the
    /// index, except versions a kept version depends on exactly (`=`), and
    /// publishes the result signed with `key`. Nothing is published when
    /// nothing is dropped.
    pub fn prune(&self, keep: usize, key: Option<&SecretKey>) -> Result<Pruned, PublishError> {
        let Some(root) = self.root_index()? else {
            return Err(PublishError::NoIndex {
                location: self.store().location("index.toml"),
            });
        };
        if self.prune_plan(&root, keep)?.is_empty() {
            return Ok(Pruned {
                dropped: Vec::new(),
                root: None,
            });
        }
        let mut dropped = Vec::new();
        let root = self.commit_change(key, |root| {
            dropped.clear();
            for (name, versions) in self.prune_plan(root, keep)? {
                let Some(mut shard) = self.shard(root, &name)? else {
                    continue;
                };
                shard.versions.retain(|v| !versions.contains(&v.version));
                let summary = root
                    .packages
                    .get(&name)
                    .map(|p| p.summary.clone())
                    .unwrap_or_default();
                dropped.extend(versions.into_iter().map(|v| (name.clone(), v)));
                self.publish_shard(root, shard, summary)?;
            }
            Ok(())
        })?;
        Ok(Pruned {
            dropped,
            root: Some(root),
        })
    }

    /// The versions of each package that `prune --keep keep` drops from
    /// `root`.
    fn prune_plan(
        &self,
        root: &RootIndex,
        keep: usize,
    ) -> Result<BTreeMap<PackageName, BTreeSet<semver::Version>>, PublishError> {
        let mut shards = BTreeMap::new();
        for name in root.packages.keys() {
            if let Some(shard) = self.shard(root, name)? {
                shards.insert(name.clone(), shard);
            }
        }
        // Newest first; the newest `keep` of each package stay.
        let mut kept: BTreeSet<(PackageName, semver::Version)> = BTreeSet::new();
        for (name, shard) in &shards {
            let mut versions: Vec<&semver::Version> =
                shard.versions.iter().map(|v| &v.version).collect();
            versions.sort_by(|a, b| b.cmp(a));
            kept.extend(
                versions
                    .into_iter()
                    .take(keep)
                    .map(|v| (name.clone(), v.clone())),
            );
        }
        // What a kept version pins exactly stays too, and what that pins.
        loop {
            let mut more = Vec::new();
            for (name, version) in &kept {
                let entry = shards
                    .get(name)
                    .and_then(|s| s.versions.iter().find(|v| &v.version == version));
                for dependency in entry.iter().flat_map(|e| &e.depends) {
                    if !is_exact(&dependency.requirement) {
                        continue;
                    }
                    let Some(shard) = shards.get(&dependency.name) else {
                        continue;
                    };
                    for v in &shard.versions {
                        let pair = (dependency.name.clone(), v.version.clone());
                        if dependency.requirement.matches(&v.version) && !kept.contains(&pair) {
                            more.push(pair);
                        }
                    }
                }
            }
            if more.is_empty() {
                break;
            }
            kept.extend(more);
        }
        let mut plan: BTreeMap<PackageName, BTreeSet<semver::Version>> = BTreeMap::new();
        for (name, shard) in &shards {
            for v in &shard.versions {
                if !kept.contains(&(name.clone(), v.version.clone())) {
                    plan.entry(name.clone())
                        .or_default()
                        .insert(v.version.clone());
                }
            }
        }
        Ok(plan)
    }
}

fn is_exact(requirement: &semver::VersionReq) -> bool {
    matches!(requirement.comparators.as_slice(), [c] if c.op == semver::Op::Exact)
}

/// Finds, in the repository `store`, the root copies (`roots/`) that no
/// reader may still hold, then the shards and pool files that no remaining
/// root pins; of those, what is older than `grace` at `now` is garbage,
/// deleted when `delete` is set. A root copy stays while it is current or
/// was current within the grace period (its successor is younger than
/// that), so a client holding a root it fetched then still finds its
/// files. The current root's files are never garbage.
pub fn collect_garbage(
    store: &Store,
    grace: Duration,
    now: Timestamp,
    delete: bool,
) -> Result<Collected, PublishError> {
    let current = store
        .read("index.toml")?
        .ok_or_else(|| PublishError::NoIndex {
            location: store.location("index.toml"),
        })?;
    let current_root = RootIndex::parse("index.toml", &String::from_utf8_lossy(&current.bytes))?;
    let cutoff = jiff::SignedDuration::try_from(grace)
        .ok()
        .and_then(|grace| now.0.checked_sub(grace).ok())
        .map_or(Timestamp(jiff::Timestamp::MIN), Timestamp);
    let old = |object: &StoredObject| object.modified < cutoff;

    let copies = root_copies(&store.list("roots/")?);
    let mut collected = Collected::default();
    let mut roots = vec![current_root.clone()];
    let mut kept_versions = BTreeSet::from([current_root.repo.version]);
    let versions: Vec<u64> = copies.keys().copied().collect();
    for (index, (&version, files)) in copies.iter().enumerate() {
        if version == current_root.repo.version {
            continue;
        }
        // Until its successor was written, this root was what readers got.
        let retired = versions
            .get(index + 1)
            .and_then(|next| copies.get(next))
            .and_then(|files| files.iter().find(|f| f.key.ends_with(".toml")))
            .filter(|_| version < current_root.repo.version);
        let gone = match retired {
            Some(successor) => old(successor),
            None => files.iter().all(old),
        };
        if gone {
            collected.garbage.extend(files.iter().cloned());
            continue;
        }
        let copy = RootIndex::versioned_key(version);
        if let Some(read) = store.read(&copy)? {
            roots.push(RootIndex::parse(
                &copy,
                &String::from_utf8_lossy(&read.bytes),
            )?);
            kept_versions.insert(version);
        }
    }
    collected.roots = kept_versions.into_iter().collect();

    let pinned = pinned_keys(store, &roots)?;
    for prefix in ["packages/", "pool/"] {
        for object in store.list(prefix)? {
            if pinned.contains(&object.key) {
                continue;
            }
            if old(&object) {
                collected.garbage.push(object);
            } else {
                collected.young.push(object);
            }
        }
    }
    if delete {
        for object in &collected.garbage {
            store.delete(&object.key)?;
        }
    }
    Ok(collected)
}

/// The files of `roots/`, by the root version they are a copy (or a copy's
/// signature) of; other files there are left alone.
fn root_copies(listed: &[StoredObject]) -> BTreeMap<u64, Vec<StoredObject>> {
    let mut copies: BTreeMap<u64, Vec<StoredObject>> = BTreeMap::new();
    for object in listed {
        let name = object.key.trim_start_matches("roots/");
        let stem = name
            .strip_suffix(".toml.minisig")
            .or_else(|| name.strip_suffix(".toml"));
        if let Some(version) = stem.and_then(|s| s.parse::<u64>().ok()) {
            copies.entry(version).or_default().push(object.clone());
        }
    }
    copies
}

/// Every shard the `roots` pin, and every artifact (and its signature)
/// those shards pin.
fn pinned_keys(store: &Store, roots: &[RootIndex]) -> Result<BTreeSet<String>, PublishError> {
    let mut pinned = BTreeSet::new();
    for root in roots {
        for (name, entry) in &root.packages {
            let path = entry.shard_path(name);
            if !pinned.insert(path.as_str().to_owned()) {
                continue;
            }
            // A shard already gone pins nothing that could still be read.
            let Some(read) = store.read(path.as_str())? else {
                continue;
            };
            let shard = kpack_repo_index::schema::Shard::parse(
                path.as_str(),
                &String::from_utf8_lossy(&read.bytes),
            )?;
            for artifact in shard.versions.iter().flat_map(|v| &v.artifacts) {
                pinned.insert(artifact.path.as_str().to_owned());
                pinned.insert(format!("{}.minisig", artifact.path));
            }
        }
    }
    Ok(pinned)
}

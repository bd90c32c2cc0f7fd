//! Adding versions: each package's shard read, the versions added, the
//! shard written content-addressed, and the root pointed at it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::error::missing;
use super::protocol::Current;
use super::{NewArtifact, NewVersion, PublishError, Publisher, Staged};
use crate::store::{Body, CacheControl, StoreError};
use kpack_repo_index::schema::{Artifact, PackageEntry, RootIndex, Shard, VersionEntry};
use kpack_repo_index::types::{
    usual_shard, InvalidPath, InvalidValue, PackageName, RelativePath, Sha256,
};
use kpack_sign::SecretKey;

impl Publisher {
    /// The shard of `name` in `root`, if any.
    pub fn shard(
        &self,
        root: &RootIndex,
        name: &PackageName,
    ) -> Result<Option<Shard>, PublishError> {
        let Some(entry) = root.packages.get(name) else {
            return Ok(None);
        };
        let shard_path = entry.shard_path(name);
        let read = self
            .store
            .read(shard_path.as_str())?
            .ok_or_else(|| StoreError::Io(missing(&self.store.location(shard_path.as_str()))))?;
        let text = String::from_utf8_lossy(&read.bytes);
        Ok(Some(Shard::parse(shard_path.as_str(), &text)?))
    }

    /// Adds `new` with `artifacts` and publishes a new root signed with
    /// `key` (unsigned when `None`).
    pub fn add(
        &self,
        new: &NewVersion,
        artifacts: &[NewArtifact],
        key: Option<&SecretKey>,
    ) -> Result<RootIndex, PublishError> {
        let current = self.current()?;
        if let Some(root) = &current.root {
            self.refuse_published(root, &new.name, &new.version)?;
        }
        let staged = self.stage(new, artifacts)?;
        self.commit_staged(Some(current), std::slice::from_ref(&staged), key)
    }

    /// Publishes every staged version in one new root signed with `key`;
    /// none is published if any already is.
    pub fn add_staged(
        &self,
        staged: &[Staged],
        key: Option<&SecretKey>,
    ) -> Result<RootIndex, PublishError> {
        self.commit_staged(None, staged, key)
    }

    fn commit_staged(
        &self,
        first: Option<Current>,
        staged: &[Staged],
        key: Option<&SecretKey>,
    ) -> Result<RootIndex, PublishError> {
        self.commit(first, key, |root| {
            let mut by_name: BTreeMap<&PackageName, Vec<&Staged>> = BTreeMap::new();
            for one in staged {
                self.refuse_published(root, &one.new.name, &one.new.version)?;
                by_name.entry(&one.new.name).or_default().push(one);
            }
            for (name, versions) in by_name {
                let mut shard = self.shard(root, name)?.unwrap_or_else(|| Shard {
                    name: name.clone(),
                    versions: Vec::new(),
                });
                let mut summary = root.packages.get(name).map(|p| p.summary.clone());
                for one in versions {
                    let new = &one.new;
                    if shard.versions.iter().any(|v| v.version == new.version) {
                        return Err(PublishError::VersionExists {
                            name: name.clone(),
                            version: new.version.clone(),
                        });
                    }
                    shard.versions.push(VersionEntry {
                        version: new.version.clone(),
                        depends: new.depends.clone(),
                        system_requires: new.system_requires.clone(),
                        requires_client: required_client(&one.artifacts),
                        artifacts: one.artifacts.clone(),
                        built_from: new.built_from.clone(),
                    });
                    summary = new.summary.clone().or(summary);
                }
                shard.versions.sort_by(|a, b| a.version.cmp(&b.version));
                self.publish_shard(root, shard, summary.unwrap_or_default())?;
            }
            Ok(())
        })
    }

    fn refuse_published(
        &self,
        root: &RootIndex,
        name: &PackageName,
        version: &semver::Version,
    ) -> Result<(), PublishError> {
        let published = self
            .shard(root, name)?
            .is_some_and(|shard| shard.versions.iter().any(|v| &v.version == version));
        if published {
            return Err(PublishError::VersionExists {
                name: name.clone(),
                version: version.clone(),
            });
        }
        Ok(())
    }

    /// Writes a shard (content-addressed, so create-only and never over
    /// another) and points `root` at it.
    pub(crate) fn publish_shard(
        &self,
        root: &mut RootIndex,
        shard: Shard,
        summary: String,
    ) -> Result<(), PublishError> {
        let text = shard.to_toml()?;
        let sha256 = Sha256::of(text.as_bytes());
        let path: RelativePath = Shard::path_for(&shard.name, text.as_bytes())
            .parse()
            .map_err(|e: InvalidPath| PublishError::Artifact {
                path: PathBuf::from("packages"),
                problem: InvalidValue::from(e).into(),
            })?;
        // Named by its hash: whatever is already there is these bytes.
        self.store.create(
            path.as_str(),
            Body::Bytes(text.as_bytes()),
            CacheControl::Immutable,
        )?;
        let mut built_from: Vec<String> = shard
            .versions
            .iter()
            .flat_map(|v| v.built_from.iter().filter_map(|b| b.package.clone()))
            .collect();
        built_from.sort();
        built_from.dedup();
        let latest = shard
            .versions
            .iter()
            .map(|v| v.version.clone())
            .max()
            .unwrap_or_else(|| semver::Version::new(0, 0, 0));
        root.packages.insert(
            shard.name.clone(),
            PackageEntry {
                // Written at its usual place, so the root need not say.
                shard: (path != usual_shard(&shard.name, &sha256)).then_some(path),
                sha256,
                size: Some(text.len() as u64),
                latest,
                summary,
                built_from,
            },
        );
        Ok(())
    }
}

/// The oldest client a version with `artifacts` needs: one that knows
/// owners when one is owned, one that decodes when one is encoded.
fn required_client(artifacts: &[Artifact]) -> Option<semver::Version> {
    use kpack_repo_index::schema::{ENCODING_CLIENT, OWNER_CLIENT};
    let owned = artifacts.iter().any(|a| a.owner.is_some());
    let encoded = artifacts.iter().any(|a| a.encoding.is_some());
    [(owned, OWNER_CLIENT), (encoded, ENCODING_CLIENT)]
        .into_iter()
        .filter_map(|(needed, client)| needed.then_some(client))
        .max()
}

//! The publishing protocol: a change applied to the current root, the new
//! root's version claimed by its immutable copy, `index.toml` swapped in
//! only if it is still the root the change was made to, and its signature
//! settled; retried from a fresh read whenever another publisher got in
//! first.

use std::collections::BTreeMap;

use super::{PublishError, Publisher};
use crate::store::{Body, CacheControl, Created, Etag};
use kpack_repo_index::schema::{RepoInfo, RootIndex, FORMAT};
use kpack_repo_index::sign::sign_root;
use kpack_repo_index::types::{PackageName, Timestamp};
use kpack_sign::SecretKey;

/// How long a published root stays valid unless told otherwise.
pub const DEFAULT_VALIDITY_DAYS: i64 = 30;

/// How many times a publisher re-reads the root and retries after losing
/// the swap to another publisher before giving up.
const MAX_ATTEMPTS: usize = 64;

/// The root as read, and the version of `index.toml` it was read from.
pub(super) struct Current {
    pub(super) root: Option<RootIndex>,
    pub(super) etag: Option<Etag>,
}

impl Publisher {
    /// The name a new repository gets: its directory's name (or its bucket
    /// prefix's last segment) when that is a valid name, else `kpack`.
    fn default_name(&self) -> PackageName {
        self.store
            .leaf_name()
            .and_then(|n| n.to_lowercase().parse().ok())
            .unwrap_or_else(PackageName::unnamed_repository)
    }

    /// The current root, as read with the version of `index.toml`.
    pub(super) fn current(&self) -> Result<Current, PublishError> {
        Ok(match self.store.read("index.toml")? {
            Some(read) => {
                let text = String::from_utf8_lossy(&read.bytes);
                Current {
                    root: Some(RootIndex::parse("index.toml", &text)?),
                    etag: Some(read.etag),
                }
            }
            None => Current {
                root: None,
                etag: None,
            },
        })
    }

    /// Applies `change` to the current root and publishes the result, by
    /// the publishing protocol.
    pub(crate) fn commit_change(
        &self,
        key: Option<&SecretKey>,
        change: impl FnMut(&mut RootIndex) -> Result<(), PublishError>,
    ) -> Result<RootIndex, PublishError> {
        self.commit(None, key, change)
    }

    /// The publishing protocol: applies `change` to the current root (an
    /// empty one for a new repository) and publishes the result as a new
    /// version, retrying from a fresh read whenever another publisher got
    /// in first. `change` runs once per attempt and may write immutable
    /// files (shards); it must not depend on an earlier attempt.
    pub(super) fn commit(
        &self,
        first: Option<Current>,
        key: Option<&SecretKey>,
        mut change: impl FnMut(&mut RootIndex) -> Result<(), PublishError>,
    ) -> Result<RootIndex, PublishError> {
        let mut read = first;
        for _ in 0..MAX_ATTEMPTS {
            let Current { root, etag } = match read.take() {
                Some(current) => current,
                None => self.current()?,
            };
            let mut root = root.unwrap_or_else(|| empty_root(self.default_name()));
            let previous = root.repo.version;
            change(&mut root)?;
            stamp(&mut root, previous + 1);
            let Some(signature) = self.claim(&mut root, key)? else {
                continue;
            };
            let text = root.to_toml()?;
            let claimed = RootIndex::versioned_key(root.repo.version);
            let swapped = self.store.swap(
                "index.toml",
                text.as_bytes(),
                etag.as_ref(),
                CacheControl::NoCache,
            )?;
            let Some(swapped) = swapped else {
                // Never named by index.toml, so no reader can want it.
                self.store.delete(&format!("{claimed}.minisig"))?;
                self.store.delete(&claimed)?;
                continue;
            };
            self.write_signature(signature.as_deref())?;
            if self.store.etag("index.toml")? != Some(swapped) {
                self.settle_signature()?;
            }
            return Ok(root);
        }
        Err(PublishError::Contended {
            location: self.store.location("index.toml"),
            attempts: MAX_ATTEMPTS,
        })
    }

    /// Writes the immutable copy of `root` (and its signature) at the first
    /// free `roots/<version>.toml` from its version on, setting the version
    /// to the one claimed: its signature (`Some(None)` unsigned), or `None`
    /// if others keep taking the versions.
    #[allow(clippy::option_option)]
    fn claim(
        &self,
        root: &mut RootIndex,
        key: Option<&SecretKey>,
    ) -> Result<Option<Option<String>>, PublishError> {
        // A publisher stopped after its claim leaves a version no root
        // names; versions need only increase, so step over it.
        for _ in 0..MAX_ATTEMPTS {
            let text = root.to_toml()?;
            let claimed = RootIndex::versioned_key(root.repo.version);
            let signature = key.map(|key| sign_root(key, text.as_bytes())).transpose()?;
            match self.store.create(
                &claimed,
                Body::Bytes(text.as_bytes()),
                CacheControl::Immutable,
            )? {
                Created::Created => {
                    if let Some(signature) = &signature {
                        let key = format!("{claimed}.minisig");
                        self.store
                            .put(&key, signature.as_bytes(), CacheControl::Immutable)?;
                    }
                    return Ok(Some(signature));
                }
                Created::Exists => root.repo.version += 1,
            }
        }
        Ok(None)
    }

    /// Writes `index.toml.minisig`, or removes it for an unsigned root.
    fn write_signature(&self, signature: Option<&str>) -> Result<(), PublishError> {
        match signature {
            Some(signature) => self.store.put(
                "index.toml.minisig",
                signature.as_bytes(),
                CacheControl::NoCache,
            )?,
            None => self.store.delete("index.toml.minisig")?,
        }
        Ok(())
    }

    /// Makes `index.toml.minisig` the signature of the current root (from
    /// its immutable copy), or removes it for an unsigned root: for when
    /// another root went in after this publisher's, whose signature may
    /// have been written after the newer one's.
    pub(super) fn settle_signature(&self) -> Result<(), PublishError> {
        for _ in 0..MAX_ATTEMPTS {
            let Some(current) = self.store.read("index.toml")? else {
                return Ok(());
            };
            let Some(version) = RootIndex::peek_version(&current.bytes) else {
                return Ok(());
            };
            let copy = format!("{}.minisig", RootIndex::versioned_key(version));
            let signature = self.store.read(&copy)?.map(|read| read.bytes);
            let signature = signature.map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
            self.write_signature(signature.as_deref())?;
            if self.store.etag("index.toml")?.as_ref() == Some(&current.etag) {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// Sets a new root's version and its dates.
fn stamp(root: &mut RootIndex, version: u64) {
    let now = Timestamp::now();
    root.repo.version = version;
    root.repo.generated = Timestamp::from_second(now.as_second()).unwrap_or(now);
    root.repo.expires =
        Timestamp::from_second(now.as_second() + DEFAULT_VALIDITY_DAYS * 86_400).unwrap_or(now);
}

fn empty_root(name: PackageName) -> RootIndex {
    let now = Timestamp::now();
    RootIndex {
        format: FORMAT,
        repo: RepoInfo {
            // `publish_root` sets the version and dates.
            name,
            version: 0,
            generated: now,
            expires: now,
        },
        families: BTreeMap::new(),
        packages: BTreeMap::new(),
    }
}

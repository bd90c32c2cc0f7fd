//! Work on the whole root: reading it, publishing one generated whole,
//! checking every published file against it, and signing it as it is.

use super::error::missing;
use super::{PublishError, Publisher};
use crate::store::{Body, CacheControl, StoreError};
use kpack_repo_index::schema::RootIndex;
use kpack_repo_index::sign::sign_root;
use kpack_repo_index::types::{HashingReader, Sha256};
use kpack_sign::SecretKey;

impl Publisher {
    /// The current root index, if the repository has one.
    pub fn root_index(&self) -> Result<Option<RootIndex>, PublishError> {
        Ok(self.current()?.root)
    }

    /// Checks every published artifact against its shard and publishes a
    /// new root (a new version, fresh dates, signed): for operators who
    /// sync pools by other means. Published versions are immutable: bytes
    /// that changed at a published path are refused, naming the path.
    pub fn reindex(&self, key: Option<&SecretKey>) -> Result<RootIndex, PublishError> {
        let current = self.current()?;
        if current.root.is_none() {
            return Err(PublishError::NoIndex {
                location: self.store.location("index.toml"),
            });
        }
        self.commit(Some(current), key, |root| {
            for name in root.packages.keys() {
                let Some(shard) = self.shard(root, name)? else {
                    continue;
                };
                for artifact in shard.versions.iter().flat_map(|v| &v.artifacts) {
                    let key = artifact.path.as_str();
                    let (sha256, size) = self.hash_and_size(key)?;
                    if sha256 != artifact.sha256 || size != artifact.size {
                        return Err(PublishError::Immutable {
                            location: self.store.location(key),
                        });
                    }
                }
            }
            Ok(())
        })
    }

    /// The sha256 and size of what is at `key`, streamed; an error when
    /// absent.
    fn hash_and_size(&self, key: &str) -> Result<(Sha256, u64), PublishError> {
        let reader = self
            .store
            .reader(key)?
            .ok_or_else(|| StoreError::Io(missing(&self.store.location(key))))?;
        let mut reader = HashingReader::new(reader);
        std::io::copy(&mut reader, &mut std::io::sink())?;
        Ok(reader.finish())
    }

    /// Publishes `root` as the repository's next version, whatever the
    /// current root holds (for tools that generate a whole index).
    pub fn publish_root(
        &self,
        root: RootIndex,
        key: Option<&SecretKey>,
    ) -> Result<RootIndex, PublishError> {
        self.commit(None, key, |current| {
            *current = root.clone();
            Ok(())
        })
    }

    /// Signs the current root as it is (after an unsigned publish).
    pub fn sign(&self, key: &SecretKey) -> Result<(), PublishError> {
        let current = self
            .store
            .read("index.toml")?
            .ok_or_else(|| PublishError::NoIndex {
                location: self.store.location("index.toml"),
            })?;
        let text = String::from_utf8_lossy(&current.bytes);
        let root = RootIndex::parse("index.toml", &text)?;
        let signature = sign_root(key, &current.bytes)?;
        let claimed = RootIndex::versioned_key(root.repo.version);
        self.store.create(
            &claimed,
            Body::Bytes(&current.bytes),
            CacheControl::Immutable,
        )?;
        let copy = format!("{claimed}.minisig");
        self.store
            .put(&copy, signature.as_bytes(), CacheControl::NoCache)?;
        self.settle_signature()
    }
}

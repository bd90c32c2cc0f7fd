//! Writing a repository, to a directory or an S3-compatible bucket,
//! through one protocol that needs no lock and no rename (see
//! `docs/publishing.md`): artifacts and shards are written create-only,
//! then the new root's immutable copy `roots/<version>.toml` (and its
//! signature) claims the version, then `index.toml` is swapped in only if it
//! is still the root the change was made to, then its signature is written.
//! A publisher that loses the swap re-reads the root, applies its change
//! again and retries, so concurrent publishers never lose an update.

mod artifact;
mod error;
mod protocol;
mod root;
mod shard;
mod version;

use std::path::Path;

use crate::encode::TransportPolicy;
use crate::store::{S3Options, Store};
use kpack_repo_index::address::Address;

pub use error::{BadArtifact, PublishError};
pub use protocol::DEFAULT_VALIDITY_DAYS;
pub use version::{built_from, NewArtifact, NewVersion, Staged};

/// How a repository is opened for publishing.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    pub s3: S3Options,
    /// Probe that the store refuses a second create-only write before
    /// writing anything; off only for a store with a single publisher.
    pub check_conditional_writes: bool,
    /// When archives are published transport-encoded.
    pub transport: TransportPolicy,
}

impl Default for PublishOptions {
    fn default() -> Self {
        PublishOptions {
            s3: S3Options::default(),
            check_conditional_writes: true,
            transport: TransportPolicy::default(),
        }
    }
}

/// A repository open for publishing.
#[derive(Debug)]
pub struct Publisher {
    store: Store,
    transport: TransportPolicy,
}

impl Publisher {
    /// Opens (creating if needed) the repository directory `root`.
    pub fn open(root: &Path) -> Result<Publisher, PublishError> {
        Publisher::open_at(&Address::Dir(root.to_owned()), &PublishOptions::default())
    }

    /// Opens the repository at `location`; for a bucket, first checks that
    /// it honours conditional writes (unless `options` say not to).
    pub fn open_at(
        location: &Address,
        options: &PublishOptions,
    ) -> Result<Publisher, PublishError> {
        let store = Store::open(location, &options.s3)?;
        if options.check_conditional_writes {
            store.check_conditional_writes()?;
        }
        Ok(Publisher {
            store,
            transport: options.transport,
        })
    }

    /// The store, for readers of what was published.
    pub fn store(&self) -> &Store {
        &self.store
    }
}

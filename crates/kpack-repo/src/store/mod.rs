//! Where a repository is written: a local directory or an S3-compatible
//! bucket. Both offer the few operations publishing needs (create-only
//! writes, a compare-and-swap of one key, plain reads), so the publishing
//! protocol (`publish`) is written once for both.

mod dir;
mod s3;

use std::io::Read;
use std::path::Path;

use fs_err as fs;

use kpack_repo_index::address::{Address, Refusal};
use kpack_repo_index::types::Timestamp;

pub use dir::DirStore;
pub use s3::{S3Options, S3Store};

/// Why a store cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A directory store's file-system call failed; the error names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Write(#[from] kpack_fs::PathError),
    /// A bucket's request failed; the message is the store's own (its
    /// error code) and the cause underneath, without the client's context.
    #[error("{location}: {}", describe(error))]
    S3 {
        location: String,
        error: opendal::Error,
    },
    #[error("{url}: not a repository location: {refusal}")]
    BadLocation {
        url: String,
        #[source]
        refusal: Refusal,
    },
    #[error(
        "{location}: the store ignores conditional writes (a second create-only write of a \
         probe key succeeded), so concurrent publishers could lose updates; pass \
         --no-conditional-writes if this repository has a single publisher"
    )]
    NoConditionalWrites { location: String },
}

/// An S3 client error in a line: the store's message and error code (from
/// its XML answer) or the client's message, then the innermost cause
/// (`Connection refused`).
fn describe(error: &opendal::Error) -> String {
    let message = error.message();
    let field = |name: &str| {
        let start = message.find(&format!("{name}: \""))? + name.len() + 3;
        let end = message[start..].find('"')? + start;
        Some(&message[start..end])
    };
    let mut text = match (field("code"), field("message")) {
        (Some(code), Some(said)) if message.starts_with("S3Error") => format!("{said} ({code})"),
        _ => message.to_owned(),
    };
    let mut cause = std::error::Error::source(error);
    let mut innermost = None;
    while let Some(next) = cause {
        innermost = Some(next);
        cause = next.source();
    }
    if let Some(innermost) = innermost {
        text.push_str(&format!(": {innermost}"));
    }
    text
}

/// `text` as a place a store can be: a directory or `s3://bucket/prefix`,
/// parsed by [`Address::parse`]; an `http(s)://` URL is refused (never a
/// directory named after the scheme).
pub fn store_address(text: &str) -> Result<Address, StoreError> {
    let refused = |refusal| StoreError::BadLocation {
        url: text.to_owned(),
        refusal,
    };
    match Address::parse(text).map_err(|e| refused(e.refusal))? {
        Address::Http(_) => Err(refused(Refusal::HttpStore)),
        address => Ok(address),
    }
}

/// How long readers and CDNs may keep an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheControl {
    /// Pool files, shards and per-version roots: never change.
    Immutable,
    /// The root and its signature: change on every publish.
    NoCache,
}

impl CacheControl {
    /// The `Cache-Control` header for objects of this kind.
    pub fn header(self) -> &'static str {
        match self {
            CacheControl::Immutable => "public, max-age=31536000, immutable",
            CacheControl::NoCache => "no-cache",
        }
    }
}

/// What a compare-and-swap compares: the version of an object as read
/// (an ETag, or a directory file's sha256).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Etag(pub(crate) String);

/// An object's bytes and the version they are.
#[derive(Debug, Clone)]
pub struct Versioned {
    pub bytes: Vec<u8>,
    pub etag: Etag,
}

/// What a create-only write found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    Created,
    /// Something was already there; it was left as it is.
    Exists,
}

/// The bytes of a write: in memory, or a file streamed from disk.
#[derive(Debug, Clone, Copy)]
pub enum Body<'a> {
    Bytes(&'a [u8]),
    File(&'a Path),
}

/// An object of a store, as a listing gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObject {
    pub key: String,
    pub size: u64,
    /// When it was last written.
    pub modified: Timestamp,
}

/// A repository store.
#[derive(Debug)]
pub enum Store {
    Dir(DirStore),
    S3(Box<S3Store>),
}

impl Store {
    /// Opens the store at `location` (a directory is created if needed).
    pub fn open(location: &Address, options: &S3Options) -> Result<Store, StoreError> {
        match location {
            Address::Dir(path) => Ok(Store::Dir(DirStore::open(path)?)),
            Address::S3 { bucket, prefix } => {
                Ok(Store::S3(Box::new(S3Store::open(bucket, prefix, options)?)))
            }
            Address::Http(_) => Err(StoreError::BadLocation {
                url: location.to_string(),
                refusal: Refusal::HttpStore,
            }),
        }
    }

    /// Where `key` is, for messages.
    pub fn location(&self, key: &str) -> String {
        match self {
            Store::Dir(store) => store.path(key).display().to_string(),
            Store::S3(store) => store.url(key),
        }
    }

    /// The local directory, for a directory store.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            Store::Dir(store) => Some(store.root()),
            Store::S3(_) => None,
        }
    }

    /// The name of the place itself: a directory's own name, a bucket
    /// prefix's last segment (the bucket's name for its root).
    pub fn leaf_name(&self) -> Option<String> {
        match self {
            Store::Dir(store) => fs::canonicalize(store.root())
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
            Store::S3(store) => Some(store.leaf_name().to_owned()),
        }
    }

    /// The bytes of `key` and their version; `None` when absent.
    pub fn read(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        match self {
            Store::Dir(store) => store.read(key),
            Store::S3(store) => store.read(key),
        }
    }

    /// A reader of `key`, streamed (an artifact may be gigabytes); `None`
    /// when absent.
    pub fn reader(&self, key: &str) -> Result<Option<Box<dyn Read + '_>>, StoreError> {
        match self {
            Store::Dir(store) => store.reader(key),
            Store::S3(store) => store.reader(key),
        }
    }

    /// Writes `body` at `key` only if nothing is there yet.
    pub fn create(
        &self,
        key: &str,
        body: Body<'_>,
        cache: CacheControl,
    ) -> Result<Created, StoreError> {
        match self {
            Store::Dir(store) => store.create(key, body),
            Store::S3(store) => store.create(key, body, cache),
        }
    }

    /// The version `key` is at now; `None` when absent.
    pub fn etag(&self, key: &str) -> Result<Option<Etag>, StoreError> {
        match self {
            Store::Dir(store) => Ok(store.read(key)?.map(|read| read.etag)),
            Store::S3(store) => store.etag(key),
        }
    }

    /// Replaces `key` with `bytes` only if it is still at `expected` (absent
    /// for `None`): the new version, or `None`, and nothing written, when
    /// it is not.
    pub fn swap(
        &self,
        key: &str,
        bytes: &[u8],
        expected: Option<&Etag>,
        cache: CacheControl,
    ) -> Result<Option<Etag>, StoreError> {
        match self {
            Store::Dir(store) => store.swap(key, bytes, expected),
            Store::S3(store) => store.swap(key, bytes, expected, cache),
        }
    }

    /// Writes `bytes` at `key`, whatever is there.
    pub fn put(&self, key: &str, bytes: &[u8], cache: CacheControl) -> Result<(), StoreError> {
        match self {
            Store::Dir(store) => Ok(kpack_fs::write_atomic(&store.path(key), bytes)?),
            Store::S3(store) => store.put(key, bytes, cache),
        }
    }

    /// Removes `key`; nothing to do when it is absent.
    pub fn delete(&self, key: &str) -> Result<(), StoreError> {
        match self {
            Store::Dir(store) => store.delete(key),
            Store::S3(store) => store.delete(key),
        }
    }

    /// Every object whose key starts with `prefix` (a directory, ending in
    /// `/`), at any depth, sorted by key.
    pub fn list(&self, prefix: &str) -> Result<Vec<StoredObject>, StoreError> {
        let mut objects = match self {
            Store::Dir(store) => store.list(prefix)?,
            Store::S3(store) => store.list(prefix)?,
        };
        objects.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(objects)
    }

    /// Checks that the store refuses a second create-only write of one key;
    /// a directory always does.
    pub fn check_conditional_writes(&self) -> Result<(), StoreError> {
        match self {
            Store::Dir(_) => Ok(()),
            Store::S3(store) => store.check_conditional_writes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parsing is `Address::parse`'s; a store only refuses what it
    /// cannot write to.
    #[test]
    fn locations_are_directories_or_buckets_never_http() {
        assert_eq!(
            store_address("file:///srv/repo").unwrap(),
            Address::Dir("/srv/repo".into())
        );
        assert_eq!(
            store_address("s3://bucket/a/b/").unwrap().to_string(),
            "s3://bucket/a/b"
        );
        let error = store_address("https://host/r").unwrap_err().to_string();
        assert!(
            error.contains("an http(s):// URL; kpack-repo writes to"),
            "{error}"
        );
        let error = store_address("s3://b/../x").unwrap_err().to_string();
        assert!(error.contains(". or .. parts"), "{error}");
    }
}

//! A repository in a local directory: create-only writes by linking a
//! finished temporary file into place (never over another), and the
//! compare-and-swap of the root under a lock file held only for the swap.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use fs_err as fs;

use super::{Body, Created, Etag, StoreError, StoredObject, Versioned};
use kpack_repo_index::types::{Sha256, Timestamp};

/// A repository directory.
#[derive(Debug)]
pub struct DirStore {
    root: PathBuf,
}

impl DirStore {
    /// The directory `root`, made by the first write.
    pub fn open(root: &Path) -> Result<DirStore, StoreError> {
        Ok(DirStore {
            root: root.to_owned(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn path(&self, key: &str) -> PathBuf {
        self.root.join(key)
    }

    pub fn read(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        match fs::read(self.path(key)) {
            Ok(bytes) => {
                let etag = Etag(Sha256::of(&bytes).to_string());
                Ok(Some(Versioned { bytes, etag }))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    pub fn reader(&self, key: &str) -> Result<Option<Box<dyn Read + '_>>, StoreError> {
        match fs::File::open(self.path(key)) {
            Ok(file) => Ok(Some(Box::new(file))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    pub fn create(&self, key: &str, body: Body<'_>) -> Result<Created, StoreError> {
        let destination = self.path(key);
        if destination.exists() {
            return Ok(Created::Exists);
        }
        let mut file = kpack_fs::AtomicFile::create(&destination)?;
        match body {
            Body::Bytes(bytes) => file.write_all(bytes)?,
            Body::File(path) => {
                std::io::copy(&mut fs::File::open(path)?, &mut file)?;
            }
        }
        Ok(match file.commit_new()? {
            true => Created::Created,
            false => Created::Exists,
        })
    }

    pub fn swap(
        &self,
        key: &str,
        bytes: &[u8],
        expected: Option<&Etag>,
    ) -> Result<Option<Etag>, StoreError> {
        // Held only while the current version is compared and replaced;
        // publishers otherwise run side by side, as on object storage.
        fs::create_dir_all(&self.root)?;
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.root.join(".lock"))?;
        lock.lock()?;
        let current = self.read(key)?.map(|v| v.etag);
        if current.as_ref() != expected {
            return Ok(None);
        }
        kpack_fs::write_atomic(&self.path(key), bytes)?;
        Ok(Some(Etag(Sha256::of(bytes).to_string())))
    }

    /// The files under `prefix`, at any depth (symlinks are not followed).
    pub fn list(&self, prefix: &str) -> Result<Vec<StoredObject>, StoreError> {
        let mut objects = Vec::new();
        let mut pending = vec![prefix.trim_end_matches('/').to_owned()];
        while let Some(dir) = pending.pop() {
            let entries = match fs::read_dir(self.path(&dir)) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            for entry in entries {
                let entry = entry?;
                let key = format!("{dir}/{}", entry.file_name().to_string_lossy());
                let metadata = fs::symlink_metadata(entry.path())?;
                if metadata.is_dir() {
                    pending.push(key);
                } else if metadata.is_file() {
                    let modified = metadata.modified()?;
                    let modified = jiff::Timestamp::try_from(modified)
                        .map(Timestamp)
                        .unwrap_or_else(|_| Timestamp::now());
                    objects.push(StoredObject {
                        key,
                        size: metadata.len(),
                        modified,
                    });
                }
            }
        }
        Ok(objects)
    }

    pub fn delete(&self, key: &str) -> Result<(), StoreError> {
        match fs::remove_file(self.path(key)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swap_happens_only_from_the_version_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::open(dir.path()).unwrap();
        assert!(store.swap("index.toml", b"one", None).unwrap().is_some());
        assert!(store.swap("index.toml", b"two", None).unwrap().is_none());
        let read = store.read("index.toml").unwrap().unwrap();
        let swapped = store.swap("index.toml", b"two", Some(&read.etag)).unwrap();
        assert_eq!(swapped, store.read("index.toml").unwrap().map(|r| r.etag));
        let stale = store.swap("index.toml", b"three", Some(&read.etag));
        assert!(stale.unwrap().is_none());
        assert_eq!(store.read("index.toml").unwrap().unwrap().bytes, b"two");
    }

    #[test]
    fn a_create_leaves_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirStore::open(dir.path()).unwrap();
        let created = store.create("pool/p/1/a", Body::Bytes(b"a")).unwrap();
        assert_eq!(created, Created::Created);
        let again = store.create("pool/p/1/a", Body::Bytes(b"b")).unwrap();
        assert_eq!(again, Created::Exists);
        assert_eq!(store.read("pool/p/1/a").unwrap().unwrap().bytes, b"a");
    }
}

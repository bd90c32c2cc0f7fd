//! The content-addressed download cache, shared by every prefix: a verified
//! file is stored once under its sha256 and never downloaded again.
//!
//! ```text
//! blobs/<sha256>          complete and verified
//! partial/<sha256>        being downloaded (locked while in use)
//! partial/<sha256>.from   the URL and validator it came from, for resume
//! partial/<sha256>.decoded what a transport-encoded download decodes to so far
//! shards/<sha256>         small files read whole, checked at every read
//! ```

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use fs_err::File;

use crate::Sha256;

/// Where the cache lives.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
}

/// How much `clean` removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanReport {
    pub files: u64,
    pub bytes: u64,
}

impl Cache {
    pub fn new(root: &Path) -> Cache {
        Cache {
            root: root.to_owned(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What a transport-encoded download (served as `served`) decodes to
    /// while it arrives; rewritten by every attempt, from its first byte.
    pub fn decoded_partial(&self, served: &Sha256) -> PathBuf {
        self.root.join("partial").join(format!("{served}.decoded"))
    }

    /// Where a verified file with this hash lives.
    pub fn blob(&self, sha256: &Sha256) -> PathBuf {
        self.root.join("blobs").join(sha256.to_string())
    }

    /// Where a download in progress is kept.
    pub fn partial(&self, sha256: &Sha256) -> PathBuf {
        self.root.join("partial").join(sha256.to_string())
    }

    /// The resume record beside a partial download.
    pub fn partial_origin(&self, sha256: &Sha256) -> PathBuf {
        self.root.join("partial").join(format!("{sha256}.from"))
    }

    /// The bytes a partial download of `served` keeps for a resume (none
    /// without its resume record, which a resume needs).
    pub fn kept(&self, served: &Sha256) -> u64 {
        if !self.partial_origin(served).exists() {
            return 0;
        }
        fs_err::metadata(self.partial(served)).map_or(0, |m| m.len())
    }

    /// The verified file, if it is cached with the expected size. Files in
    /// the cache were hashed when they were stored; their size is checked
    /// again so a truncated file is never used.
    pub fn get(&self, sha256: &Sha256, size: u64) -> Option<PathBuf> {
        let path = self.blob(sha256);
        match fs_err::metadata(&path) {
            Ok(meta) if meta.is_file() && meta.len() == size => Some(path),
            _ => None,
        }
    }

    /// The cached file, if it is there and still hashes to `sha256`: files
    /// that were cached by an earlier run are checked again before use,
    /// since installed archives are links to them. A damaged one is
    /// removed, to be fetched again.
    pub fn get_verified(&self, sha256: &Sha256, size: u64) -> Option<PathBuf> {
        let path = self.get(sha256, size)?;
        match Sha256::of_file(&path) {
            Ok((actual, _)) if actual == *sha256 => Some(path),
            _ => {
                let _ = fs_err::remove_file(&path);
                None
            }
        }
    }

    /// Creates the cache's directories.
    pub fn create_dirs(&self) -> io::Result<()> {
        fs_err::create_dir_all(self.root.join("blobs"))?;
        fs_err::create_dir_all(self.root.join("partial"))
    }

    /// Opens (creating) the partial file for `sha256` and locks it, waiting
    /// for another process downloading the same file.
    pub fn open_partial(&self, sha256: &Sha256) -> io::Result<File> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.partial(sha256))?;
        file.lock()?;
        Ok(file)
    }

    /// Moves a verified (and synced) partial file into place, and syncs the
    /// directory so the new name survives a crash.
    pub fn commit(&self, sha256: &Sha256) -> io::Result<PathBuf> {
        let blob = self.blob(sha256);
        fs_err::rename(self.partial(sha256), &blob)?;
        kpack_fs::sync_dir(&self.root.join("blobs"))?;
        let _ = fs_err::remove_file(self.partial_origin(sha256));
        Ok(blob)
    }

    /// Moves what a verified (and synced) transport-encoded download
    /// decoded to into place under its own hash, and drops the download.
    pub fn commit_decoded(&self, served: &Sha256, decoded: &Sha256) -> io::Result<PathBuf> {
        let blob = self.blob(decoded);
        fs_err::rename(self.decoded_partial(served), &blob)?;
        kpack_fs::sync_dir(&self.root.join("blobs"))?;
        fs_err::remove_file(self.partial(served))?;
        let _ = fs_err::remove_file(self.partial_origin(served));
        Ok(blob)
    }

    /// Stores bytes already verified against `sha256` (a shard). They are
    /// checked again whenever [`shard`](Cache::shard) reads them, so they
    /// are not synced: a resolution fetching thousands of shards does not
    /// wait for the disk after each, and a crash costs a download. They
    /// live apart from `blobs/`, which [`get`](Cache::get) trusts by size.
    pub fn put_shard(&self, sha256: &Sha256, bytes: &[u8]) -> io::Result<()> {
        let mut file = kpack_fs::AtomicFile::create(&self.shard_path(sha256))?;
        file.write_all(bytes)?;
        file.commit_unsynced()?;
        Ok(())
    }

    /// The stored shard with this hash, if it is there and still hashes to
    /// it.
    pub fn shard(&self, sha256: &Sha256) -> Option<Vec<u8>> {
        fs_err::read(self.shard_path(sha256))
            .ok()
            .filter(|bytes| Sha256::of(bytes) == *sha256)
    }

    fn shard_path(&self, sha256: &Sha256) -> PathBuf {
        self.root.join("shards").join(sha256.to_string())
    }

    /// Empties the cache (files held open by a running download are
    /// removed too; that download finishes into a fresh directory).
    pub fn clean(&self) -> io::Result<CleanReport> {
        let mut report = CleanReport::default();
        for dir in ["blobs", "partial", "shards"] {
            let dir = self.root.join(dir);
            let entries = match fs_err::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for entry in entries {
                let entry = entry?;
                let meta = entry.metadata()?;
                if meta.is_file() {
                    fs_err::remove_file(entry.path())?;
                    report.files += 1;
                    report.bytes += meta.len();
                }
            }
        }
        Ok(report)
    }
}

//! Committing a staged change: a journal written atomically is the commit
//! point. Before it exists, a crash leaves the prefix as it was (the next
//! run deletes the staging directory); once it exists, the change is
//! decided, and whoever finds the journal (this run or the next) carries it
//! out to the end. Every step is idempotent, so a crash while carrying it
//! out is recovered the same way.
//!
//! ```text
//! .kpack/transaction.toml           the journal
//! .kpack/staging/<id>/root/...      the new files, at their final relative paths
//! .kpack/staging/<id>/installed.toml  the new record
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::stage::parent_dirs;
use super::InstallError;

/// The journal's format version.
const JOURNAL_FORMAT: u32 = 1;

/// What a committed change does to the prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    pub format: u32,
    /// Names the staging directory.
    pub id: String,
    /// Relative paths moved from the staging root into the prefix.
    #[serde(default)]
    pub moves: Vec<String>,
    /// Relative paths removed from the prefix (files and links).
    #[serde(default)]
    pub deletes: Vec<String>,
    /// Directories to remove when they end up empty, deepest first.
    #[serde(default)]
    pub prune: Vec<String>,
}

/// The paths of a prefix's bookkeeping.
#[derive(Debug, Clone)]
pub struct Layout {
    pub prefix: PathBuf,
}

impl Layout {
    pub fn meta(&self) -> PathBuf {
        self.prefix.join(".kpack")
    }
    pub fn journal(&self) -> PathBuf {
        self.meta().join("transaction.toml")
    }
    pub fn record(&self) -> PathBuf {
        self.meta().join("installed.toml")
    }
    pub fn lock(&self) -> PathBuf {
        self.meta().join(".lock")
    }
    pub fn staging_root(&self) -> PathBuf {
        self.meta().join("staging")
    }
    pub fn staging(&self, id: &str) -> PathBuf {
        self.staging_root().join(id)
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_owned(),
        source,
    }
}

impl Journal {
    pub fn new(id: String) -> Journal {
        Journal {
            format: JOURNAL_FORMAT,
            id,
            ..Journal::default()
        }
    }

    /// Makes the change decided: flushes the staged files to disk, then
    /// writes the journal through a synced temporary file and a rename.
    pub fn commit(&self, layout: &Layout) -> Result<(), InstallError> {
        let staging = layout.staging(&self.id);
        let staged_root = staging.join("root");
        if self.moves.len() > MANY_FILES {
            sync_filesystem(&staging)?;
        } else {
            let mut dirs = std::collections::BTreeSet::new();
            for relative in &self.moves {
                let path = staged_root.join(relative);
                let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
                if meta.is_file() {
                    // Cheap for archives linked from the cache: their bytes
                    // were flushed when they were downloaded.
                    sync_file(&path)?;
                }
                dirs.extend(
                    parent_dirs(relative)
                        .into_iter()
                        .map(|d| staged_root.join(d)),
                );
            }
            dirs.insert(staged_root);
            for name in ["installed.toml", "no-packages"] {
                let path = staging.join(name);
                if path.exists() {
                    sync_file(&path)?;
                }
            }
            dirs.insert(staging.clone());
            for dir in &dirs {
                sync_dir(dir)?;
            }
        }
        let text = toml::to_string(self).map_err(|e| InstallError::BadRecord {
            path: layout.journal(),
            message: e.to_string(),
        })?;
        let meta = layout.meta();
        // Written in the staging directory, which recovery deletes, so a
        // crash before the rename leaves no stray file in `.kpack/`.
        let mut temp = tempfile::NamedTempFile::new_in(&staging).map_err(io(&staging))?;
        std::io::Write::write_all(&mut temp, text.as_bytes()).map_err(io(&staging))?;
        temp.as_file().sync_all().map_err(io(&staging))?;
        let journal = layout.journal();
        temp.persist(&journal).map_err(|e| InstallError::Io {
            path: journal.clone(),
            source: e.error,
        })?;
        sync_dir(&meta)?;
        Ok(())
    }

    /// Carries out a committed change; safe to run again after a crash.
    pub fn apply(&self, layout: &Layout) -> Result<(), InstallError> {
        let staging = layout.staging(&self.id);
        let staged_root = staging.join("root");
        for relative in &self.deletes {
            let path = layout.prefix.join(relative);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(InstallError::Io { path, source }),
            }
        }
        for relative in &self.moves {
            let from = staged_root.join(relative);
            let to = layout.prefix.join(relative);
            if std::fs::symlink_metadata(&from).is_err() {
                // Moved before a crash.
                continue;
            }
            for dir in parent_dirs(relative) {
                let dir = layout.prefix.join(dir);
                match std::fs::create_dir(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(source) => return Err(InstallError::Io { path: dir, source }),
                }
            }
            std::fs::rename(&from, &to).map_err(io(&to))?;
        }
        for relative in &self.prune {
            // Only empty directories go; anything else is kept.
            let _ = std::fs::remove_dir(layout.prefix.join(relative));
        }
        let new_record = staging.join("installed.toml");
        let record = layout.record();
        if new_record.exists() {
            std::fs::rename(&new_record, &record).map_err(io(&record))?;
        } else if staging.join("no-packages").exists() {
            // The last package went: no record at all, as before any install.
            match std::fs::remove_file(&record) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(InstallError::Io {
                        path: record,
                        source,
                    })
                }
            }
        }
        // The renames must be on disk before the journal that would redo
        // them goes.
        if self.moves.len() > MANY_FILES {
            sync_filesystem(&layout.meta())?;
        } else {
            let mut dirs: std::collections::BTreeSet<PathBuf> = self
                .moves
                .iter()
                .chain(&self.deletes)
                .filter_map(|relative| layout.prefix.join(relative).parent().map(Path::to_owned))
                .collect();
            dirs.insert(layout.meta());
            for dir in &dirs {
                if dir.exists() {
                    sync_dir(dir)?;
                }
            }
        }
        let journal = layout.journal();
        std::fs::remove_file(&journal).map_err(io(&journal))?;
        std::fs::remove_dir_all(&staging).map_err(io(&staging))?;
        // Left only while a change is under way.
        let _ = std::fs::remove_dir(layout.staging_root());
        Ok(())
    }

    /// Reads the journal left in a prefix, if any.
    pub fn load(layout: &Layout) -> Result<Option<Journal>, InstallError> {
        let path = layout.journal();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(InstallError::Io { path, source }),
        };
        let journal: Journal = toml::from_str(&text).map_err(|e| InstallError::BadRecord {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if journal.format != JOURNAL_FORMAT {
            return Err(InstallError::BadRecord {
                path,
                message: format!("journal format {} is not understood", journal.format),
            });
        }
        if journal.id.contains('/') || journal.id.starts_with('.') || journal.id.is_empty() {
            return Err(InstallError::BadRecord {
                path,
                message: format!("bad transaction id {:?}", journal.id),
            });
        }
        Ok(Some(journal))
    }
}

/// Above this many files, one flush of the whole file system beats a flush
/// per file (it also flushes other programs' writes, so it is not the
/// default).
const MANY_FILES: usize = 512;

fn sync_file(path: &Path) -> Result<(), InstallError> {
    std::fs::File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(io(path))
}

/// Flushes the file system holding `path` (one call instead of a sync per
/// staged file).
fn sync_filesystem(path: &Path) -> Result<(), InstallError> {
    let file = std::fs::File::open(path).map_err(io(path))?;
    // SAFETY: syncfs takes a valid open file descriptor and nothing else.
    let result = unsafe { libc::syncfs(std::os::unix::io::AsRawFd::as_raw_fd(&file)) };
    if result != 0 {
        return Err(InstallError::Io {
            path: path.to_owned(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

fn sync_dir(path: &Path) -> Result<(), InstallError> {
    std::fs::File::open(path)
        .and_then(|dir| dir.sync_all())
        .map_err(io(path))
}

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

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use kpack_repo_index::RelativePath;
use serde::{Deserialize, Serialize};

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
    pub moves: Vec<RelativePath>,
    /// Relative paths removed from the prefix (files and links).
    #[serde(default)]
    pub deletes: Vec<RelativePath>,
    /// Directories to remove when they end up empty, deepest first.
    #[serde(default)]
    pub prune: Vec<RelativePath>,
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
            let mut dirs = BTreeSet::new();
            for relative in &self.moves {
                let path = staged_root.join(relative.as_str());
                if fs_err::symlink_metadata(&path)?.is_file() {
                    // Cheap for archives linked from the cache: their bytes
                    // were flushed when they were downloaded.
                    sync_file(&path)?;
                }
                dirs.extend(
                    relative
                        .parents()
                        .into_iter()
                        .map(|d| staged_root.join(d.as_str())),
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
        // The temporary file is in the staging directory, which recovery
        // deletes, so a crash before the rename leaves no stray file in
        // `.kpack/`.
        let mut journal = kpack_fs::AtomicFile::create_in(&layout.journal(), &staging)?;
        journal.write_all(text.as_bytes())?;
        Ok(journal.commit()?)
    }

    /// Carries out a committed change; safe to run again after a crash.
    pub fn apply(&self, layout: &Layout) -> Result<(), InstallError> {
        let staging = layout.staging(&self.id);
        let staged_root = staging.join("root");
        for relative in &self.deletes {
            remove_if_there(&layout.prefix.join(relative.as_str()))?;
        }
        for relative in &self.moves {
            let from = staged_root.join(relative.as_str());
            if fs_err::symlink_metadata(&from).is_err() {
                // Moved before a crash.
                continue;
            }
            for dir in relative.parents() {
                match fs_err::create_dir(layout.prefix.join(dir.as_str())) {
                    Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e.into()),
                    _ => {}
                }
            }
            fs_err::rename(&from, layout.prefix.join(relative.as_str()))?;
        }
        for relative in &self.prune {
            // Only empty directories go; anything else is kept.
            let _ = fs_err::remove_dir(layout.prefix.join(relative.as_str()));
        }
        let new_record = staging.join("installed.toml");
        if new_record.exists() {
            fs_err::rename(&new_record, layout.record())?;
        } else if staging.join("no-packages").exists() {
            // The last package went: no record at all, as before any install.
            remove_if_there(&layout.record())?;
        }
        // The renames must be on disk before the journal that would redo
        // them goes.
        if self.moves.len() > MANY_FILES {
            sync_filesystem(&layout.meta())?;
        } else {
            let mut dirs: BTreeSet<PathBuf> = self
                .moves
                .iter()
                .chain(&self.deletes)
                .filter_map(|relative| {
                    layout
                        .prefix
                        .join(relative.as_str())
                        .parent()
                        .map(Path::to_owned)
                })
                .collect();
            dirs.insert(layout.meta());
            for dir in &dirs {
                if dir.exists() {
                    sync_dir(dir)?;
                }
            }
        }
        fs_err::remove_file(layout.journal())?;
        fs_err::remove_dir_all(&staging)?;
        // Left only while a change is under way.
        let _ = fs_err::remove_dir(layout.staging_root());
        Ok(())
    }

    /// Reads the journal left in a prefix, if any.
    pub fn load(layout: &Layout) -> Result<Option<Journal>, InstallError> {
        let path = layout.journal();
        let text = match fs_err::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error.into()),
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
    Ok(fs_err::File::open(path)?.sync_all()?)
}

/// Removes a file or link; one already gone is fine.
fn remove_if_there(path: &Path) -> Result<(), InstallError> {
    match fs_err::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// Flushes the file system holding `path` (one call instead of a sync per
/// staged file).
fn sync_filesystem(path: &Path) -> Result<(), InstallError> {
    let file = fs_err::File::open(path)?;
    // SAFETY: syncfs takes a valid open file descriptor and nothing else.
    let result = unsafe { libc::syncfs(std::os::unix::io::AsRawFd::as_raw_fd(file.file())) };
    if result != 0 {
        let error = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            error.kind(),
            format!(
                "cannot flush the file system of {}: {error}",
                path.display()
            ),
        )
        .into());
    }
    Ok(())
}

fn sync_dir(path: &Path) -> Result<(), InstallError> {
    Ok(kpack_fs::sync_dir(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_naming_a_path_outside_the_prefix_is_refused_not_carried_out() {
        let prefix = tempfile::tempdir().unwrap();
        let layout = Layout {
            prefix: prefix.path().to_owned(),
        };
        fs_err::create_dir_all(layout.meta()).unwrap();
        fs_err::write(
            layout.journal(),
            "format = 1\nid = \"1-2\"\ndeletes = [\"../../etc/passwd\"]\n",
        )
        .unwrap();
        let error = Journal::load(&layout).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, InstallError::BadRecord { .. }) && message.contains("../../etc/passwd"),
            "{message}"
        );
    }
}

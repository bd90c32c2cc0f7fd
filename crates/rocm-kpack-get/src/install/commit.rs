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
//! .kpack/trash-<id>/                a staging directory that could not be
//!                                   removed, moved aside; emptied later
//! ```

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use kpack_fs::confined::{ConfinedDir, ConfinedError, EntryKind};
use kpack_repo_index::RelativePath;
use serde::{Deserialize, Serialize};

use super::InstallError;
use rocm_kpack::format::KPACK_DIR;

/// The journal's format version.
const JOURNAL_FORMAT: u32 = 1;

/// What a committed change does to the prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Journal {
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
    /// Directories the change turns into files or links, deepest first:
    /// emptied by `deletes` and removed before the moves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clear: Vec<RelativePath>,
}

/// The paths of a prefix's bookkeeping, opened through handles that never
/// follow a link inside the prefix.
#[derive(Debug, Clone)]
pub(crate) struct PrefixPaths {
    pub prefix: PathBuf,
}

/// Where a change is staged, below `.kpack/`.
fn staging_dir(id: &str) -> PathBuf {
    Path::new(STAGING).join(id)
}

/// `.kpack/staging`: where changes are staged.
pub(crate) const STAGING: &str = "staging";
/// `.kpack/trash-<id>`: a staging directory that could not be removed,
/// moved aside so that the prefix goes on; emptied by a later run.
pub const TRASH: &str = "trash-";
/// `.kpack/transaction.toml`: the journal.
pub const JOURNAL: &str = "transaction.toml";
/// `.kpack/installed.toml`: the install record.
pub const RECORD: &str = "installed.toml";
/// `.kpack/.lock`: the prefix's lock.
pub(crate) const LOCK: &str = ".lock";
/// In a staging directory: the new record, or this when none remains.
const NO_PACKAGES: &str = "no-packages";

impl PrefixPaths {
    /// The prefix.
    pub(crate) fn root(&self) -> Result<ConfinedDir, InstallError> {
        Ok(ConfinedDir::open(&self.prefix)?)
    }

    /// `.kpack/`, which must be a real directory.
    pub(crate) fn meta(&self, root: &ConfinedDir) -> Result<ConfinedDir, InstallError> {
        Ok(root.open_dir(Path::new(KPACK_DIR))?)
    }

    /// `.kpack/`, or `None` when there is no prefix or no `.kpack/` yet.
    pub(crate) fn existing_meta(&self) -> Result<Option<ConfinedDir>, InstallError> {
        let root = match ConfinedDir::open(&self.prefix) {
            Err(error) if error.is_not_found() => return Ok(None),
            root => root?,
        };
        match root.open_dir(Path::new(KPACK_DIR)) {
            Err(error) if error.is_not_found() => Ok(None),
            meta => Ok(Some(meta?)),
        }
    }

    pub(crate) fn meta_path(&self) -> PathBuf {
        self.prefix.join(KPACK_DIR)
    }
    pub(crate) fn journal(&self) -> PathBuf {
        self.meta_path().join(JOURNAL)
    }
    pub(crate) fn record(&self) -> PathBuf {
        self.meta_path().join(RECORD)
    }
    pub(crate) fn lock(&self) -> PathBuf {
        self.meta_path().join(LOCK)
    }
}

/// The text of the bookkeeping file `name` in `meta`; `None` when absent.
pub(crate) fn read_bookkeeping(
    meta: &ConfinedDir,
    name: &str,
) -> Result<Option<String>, InstallError> {
    let mut file = match meta.open_file(Path::new(name)) {
        Err(error) if error.is_not_found() => return Ok(None),
        file => file?,
    };
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(|source| {
        InstallError::Io(std::io::Error::new(
            source.kind(),
            format!("{}: {source}", meta.display_path(Path::new(name)).display()),
        ))
    })?;
    Ok(Some(text))
}

/// The staging directory of a change, opened.
pub(crate) fn open_staging(meta: &ConfinedDir, id: &str) -> Result<ConfinedDir, InstallError> {
    Ok(meta.open_dir(&staging_dir(id))?)
}

/// Makes the staging directory of a change (and `staging/` itself).
pub(crate) fn create_staging(meta: &ConfinedDir, id: &str) -> Result<ConfinedDir, InstallError> {
    Ok(meta.create_dir_all(&staging_dir(id))?)
}

/// Writes the new record (or the note that none remains) beside a change's
/// staged files.
pub(crate) fn stage_record(staging: &ConfinedDir, text: Option<&str>) -> Result<(), InstallError> {
    let (name, bytes) = match text {
        Some(text) => (RECORD, text.as_bytes()),
        None => (NO_PACKAGES, &b""[..]),
    };
    let mut file = staging.create_file(Path::new(name), 0o644)?;
    file.write_all(bytes)
        .map_err(|source| InstallError::Write {
            path: staging.display_path(Path::new(name)),
            source,
        })?;
    Ok(())
}

impl Journal {
    pub(crate) fn new(id: String) -> Journal {
        Journal {
            format: JOURNAL_FORMAT,
            id,
            ..Journal::default()
        }
    }

    /// Makes the change decided: flushes the staged files to disk, then
    /// writes the journal through a synced temporary file and a rename.
    pub(crate) fn commit(&self, paths: &PrefixPaths) -> Result<(), InstallError> {
        let root = paths.root()?;
        let meta = paths.meta(&root)?;
        let staging = open_staging(&meta, &self.id)?;
        if self.moves.len() > MANY_FILES {
            root.sync_filesystem()?;
        } else {
            self.sync_staged(&staging)?;
        }
        let text = toml::to_string(self).map_err(|e| InstallError::BadRecord {
            path: paths.journal(),
            message: e.to_string(),
        })?;
        // Written in the staging directory, which recovery deletes, so a
        // crash before the rename leaves no stray file in `.kpack/`.
        let temporary = Path::new(".journal");
        staging.remove_all(temporary)?;
        let mut file = staging.create_file(temporary, 0o644)?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|source| InstallError::Write {
                path: paths.journal(),
                source,
            })?;
        staging.rename(temporary, &meta, Path::new(JOURNAL))?;
        meta.sync()?;
        Ok(())
    }

    /// Flushes every staged file and the directories holding them.
    fn sync_staged(&self, staging: &ConfinedDir) -> Result<(), InstallError> {
        let staged_root = staging.open_dir(Path::new("root"))?;
        let mut dirs = BTreeSet::new();
        for relative in &self.moves {
            let path = Path::new(relative.as_str());
            if let Some(EntryKind::File { .. }) = staged_root.entry(path)? {
                // Cheap for archives linked from the cache: their bytes
                // were flushed when they were downloaded.
                sync_file(&staged_root, path)?;
            }
            dirs.extend(relative.parents());
        }
        for dir in &dirs {
            staged_root.open_dir(Path::new(dir.as_str()))?.sync()?;
        }
        staged_root.sync()?;
        for name in [RECORD, NO_PACKAGES] {
            if staging.entry(Path::new(name))?.is_some() {
                sync_file(staging, Path::new(name))?;
            }
        }
        Ok(staging.sync()?)
    }

    /// Carries out a committed change; safe to run again after a crash.
    /// Every path is resolved beneath the prefix without following links:
    /// a file the record names that is now reached through a link or a
    /// file is not there to remove.
    pub(crate) fn apply(&self, paths: &PrefixPaths) -> Result<(), InstallError> {
        let root = paths.root()?;
        let meta = paths.meta(&root)?;
        let staging = open_staging(&meta, &self.id)?;
        let staged_root = staging.open_dir(Path::new("root"))?;
        for relative in &self.deletes {
            remove_if_there(&root, Path::new(relative.as_str()))?;
        }
        for relative in &self.clear {
            remove_dir_if_there(&root, Path::new(relative.as_str()))?;
        }
        for relative in &self.moves {
            let path = Path::new(relative.as_str());
            if staged_root.entry(path)?.is_none() {
                // Moved before a crash.
                continue;
            }
            if let Some(parent) = relative.parents().pop() {
                root.create_dir_all(Path::new(parent.as_str()))?;
            }
            staged_root.rename(path, &root, path)?;
        }
        for relative in &self.prune {
            // Only empty directories go; anything else is kept.
            let _ = root.remove_dir(Path::new(relative.as_str()));
        }
        if staging.entry(Path::new(RECORD))?.is_some() {
            staging.rename(Path::new(RECORD), &meta, Path::new(RECORD))?;
        } else if staging.entry(Path::new(NO_PACKAGES))?.is_some() {
            // The last package went: no record at all, as before any install.
            remove_if_there(&meta, Path::new(RECORD))?;
        }
        // The renames must be on disk before the journal that would redo
        // them goes.
        if self.moves.len() > MANY_FILES {
            root.sync_filesystem()?;
        } else {
            self.sync_applied(&root)?;
        }
        meta.sync()?;
        meta.remove_file(Path::new(JOURNAL))?;
        if let Ok(staging) = meta.open_dir(Path::new(STAGING)) {
            // The change is complete: what cannot be removed of its
            // staging is moved aside, for a later run to empty.
            discard_staging(&meta, &staging, OsStr::new(&self.id))?;
        }
        // Left only while a change is under way.
        let _ = meta.remove_dir(Path::new(STAGING));
        Ok(())
    }

    /// Flushes the directories the change renamed into or removed from.
    fn sync_applied(&self, root: &ConfinedDir) -> Result<(), InstallError> {
        let dirs: BTreeSet<RelativePath> = self
            .moves
            .iter()
            .chain(&self.deletes)
            .filter_map(|relative| relative.parents().pop())
            .collect();
        for dir in &dirs {
            // A directory that was pruned, or is not the prefix's own, is
            // not flushed.
            if let Ok(dir) = root.open_dir(Path::new(dir.as_str())) {
                dir.sync()?;
            }
        }
        Ok(root.sync()?)
    }

    /// Every path the change moves, deletes or clears.
    pub(crate) fn named_paths(&self) -> BTreeSet<RelativePath> {
        self.moves
            .iter()
            .chain(&self.deletes)
            .chain(&self.clear)
            .cloned()
            .collect()
    }

    /// Reads the journal left in a prefix, if any.
    pub(crate) fn load(paths: &PrefixPaths) -> Result<Option<Journal>, InstallError> {
        let path = paths.journal();
        let Some(meta) = paths.existing_meta()? else {
            return Ok(None);
        };
        let Some(text) = read_bookkeeping(&meta, JOURNAL)? else {
            return Ok(None);
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

/// Removes the staging directory `name` in `staging` (in `meta`); one
/// that cannot be removed is moved aside to `.kpack/trash-<name>`, and why
/// it could not be removed is returned. Only when it can be neither is it
/// an error.
pub(crate) fn discard_staging(
    meta: &ConfinedDir,
    staging: &ConfinedDir,
    name: &OsStr,
) -> Result<Option<ConfinedError>, InstallError> {
    let error = match staging.remove_all(Path::new(name)) {
        Ok(()) => return Ok(None),
        Err(error) => error,
    };
    let mut aside = OsString::from(TRASH);
    aside.push(name);
    let mut free = aside.clone();
    for n in 1.. {
        if meta.entry(Path::new(&free))?.is_none() {
            break;
        }
        free = aside.clone();
        free.push(format!("-{n}"));
    }
    let from = Path::new(STAGING).join(name);
    meta.rename(&from, meta, Path::new(&free))?;
    Ok(Some(error))
}

/// Removes what earlier runs moved aside (`.kpack/trash-*`), as far as it
/// can be removed now; what still cannot be stays for a later run.
pub(crate) fn empty_trash(meta: &ConfinedDir) -> Result<(), InstallError> {
    for name in meta.names()? {
        let is_trash = name.as_bytes().starts_with(TRASH.as_bytes())
            && meta.entry(Path::new(&name))? == Some(EntryKind::Dir);
        if is_trash {
            let _ = meta.remove_all(Path::new(&name));
        }
    }
    Ok(())
}

/// Above this many files, one flush of the whole file system beats a flush
/// per file (it also flushes other programs' writes, so it is not the
/// default).
const MANY_FILES: usize = 512;

fn sync_file(dir: &ConfinedDir, path: &Path) -> Result<(), InstallError> {
    dir.open_file(path)?
        .sync_all()
        .map_err(|source| InstallError::Write {
            path: dir.display_path(path),
            source,
        })
}

/// Removes a file or link; one already gone, or not reached through
/// directories only, is not there.
fn remove_if_there(dir: &ConfinedDir, path: &Path) -> Result<(), InstallError> {
    match dir.remove_file(path) {
        Ok(()) => Ok(()),
        Err(ConfinedError::NotBeneath { .. }) => Ok(()),
        Err(error)
            if matches!(
                error.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::IsADirectory
            ) =>
        {
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}

/// Removes an empty directory; one already gone, replaced by what the
/// change moved there, or not reached through directories only, is not
/// there.
fn remove_dir_if_there(dir: &ConfinedDir, path: &Path) -> Result<(), InstallError> {
    match dir.remove_dir(path) {
        Ok(()) => Ok(()),
        Err(ConfinedError::NotBeneath { .. }) => Ok(()),
        Err(error)
            if matches!(
                error.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_journal_naming_a_path_outside_the_prefix_is_refused_not_carried_out() {
        let prefix = tempfile::tempdir().unwrap();
        let paths = PrefixPaths {
            prefix: prefix.path().to_owned(),
        };
        fs_err::create_dir_all(paths.meta_path()).unwrap();
        fs_err::write(
            paths.journal(),
            "format = 1\nid = \"1-2\"\ndeletes = [\"../../etc/passwd\"]\n",
        )
        .unwrap();
        let error = Journal::load(&paths).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, InstallError::BadRecord { .. }) && message.contains("../../etc/passwd"),
            "{message}"
        );
    }
}

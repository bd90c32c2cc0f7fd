//! Renames that would cross file systems, found before the commit point: a
//! change is staged in `.kpack/staging` and carried out by renames, which
//! cannot cross a mount. A destination on another file system than staging
//! (a directory of the prefix that is a mount point) refuses the change
//! before its journal is written, naming the mount, instead of a committed
//! change failing with `EXDEV` at every later run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_fs::confined::{ConfinedDir, ConfinedError};
use kpack_repo_index::RelativePath;

use super::InstallError;
use rocm_kpack::format::KPACK_DIR;

/// The file systems of a prefix's directories, as a change finds them.
#[derive(Debug)]
pub struct Devices<'a> {
    root: &'a ConfinedDir,
    /// Where the change is staged.
    staging: u64,
    /// The prefix's staging directory, for messages.
    staging_shown: PathBuf,
    /// Each directory looked at (`""` is the prefix): its file system, or
    /// `None` when it does not exist yet.
    seen: BTreeMap<String, Option<u64>>,
}

impl<'a> Devices<'a> {
    pub fn new(root: &'a ConfinedDir, staging: &ConfinedDir) -> Result<Devices<'a>, InstallError> {
        Ok(Devices {
            root,
            staging: staging.mount()?,
            staging_shown: root.path().join(KPACK_DIR).join(super::commit::STAGING),
            seen: BTreeMap::new(),
        })
    }

    /// Refuses a change whose moves would cross into another file system
    /// or whose deletes would remove a mount point.
    pub fn check(
        &mut self,
        moves: &[RelativePath],
        deletes: &[RelativePath],
    ) -> Result<(), InstallError> {
        for path in moves {
            self.check_move(path)?;
        }
        for path in deletes {
            self.check_delete(path)?;
        }
        Ok(())
    }

    /// The directories on the way to `path` that exist, and what is at it,
    /// must be on staging's file system.
    fn check_move(&mut self, path: &RelativePath) -> Result<(), InstallError> {
        let mut dirs = vec![String::new()];
        dirs.extend(path.parents().iter().map(|dir| dir.as_str().to_owned()));
        for dir in dirs {
            match self.device(&dir)? {
                // Made by the change, on its parent's file system.
                None => return Ok(()),
                Some(dev) if dev != self.staging => return Err(self.crossing(path, &dir)),
                Some(_) => {}
            }
        }
        match self.root.mount_of(Path::new(path.as_str())) {
            Ok(Some(dev)) if dev != self.staging => Err(self.crossing(path, path.as_str())),
            // Beneath a file or link the change replaces with a directory.
            Ok(_) | Err(ConfinedError::NotBeneath { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// A file to delete must not be a mount point (a file mounted over).
    fn check_delete(&mut self, path: &RelativePath) -> Result<(), InstallError> {
        let parent = path
            .parents()
            .pop()
            .map_or(String::new(), |dir| dir.as_str().to_owned());
        let Some(parent_dev) = self.device(&parent)? else {
            return Ok(());
        };
        match self.root.mount_of(Path::new(path.as_str())) {
            Ok(Some(dev)) if dev != parent_dev => Err(InstallError::MountPoint {
                path: path.clone(),
                mount: self.root.display_path(Path::new(path.as_str())),
            }),
            // Gone already, or not reached through directories: the
            // journal's delete passes over it.
            _ => Ok(()),
        }
    }

    /// The file system of the directory `dir` (`""`: the prefix).
    fn device(&mut self, dir: &str) -> Result<Option<u64>, InstallError> {
        if let Some(dev) = self.seen.get(dir) {
            return Ok(*dev);
        }
        let dev = if dir.is_empty() {
            Some(self.root.mount()?)
        } else {
            match self.root.mount_of(Path::new(dir)) {
                Ok(dev) => dev,
                // Through a link or a file: the change's own check judges it.
                Err(ConfinedError::NotBeneath { .. }) => None,
                Err(error) => return Err(error.into()),
            }
        };
        self.seen.insert(dir.to_owned(), dev);
        Ok(dev)
    }

    /// The refusal of `path`, whose way passes `at`, on another file
    /// system than staging: the mount named is the first directory on the
    /// way (the prefix itself when staging is the one mounted elsewhere).
    fn crossing(&self, path: &RelativePath, at: &str) -> InstallError {
        let mount = match at {
            "" => self.root.path().to_owned(),
            at => self.root.display_path(Path::new(at)),
        };
        InstallError::OtherFileSystem {
            path: path.clone(),
            mount,
            staging: self.staging_shown.clone(),
        }
    }
}

//! Removing a tree beneath a [`ConfinedDir`] however deep it is: an
//! explicit stack of names and identities instead of recursion, one
//! directory handle open below the start whatever the depth, and a path
//! built only for an error message.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::{ConfinedDir, ConfinedError};

/// A directory on the way down: its name in its parent and who it is, so
/// that reached again through `..` from below it is known to be the same,
/// and the mount it is on.
struct Level {
    name: OsString,
    dev: u64,
    ino: u64,
    mount: u64,
}

/// Removes the directory `name` in `start` and everything beneath it. A
/// link is removed as the link it is; a mount point (another file system,
/// or a bind mount of this one) is not entered: the removal stops there
/// with [`ConfinedError::OtherFileSystem`].
pub(super) fn remove_tree(start: &ConfinedDir, name: &OsStr) -> Result<(), ConfinedError> {
    let mut walk = Walk {
        start,
        stack: Vec::new(),
    };
    let mount = super::mount_of(start.fd.as_fd(), OsStr::new(""))
        .map_err(|e| walk.io("read the metadata of", None, e))?;
    let mut dir = walk.enter(start.fd.as_fd(), mount, name)?;
    loop {
        match walk.clear_files(&dir)? {
            Some(child) => {
                let mount = walk.stack.last().map_or(mount, |level| level.mount);
                dir = walk.enter(dir.as_fd(), mount, &child)?;
            }
            None => match walk.leave(dir)? {
                Some(up) => dir = up,
                None => return Ok(()),
            },
        }
    }
}

/// Where a removal is: the directory it started in and the names below.
struct Walk<'a> {
    start: &'a ConfinedDir,
    stack: Vec<Level>,
}

impl Walk<'_> {
    /// The path of the directory on top of the stack (and `last` in it),
    /// for a message.
    fn shown(&self, last: Option<&OsStr>) -> PathBuf {
        let mut path = self.start.path.clone();
        path.extend(self.stack.iter().map(|level| Path::new(&level.name)));
        path.extend(last.map(Path::new));
        path
    }

    fn io(&self, op: &'static str, last: Option<&OsStr>, errno: Errno) -> ConfinedError {
        ConfinedError::Io {
            op,
            path: self.shown(last),
            source: errno.into(),
        }
    }

    fn stat(
        &self,
        fd: BorrowedFd<'_>,
        last: Option<&OsStr>,
    ) -> Result<rustix::fs::Stat, ConfinedError> {
        rustix::fs::fstat(fd).map_err(|e| self.io("read the metadata of", last, e))
    }

    /// Opens the directory `name` in `dir` (on the mount `mount`) and goes
    /// down into it.
    fn enter(
        &mut self,
        dir: BorrowedFd<'_>,
        mount: u64,
        name: &OsStr,
    ) -> Result<OwnedFd, ConfinedError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let child = rustix::fs::openat(dir, name, flags, Mode::empty())
            .map_err(|e| self.io("open the directory", Some(name), e))?;
        let stat = self.stat(child.as_fd(), Some(name))?;
        let on = super::mount_of(child.as_fd(), OsStr::new(""))
            .map_err(|e| self.io("read the metadata of", Some(name), e))?;
        if on != mount {
            return Err(ConfinedError::OtherFileSystem {
                path: self.shown(Some(name)),
            });
        }
        self.stack.push(Level {
            name: name.to_owned(),
            dev: stat.st_dev,
            ino: stat.st_ino,
            mount: on,
        });
        Ok(child)
    }

    /// Removes `dir`, the empty directory on top of the stack, and returns
    /// its parent to go on with; `None` once the tree is gone.
    fn leave(&mut self, dir: OwnedFd) -> Result<Option<OwnedFd>, ConfinedError> {
        let Some(done) = self.stack.pop() else {
            return Ok(None);
        };
        let up = match self.stack.last() {
            None => self.start.reopen()?.fd,
            Some(level) => {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let up = rustix::fs::openat(&dir, "..", flags, Mode::empty())
                    .map_err(|e| self.io("open the directory", None, e))?;
                let stat = self.stat(up.as_fd(), None)?;
                if (stat.st_dev, stat.st_ino) != (level.dev, level.ino) {
                    return Err(ConfinedError::Io {
                        op: "remove",
                        path: self.shown(None),
                        source: std::io::Error::other("it was moved while it was being removed"),
                    });
                }
                up
            }
        };
        drop(dir);
        rustix::fs::unlinkat(&up, &done.name, AtFlags::REMOVEDIR)
            .map_err(|e| self.io("remove the directory", Some(&done.name), e))?;
        Ok((!self.stack.is_empty()).then_some(up))
    }

    /// Removes every file and link in `dir`; the first directory found is
    /// returned to go down into, `None` when `dir` is left empty.
    fn clear_files(&self, dir: &OwnedFd) -> Result<Option<OsString>, ConfinedError> {
        let mut reader = rustix::fs::Dir::read_from(dir).map_err(|e| self.io("list", None, e))?;
        while let Some(entry) = reader.read() {
            let entry = entry.map_err(|e| self.io("list", None, e))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsStr::from_bytes(name);
            let kind = match entry.file_type() {
                FileType::Unknown => {
                    let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                        .map_err(|e| self.io("read the metadata of", Some(name), e))?;
                    FileType::from_raw_mode(stat.st_mode)
                }
                kind => kind,
            };
            if kind == FileType::Directory {
                return Ok(Some(name.to_owned()));
            }
            match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(errno) => return Err(self.io("remove", Some(name), errno)),
            }
        }
        Ok(None)
    }
}

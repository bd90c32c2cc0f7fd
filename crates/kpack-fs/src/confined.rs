//! A directory that paths are resolved beneath and never through a
//! symbolic link: what an installer running as root needs to hold a prefix
//! against the packages it installs.
//!
//! Every path given to a [`ConfinedDir`] is relative and made of plain
//! components. The kernel resolves it from the directory's handle with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, so a link anywhere on
//! the way, or a file where a directory should be, stops the operation
//! instead of leading it elsewhere, whatever the link's text says and
//! however links chain. Where the kernel lacks `openat2` (before Linux
//! 5.6), the same rule is kept by a walk from handle to handle with
//! `O_NOFOLLOW`. The last component is never followed either: a link there
//! is removed, renamed or read as the link it is.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, StatxFlags};

use crate::RelativePath;

mod remove;

/// Why an operation beneath a [`ConfinedDir`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfinedError {
    /// The path passes through a symbolic link or a file: nothing is read
    /// or written through it.
    #[error("{}: reached through a symbolic link or a file, not through directories only", path.display())]
    NotBeneath { path: PathBuf },
    /// The path is not relative, or has `.`, `..` or empty components.
    #[error("{}: not a plain relative path", path.display())]
    BadPath { path: PathBuf },
    /// A directory to remove is a mount point: it is not entered.
    #[error("{}: a mount point; nothing is removed across it", path.display())]
    OtherFileSystem { path: PathBuf },
    #[error("cannot {op} {}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl ConfinedError {
    /// The I/O error's kind; `NotBeneath` reads as "not a directory".
    pub fn kind(&self) -> io::ErrorKind {
        match self {
            ConfinedError::NotBeneath { .. } => io::ErrorKind::NotADirectory,
            ConfinedError::BadPath { .. } => io::ErrorKind::InvalidInput,
            ConfinedError::OtherFileSystem { .. } => io::ErrorKind::CrossesDevices,
            ConfinedError::Io { source, .. } => source.kind(),
        }
    }

    /// Whether nothing is at the path (a missing file or directory).
    pub fn is_not_found(&self) -> bool {
        self.kind() == io::ErrorKind::NotFound
    }
}

impl From<ConfinedError> for io::Error {
    fn from(error: ConfinedError) -> io::Error {
        io::Error::new(error.kind(), error)
    }
}

/// What is at a path, looked at without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File {
        size: u64,
        mode: u32,
    },
    Dir,
    Symlink,
    /// A device, FIFO or socket.
    Other,
}

/// An open directory that every path is resolved beneath.
#[derive(Debug)]
pub struct ConfinedDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// How paths are resolved; chosen once per process.
const UNKNOWN: u8 = 0;
const OPENAT2: u8 = 1;
const WALK: u8 = 2;
static RESOLUTION: AtomicU8 = AtomicU8::new(UNKNOWN);

/// The flags every resolution uses.
fn resolve_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

impl ConfinedDir {
    /// Opens the directory at `path`. The path itself is the caller's
    /// choice and is followed like any path; only what lies beneath is
    /// confined.
    pub fn open(path: &Path) -> Result<ConfinedDir, ConfinedError> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| ConfinedError::Io {
            op: "open the directory",
            path: path.to_owned(),
            source: e.into(),
        })?;
        Ok(ConfinedDir {
            fd,
            path: path.to_owned(),
        })
    }

    /// The path the directory was opened at, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `relative` under this directory, for messages.
    pub fn display_path(&self, relative: &Path) -> PathBuf {
        self.path.join(relative)
    }

    /// The directory at `relative`, which must be a real directory reached
    /// through real directories.
    pub fn open_dir(&self, relative: &Path) -> Result<ConfinedDir, ConfinedError> {
        let fd = self.open_beneath(
            relative,
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
            "open the directory",
        )?;
        Ok(ConfinedDir {
            fd,
            path: self.path.join(relative),
        })
    }

    /// Creates the directories of `relative` that are missing (with mode
    /// `0o755` under the umask) and opens the last one.
    pub fn create_dir_all(&self, relative: &Path) -> Result<ConfinedDir, ConfinedError> {
        let parts = components(relative)?;
        let mut dir = self.reopen()?;
        for part in parts {
            match rustix::fs::mkdirat(&dir.fd, part, Mode::from_raw_mode(0o755)) {
                Ok(()) => {}
                Err(rustix::io::Errno::EXIST) => {}
                Err(errno) => return Err(dir.failed("create the directory", part, errno)),
            }
            dir = dir.open_dir(Path::new(part))?;
        }
        Ok(dir)
    }

    /// Creates the directory `relative`, whose parent must exist; an
    /// existing directory is fine, anything else there is an error.
    pub fn create_dir(&self, relative: &Path) -> Result<(), ConfinedError> {
        let (parent, name) = self.parent(relative)?;
        match rustix::fs::mkdirat(&parent.fd, name, Mode::from_raw_mode(0o755)) {
            Ok(()) => Ok(()),
            Err(rustix::io::Errno::EXIST) => parent.open_dir(Path::new(name)).map(drop),
            Err(errno) => Err(parent.failed("create the directory", name, errno)),
        }
    }

    /// Creates the regular file `relative` for writing (and reading back);
    /// nothing may be there yet. Its mode is `mode` under the umask.
    pub fn create_file(&self, relative: &Path, mode: u32) -> Result<File, ConfinedError> {
        let fd = self.open_beneath(
            relative,
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(mode & 0o7777),
            "create",
        )?;
        Ok(File::from(fd))
    }

    /// Opens the regular file `relative` for reading and writing, creating
    /// it (with `mode` under the umask) when it is missing: a lock file.
    pub fn open_or_create(&self, relative: &Path, mode: u32) -> Result<File, ConfinedError> {
        let fd = self.open_beneath(
            relative,
            OFlags::RDWR | OFlags::CREATE | OFlags::NONBLOCK,
            Mode::from_raw_mode(mode & 0o7777),
            "open",
        )?;
        self.regular(fd, relative)
    }

    /// Opens the regular file `relative` for reading; a link, a directory,
    /// a FIFO or a device is refused (a FIFO without blocking on it).
    pub fn open_file(&self, relative: &Path) -> Result<File, ConfinedError> {
        let fd = self.open_beneath(
            relative,
            OFlags::RDONLY | OFlags::NONBLOCK,
            Mode::empty(),
            "open",
        )?;
        self.regular(fd, relative)
    }

    /// `fd`, opened without blocking, if it is a regular file; made
    /// blocking again for reading and writing.
    fn regular(&self, fd: OwnedFd, relative: &Path) -> Result<File, ConfinedError> {
        let io = |op, errno: rustix::io::Errno| ConfinedError::Io {
            op,
            path: self.path.join(relative),
            source: errno.into(),
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| io("read the metadata of", e))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(ConfinedError::Io {
                op: "open",
                path: self.path.join(relative),
                source: io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
            });
        }
        rustix::fs::fcntl_setfl(&fd, OFlags::empty()).map_err(|e| io("open", e))?;
        Ok(File::from(fd))
    }

    /// What is at `relative`, without following it; `None` when nothing
    /// is (nor at a parent). A parent that is a link or a file is
    /// [`ConfinedError::NotBeneath`].
    pub fn entry(&self, relative: &Path) -> Result<Option<EntryKind>, ConfinedError> {
        let (parent, name) = match self.parent(relative) {
            Err(error) if error.is_not_found() => return Ok(None),
            parent => parent?,
        };
        let stat = match rustix::fs::statat(&parent.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(errno) => return Err(parent.failed("read the metadata of", name, errno)),
        };
        Ok(Some(match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => EntryKind::File {
                size: u64::try_from(stat.st_size).unwrap_or(0),
                mode: stat.st_mode & 0o7777,
            },
            FileType::Directory => EntryKind::Dir,
            FileType::Symlink => EntryKind::Symlink,
            _ => EntryKind::Other,
        }))
    }

    /// Where the symbolic link `relative` points.
    pub fn read_link(&self, relative: &Path) -> Result<PathBuf, ConfinedError> {
        let (parent, name) = self.parent(relative)?;
        let target = rustix::fs::readlinkat(&parent.fd, name, Vec::new())
            .map_err(|errno| parent.failed("read the link", name, errno))?;
        Ok(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
    }

    /// Makes `relative` a symbolic link to `target` (kept as written).
    pub fn symlink(&self, target: &Path, relative: &Path) -> Result<(), ConfinedError> {
        let (parent, name) = self.parent(relative)?;
        rustix::fs::symlinkat(target, &parent.fd, name)
            .map_err(|errno| parent.failed("create the link", name, errno))
    }

    /// Makes `relative` a hard link to the file at `source` (a path outside
    /// the confinement, such as a cache, not followed if it is a link).
    pub fn hard_link_from(&self, source: &Path, relative: &Path) -> Result<(), ConfinedError> {
        let (parent, name) = self.parent(relative)?;
        rustix::fs::linkat(rustix::fs::CWD, source, &parent.fd, name, AtFlags::empty())
            .map_err(|errno| parent.failed("link", name, errno))
    }

    /// Renames `from` (beneath this directory) to `to` beneath `target`,
    /// replacing a file or link there; neither end is followed.
    pub fn rename(
        &self,
        from: &Path,
        target: &ConfinedDir,
        to: &Path,
    ) -> Result<(), ConfinedError> {
        let (from_parent, from_name) = self.parent(from)?;
        let (to_parent, to_name) = target.parent(to)?;
        rustix::fs::renameat(&from_parent.fd, from_name, &to_parent.fd, to_name).map_err(|errno| {
            ConfinedError::Io {
                op: "move a file to",
                path: target.path.join(to),
                source: errno.into(),
            }
        })
    }

    /// Removes the file or link `relative`.
    pub fn remove_file(&self, relative: &Path) -> Result<(), ConfinedError> {
        let (parent, name) = self.parent(relative)?;
        rustix::fs::unlinkat(&parent.fd, name, AtFlags::empty())
            .map_err(|errno| parent.failed("remove", name, errno))
    }

    /// Removes the empty directory `relative`.
    pub fn remove_dir(&self, relative: &Path) -> Result<(), ConfinedError> {
        let (parent, name) = self.parent(relative)?;
        rustix::fs::unlinkat(&parent.fd, name, AtFlags::REMOVEDIR)
            .map_err(|errno| parent.failed("remove the directory", name, errno))
    }

    /// Removes `relative` and, if it is a directory, everything in it,
    /// never following a link nor entering another file system; nothing
    /// there is fine. However deep the tree, a few handles are open at
    /// once ([`remove`]).
    pub fn remove_all(&self, relative: &Path) -> Result<(), ConfinedError> {
        match self.entry(relative)? {
            None => Ok(()),
            Some(EntryKind::Dir) => {
                let (parent, name) = self.parent(relative)?;
                remove::remove_tree(&parent, name)
            }
            Some(_) => self.remove_file(relative),
        }
    }

    /// The mount this directory is on ([`mount_of`]).
    pub fn mount(&self) -> Result<u64, ConfinedError> {
        mount_of(self.fd.as_fd(), OsStr::new("")).map_err(|errno| ConfinedError::Io {
            op: "read the metadata of",
            path: self.path.clone(),
            source: errno.into(),
        })
    }

    /// The mount of what is at `relative`, not followed (a mount point's is
    /// the one mounted there); `None` when nothing is there.
    pub fn mount_of(&self, relative: &Path) -> Result<Option<u64>, ConfinedError> {
        let (parent, name) = match self.parent(relative) {
            Err(error) if error.is_not_found() => return Ok(None),
            parent => parent?,
        };
        match mount_of(parent.fd.as_fd(), name) {
            Ok(mount) => Ok(Some(mount)),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(errno) => Err(parent.failed("read the metadata of", name, errno)),
        }
    }

    /// The names in this directory, sorted.
    pub fn names(&self) -> Result<Vec<OsString>, ConfinedError> {
        let failed = |errno: rustix::io::Errno| ConfinedError::Io {
            op: "list",
            path: self.path.clone(),
            source: errno.into(),
        };
        let mut dir = rustix::fs::Dir::read_from(&self.fd).map_err(failed)?;
        let mut names = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(failed)?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                names.push(OsStr::from_bytes(name).to_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Flushes the directory's entries to disk.
    pub fn sync(&self) -> Result<(), ConfinedError> {
        rustix::fs::fsync(&self.fd).map_err(|errno| ConfinedError::Io {
            op: "flush",
            path: self.path.clone(),
            source: errno.into(),
        })
    }

    /// Flushes the whole file system the directory is on: one call instead
    /// of one per file, for changes of many files.
    pub fn sync_filesystem(&self) -> Result<(), ConfinedError> {
        rustix::fs::syncfs(&self.fd).map_err(|errno| ConfinedError::Io {
            op: "flush the file system of",
            path: self.path.clone(),
            source: errno.into(),
        })
    }

    /// The directory's handle, for calls this type does not offer.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The parent directory of `relative`, opened, and its last component.
    fn parent<'p>(&self, relative: &'p Path) -> Result<(ConfinedDir, &'p OsStr), ConfinedError> {
        let parts = components(relative)?;
        let Some((name, dirs)) = parts.split_last() else {
            return Err(ConfinedError::BadPath {
                path: relative.to_owned(),
            });
        };
        let parent = if dirs.is_empty() {
            self.reopen()?
        } else {
            let dirs: PathBuf = dirs.iter().collect();
            self.open_dir(&dirs)?
        };
        Ok((parent, name))
    }

    fn reopen(&self) -> Result<ConfinedDir, ConfinedError> {
        let fd = self.fd.try_clone().map_err(|source| ConfinedError::Io {
            op: "open the directory",
            path: self.path.clone(),
            source,
        })?;
        Ok(ConfinedDir {
            fd,
            path: self.path.clone(),
        })
    }

    /// An error of an operation on `name` in this directory.
    fn failed(&self, op: &'static str, name: &OsStr, errno: rustix::io::Errno) -> ConfinedError {
        let path = self.path.join(name);
        if errno == rustix::io::Errno::LOOP {
            return ConfinedError::NotBeneath { path };
        }
        ConfinedError::Io {
            op,
            path,
            source: errno.into(),
        }
    }

    /// Opens `relative` beneath this directory without following any link.
    fn open_beneath(
        &self,
        relative: &Path,
        flags: OFlags,
        mode: Mode,
        op: &'static str,
    ) -> Result<OwnedFd, ConfinedError> {
        let parts = components(relative)?;
        let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let result = match RESOLUTION.load(Ordering::Relaxed) {
            WALK => walk(&self.fd, &parts, flags, mode),
            known => {
                match rustix::fs::openat2(&self.fd, relative, flags, mode, resolve_flags()) {
                    Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) if known == UNKNOWN => {
                        // No openat2 (an old kernel, or a sandbox that
                        // filters it): walk instead from now on.
                        RESOLUTION.store(WALK, Ordering::Relaxed);
                        walk(&self.fd, &parts, flags, mode)
                    }
                    result => {
                        RESOLUTION.store(OPENAT2, Ordering::Relaxed);
                        result
                    }
                }
            }
        };
        result.map_err(|errno| {
            let path = self.path.join(relative);
            match errno {
                // A link on the way (or at the end), a way out, or a file
                // where a directory must be.
                rustix::io::Errno::LOOP | rustix::io::Errno::XDEV | rustix::io::Errno::NOTDIR => {
                    ConfinedError::NotBeneath { path }
                }
                errno => ConfinedError::Io {
                    op,
                    path,
                    source: errno.into(),
                },
            }
        })
    }
}

/// Which mount `name` in `dir` (`dir` itself for an empty name) is on,
/// not following it: the kernel's mount id (Linux 5.8), else its device.
/// Two mounts of one file system (a bind mount) differ, as a rename
/// between them fails as one between two file systems does.
pub(crate) fn mount_of(dir: BorrowedFd<'_>, name: &OsStr) -> Result<u64, rustix::io::Errno> {
    let mut flags = AtFlags::SYMLINK_NOFOLLOW;
    if name.is_empty() {
        flags |= AtFlags::EMPTY_PATH;
    }
    match rustix::fs::statx(dir, name, flags, StatxFlags::MNT_ID) {
        Ok(stat) if stat.stx_mask & StatxFlags::MNT_ID.bits() != 0 => Ok(stat.stx_mnt_id),
        Ok(stat) => Ok(u64::from(stat.stx_dev_major) << 32 | u64::from(stat.stx_dev_minor)),
        Err(rustix::io::Errno::NOSYS) => {
            let stat = if name.is_empty() {
                rustix::fs::fstat(dir)?
            } else {
                rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?
            };
            Ok(stat.st_dev)
        }
        Err(errno) => Err(errno),
    }
}

/// Resolves `parts` from `dir` one handle at a time, never following a
/// link: the rule `openat2` keeps, for kernels without it.
fn walk(
    dir: &OwnedFd,
    parts: &[&OsStr],
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, rustix::io::Errno> {
    let Some((last, dirs)) = parts.split_last() else {
        return Err(rustix::io::Errno::INVAL);
    };
    let mut current: Option<OwnedFd> = None;
    for part in dirs {
        let from = current.as_ref().unwrap_or(dir);
        let next = rustix::fs::openat(
            from,
            *part,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        current = Some(next);
    }
    rustix::fs::openat(current.as_ref().unwrap_or(dir), *last, flags, mode)
}

/// The parts of a relative path that [`RelativePath`]'s rule takes (so
/// plain names only); anything else is refused.
fn components(relative: &Path) -> Result<Vec<&OsStr>, ConfinedError> {
    let bad = || ConfinedError::BadPath {
        path: relative.to_owned(),
    };
    let text = relative.to_str().ok_or_else(bad)?;
    text.parse::<RelativePath>().map_err(|_| bad())?;
    Ok(text.split('/').map(OsStr::new).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root with a prefix in it, and a file outside the prefix.
    fn setup() -> (tempfile::TempDir, ConfinedDir) {
        let root = tempfile::tempdir().unwrap();
        let prefix = root.path().join("prefix");
        fs_err::create_dir_all(prefix.join("a")).unwrap();
        fs_err::write(root.path().join("victim"), b"keep").unwrap();
        let dir = ConfinedDir::open(&prefix).unwrap();
        (root, dir)
    }

    #[test]
    fn chained_links_that_each_look_inside_are_never_followed() {
        let (root, prefix) = setup();
        // Each link alone stays inside; together they lead above the prefix.
        prefix.symlink(Path::new(".."), Path::new("a/b")).unwrap();
        prefix
            .symlink(Path::new("a/b/.."), Path::new("up1"))
            .unwrap();
        for path in ["up1/victim", "a/b/a/new", "up1/new"] {
            let error = prefix.create_file(Path::new(path), 0o644).unwrap_err();
            assert!(
                matches!(error, ConfinedError::NotBeneath { .. }),
                "{path}: {error}"
            );
        }
        assert!(matches!(
            prefix.open_dir(Path::new("up1")),
            Err(ConfinedError::NotBeneath { .. })
        ));
        assert!(matches!(
            prefix.remove_file(Path::new("up1/victim")),
            Err(ConfinedError::NotBeneath { .. })
        ));
        assert!(matches!(
            prefix.create_dir_all(Path::new("up1/deeper")),
            Err(ConfinedError::NotBeneath { .. })
        ));
        assert_eq!(fs_err::read(root.path().join("victim")).unwrap(), b"keep");
        assert!(!root.path().join("new").exists());
    }

    #[test]
    fn the_walk_without_openat2_refuses_the_same_links() {
        let (_root, prefix) = setup();
        prefix.symlink(Path::new(".."), Path::new("a/b")).unwrap();
        prefix.create_dir_all(Path::new("a/real")).unwrap();
        let open = |path: &str| {
            let parts = components(Path::new(path)).unwrap();
            walk(
                &prefix.fd,
                &parts,
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
        };
        assert!(matches!(
            open("a/b/victim").unwrap_err(),
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR
        ));
        assert_eq!(open("a/b").unwrap_err(), rustix::io::Errno::LOOP);
        assert!(open("a/real").is_ok());
    }

    #[test]
    fn paths_that_are_not_plain_and_relative_are_refused() {
        let (_root, prefix) = setup();
        let refused = [
            "/etc/passwd",
            "../victim",
            "a/../../victim",
            "./a",
            "",
            "a//b",
            "a/",
            "a\\b",
            "c:x",
            "a/\u{7}b",
        ];
        for path in refused {
            assert!(
                matches!(
                    prefix.create_file(Path::new(path), 0o644),
                    Err(ConfinedError::BadPath { .. })
                ),
                "{path:?}"
            );
        }
    }

    #[test]
    fn removing_a_tree_removes_links_not_what_they_point_at() {
        let (root, prefix) = setup();
        prefix.create_dir_all(Path::new("a/deep")).unwrap();
        prefix
            .symlink(&root.path().join("victim"), Path::new("a/deep/to-victim"))
            .unwrap();
        prefix.symlink(root.path(), Path::new("a/to-root")).unwrap();
        prefix.remove_all(Path::new("a")).unwrap();
        assert_eq!(prefix.entry(Path::new("a")).unwrap(), None);
        assert_eq!(fs_err::read(root.path().join("victim")).unwrap(), b"keep");
    }

    #[test]
    fn a_rename_replaces_a_link_itself() {
        let (root, prefix) = setup();
        prefix
            .symlink(&root.path().join("victim"), Path::new("a/lib.so"))
            .unwrap();
        let mut file = prefix.create_file(Path::new("new.so"), 0o644).unwrap();
        std::io::Write::write_all(&mut file, b"new").unwrap();
        prefix
            .rename(Path::new("new.so"), &prefix, Path::new("a/lib.so"))
            .unwrap();
        assert!(matches!(
            prefix.entry(Path::new("a/lib.so")).unwrap(),
            Some(EntryKind::File { size: 3, .. })
        ));
        assert_eq!(fs_err::read(root.path().join("victim")).unwrap(), b"keep");
    }

    #[test]
    fn opening_a_fifo_is_refused_without_blocking() {
        let (_root, prefix) = setup();
        let fifo = prefix.path().join("a/fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let error = prefix.open_file(Path::new("a/fifo")).unwrap_err();
        assert!(error.to_string().contains("a/fifo"), "{error}");
        assert_eq!(
            prefix.entry(Path::new("a/fifo")).unwrap(),
            Some(EntryKind::Other)
        );
    }

    #[test]
    fn an_entry_under_a_file_is_not_beneath() {
        let (_root, prefix) = setup();
        drop(prefix.create_file(Path::new("a/file"), 0o644).unwrap());
        assert!(matches!(
            prefix.entry(Path::new("a/file/x")),
            Err(ConfinedError::NotBeneath { .. })
        ));
        assert!(matches!(
            prefix.create_dir_all(Path::new("a/file/x")),
            Err(ConfinedError::NotBeneath { .. } | ConfinedError::Io { .. })
        ));
    }
}

//! Writing files the one way the tools write them: into a temporary file
//! beside the destination, synced, renamed into place, and the directory
//! synced, so a reader sees the old file or the new one, never a part.
//!
//! New files get the usual mode (`0o666` under the process umask, as `cp`
//! and shells make them), not the `0o600` of a bare temporary file: a web
//! server or another user must be able to read what is published. A file
//! made from an input can take the input's mode instead.
#![forbid(unsafe_code)]

pub mod confined;
pub mod relative;

pub use relative::{InvalidPath, RelativePath};

use std::fs::{File, Permissions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use fs_err as fs;

/// The mode of a new file before the umask: readable by everyone.
pub const DEFAULT_MODE: u32 = 0o666;

/// A file that could not be written, and why.
///
/// `path` is the file being written; the cause names the path it concerns
/// when that is another one (the directory, the temporary file).
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}", path.display())]
pub struct PathError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

/// For callers whose errors are I/O errors: the kind stays, the message
/// still names the file, and the cause stays the source.
impl From<PathError> for io::Error {
    fn from(error: PathError) -> io::Error {
        io::Error::new(error.source.kind(), error)
    }
}

impl PathError {
    fn at(path: &Path) -> impl FnOnce(io::Error) -> PathError + '_ {
        move |source| PathError {
            path: path.to_owned(),
            source,
        }
    }
}

/// A file being written that appears at its path only on [`commit`].
///
/// Dropped without a commit, it is removed and the path is untouched.
///
/// [`commit`]: AtomicFile::commit
#[derive(Debug)]
pub struct AtomicFile {
    temp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl AtomicFile {
    /// Starts writing `path` with [`DEFAULT_MODE`], creating its parent
    /// directories.
    pub fn create(path: &Path) -> Result<Self, PathError> {
        Self::with_mode(path, DEFAULT_MODE)
    }

    /// Starts writing `path` with `mode` (under the umask), creating its
    /// parent directories.
    pub fn with_mode(path: &Path, mode: u32) -> Result<Self, PathError> {
        let dir = parent(path);
        fs::create_dir_all(dir).map_err(PathError::at(path))?;
        Self::temporary_in(path, dir, mode)
    }

    /// Starts writing `path` with [`DEFAULT_MODE`] through a temporary file
    /// in `dir` (on the same file system), for a writer that removes `dir`
    /// after a crash and so must find no stray file beside `path`.
    pub fn create_in(path: &Path, dir: &Path) -> Result<Self, PathError> {
        Self::temporary_in(path, dir, DEFAULT_MODE)
    }

    /// As [`create_in`](AtomicFile::create_in), with `mode` (under the
    /// umask): a file replacing one whose mode it keeps.
    pub fn create_in_with_mode(path: &Path, dir: &Path, mode: u32) -> Result<Self, PathError> {
        Self::temporary_in(path, dir, mode)
    }

    fn temporary_in(path: &Path, dir: &Path, mode: u32) -> Result<Self, PathError> {
        let temp = tempfile::Builder::new()
            .prefix(".kpack-")
            .permissions(Permissions::from_mode(mode & 0o7777))
            .tempfile_in(dir)
            .map_err(PathError::at(path))?;
        Ok(Self {
            temp,
            path: path.to_owned(),
        })
    }

    /// The destination.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file being written.
    pub fn file(&self) -> &File {
        self.temp.as_file()
    }

    /// Syncs the file, renames it into place and syncs the directory.
    pub fn commit(self) -> Result<(), PathError> {
        let Self { temp, path } = self;
        temp.as_file()
            .sync_all()
            .and_then(|()| temp.persist(&path).map(drop).map_err(|e| e.error))
            .and_then(|()| sync_dir(parent(&path)))
            .map_err(|source| PathError { path, source })
    }
}

impl AtomicFile {
    /// Renames the file into place without syncing it or the directory: for
    /// a cache whose every read checks the content's hash, where a crash may
    /// lose the file or leave it torn, never unnoticed, and thousands of
    /// small files must not each wait for the disk.
    pub fn commit_unsynced(self) -> Result<(), PathError> {
        let Self { temp, path } = self;
        temp.persist(&path).map(drop).map_err(|e| PathError {
            path,
            source: e.error,
        })
    }

    /// As [`commit`](AtomicFile::commit), but only if nothing is at the
    /// destination yet: `Ok(false)`, and the destination untouched, when
    /// something is (a create-only write, as `If-None-Match: *` is on
    /// object storage).
    pub fn commit_new(self) -> Result<bool, PathError> {
        let Self { temp, path } = self;
        let result = temp
            .as_file()
            .sync_all()
            .and_then(|()| match temp.persist_noclobber(&path) {
                Ok(_) => sync_dir(parent(&path)).map(|()| true),
                Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(e.error),
            });
        result.map_err(|source| PathError { path, source })
    }
}

impl AtomicFile {
    /// Closes the file, unfinished, to be reopened: for a writer with more
    /// files under way than it may hold open. Writing resumes at the start
    /// of the file; the caller keeps where it was.
    pub fn close(self) -> ClosedAtomicFile {
        let Self { temp, path } = self;
        let (file, temp) = temp.into_parts();
        drop(file);
        ClosedAtomicFile { temp, path }
    }
}

/// An [`AtomicFile`] closed while being written: its temporary file stays
/// (and is removed when this is dropped) until it is reopened.
#[derive(Debug)]
pub struct ClosedAtomicFile {
    temp: tempfile::TempPath,
    path: PathBuf,
}

impl ClosedAtomicFile {
    /// The destination.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the file again for writing, at its start.
    pub fn reopen(self) -> Result<AtomicFile, PathError> {
        let Self { temp, path } = self;
        let file = fs::OpenOptions::new().read(true).write(true).open(&temp);
        match file {
            Ok(file) => Ok(AtomicFile {
                temp: tempfile::NamedTempFile::from_parts(file.into_file(), temp),
                path,
            }),
            Err(source) => Err(PathError { path, source }),
        }
    }
}

/// Write errors name the destination (the temporary file's name means
/// nothing to anyone).
impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.temp.write(buf).map_err(self.named())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.temp.write_all(buf).map_err(self.named())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.temp.flush().map_err(self.named())
    }
}

impl AtomicFile {
    fn named(&self) -> impl FnOnce(io::Error) -> io::Error + '_ {
        move |source| PathError::at(&self.path)(source).into()
    }
}

impl Seek for AtomicFile {
    fn seek(&mut self, position: SeekFrom) -> io::Result<u64> {
        self.temp.seek(position)
    }
}

/// Writes `bytes` to `path` atomically with [`DEFAULT_MODE`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), PathError> {
    write_atomic_with_mode(path, bytes, DEFAULT_MODE)
}

/// Writes `bytes` to `path` atomically with `mode` (under the umask).
pub fn write_atomic_with_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<(), PathError> {
    let mut file = AtomicFile::with_mode(path, mode)?;
    file.temp.write_all(bytes).map_err(PathError::at(path))?;
    file.commit()
}

/// Syncs a directory, so that renames and new entries in it are durable.
/// The error names the directory.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// What a file that is not a regular one is, in words ("a FIFO").
pub fn kind_in_words(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_file() {
        "a regular file"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// How many files this process may have open at once (its soft
/// `RLIMIT_NOFILE`); `None` when unlimited.
pub fn open_file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    /// The process umask, from `/proc/self/status` (setting and restoring it
    /// would race with the other tests' file creation).
    fn umask() -> u32 {
        let status = fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("Umask:")).unwrap();
        u32::from_str_radix(line["Umask:".len()..].trim(), 8).unwrap()
    }

    #[test]
    fn new_files_are_readable_by_others_under_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/index.toml");
        write_atomic(&path, b"data").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"data");
        assert_eq!(mode(&path), 0o666 & !umask());
        assert_ne!(mode(&path) & 0o044, 0, "readable by group or others");
    }

    #[test]
    fn commit_new_never_replaces_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pool/a");
        let mut first = AtomicFile::create(&path).unwrap();
        first.write_all(b"first").unwrap();
        assert!(first.commit_new().unwrap());
        let mut second = AtomicFile::create(&path).unwrap();
        second.write_all(b"second").unwrap();
        assert!(!second.commit_new().unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"first");
        let names: Vec<_> = fs::read_dir(dir.path().join("pool")).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
    }

    #[test]
    fn a_given_mode_is_kept_under_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tool");
        write_atomic_with_mode(&path, b"#!/bin/sh\n", 0o755).unwrap();
        assert_eq!(mode(&path), 0o755 & !umask());
    }

    #[test]
    fn an_uncommitted_file_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("archive.kpack");
        fs::write(&path, b"old").unwrap();
        let mut file = AtomicFile::create(&path).unwrap();
        file.write_all(b"new").unwrap();
        drop(file);
        assert_eq!(fs::read(&path).unwrap(), b"old");
        let entries: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(entries.len(), 1);
    }

    #[test]
    fn a_closed_file_reopens_keeps_its_bytes_and_its_mode_and_commits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("archive.kpack");
        let mut file = AtomicFile::with_mode(&path, 0o640).unwrap();
        file.write_all(b"first ").unwrap();
        let closed = file.close();
        assert_eq!(closed.path(), path);
        let mut file = closed.reopen().unwrap();
        file.seek(SeekFrom::End(0)).unwrap();
        file.write_all(b"second").unwrap();
        file.commit().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first second");
        assert_eq!(mode(&path), 0o640 & !umask());
        // Dropped while closed, it leaves nothing behind.
        drop(
            AtomicFile::create(&dir.path().join("other"))
                .unwrap()
                .close(),
        );
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        fs::write(&blocker, b"").unwrap();
        let error = write_atomic(&blocker.join("below"), b"x").unwrap_err();
        assert_eq!(error.path, blocker.join("below"));
        // The cause names the file that blocks the directory, once.
        let cause = error.source.to_string();
        assert_eq!(
            cause.matches(&*blocker.to_string_lossy()).count(),
            1,
            "{cause}"
        );
    }
}

//! Staging: artifacts unpacked into a directory beside the prefix's files
//! (same file system, so committing is renames), through a handle that
//! never follows a link the package made, every path checked to stay inside
//! the prefix and out of kpack-get's bookkeeping, every file hashed as it is
//! written, and every tree bounded in how far it unpacks.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use kpack_fs::confined::{ConfinedDir, ConfinedError};
use kpack_hash::CountingReader;
use kpack_repo_index::types::InvalidPath;
use kpack_repo_index::{HashingReader, RelativePath};

use super::record::InstalledFile;
use super::{InstallError, ReadyArtifact};
use rocm_kpack::format::{ARCHIVE_EXTENSION, KPACK_DIR};

/// Why a path from an archive cannot be placed in the prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnsafePath {
    #[error("not UTF-8")]
    NotUtf8,
    #[error("contains '..'")]
    ParentDir,
    #[error("is absolute")]
    Absolute,
    #[error("is empty")]
    Empty,
    #[error("{}", .0.reason)]
    Unusable(InvalidPath),
}

/// Why an archive entry is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryProblem {
    #[error("{0}")]
    Path(#[from] UnsafePath),
    #[error("is kpack-get's own bookkeeping")]
    Bookkeeping,
    #[error("lies under a symbolic link")]
    UnderLink,
    #[error("links to {} outside the prefix", .0.display())]
    LinkOutside(PathBuf),
    #[error("is a symbolic link without a target")]
    NoLinkTarget,
    #[error("links to a target that is not UTF-8")]
    LinkNotUtf8,
    #[error("is a {0} entry; trees hold files, directories and symbolic links only")]
    Kind(String),
    #[error("cannot be read: {0}")]
    Unreadable(String),
    #[error("{0}")]
    Bounds(#[from] PathBounds),
}

/// The most bytes a path in the prefix may have (`PATH_MAX`).
pub(crate) const MAX_PATH_BYTES: usize = 4096;
/// The most components a path in the prefix may have.
pub(crate) const MAX_PATH_DEPTH: usize = 256;
/// The most bytes one component may have (`NAME_MAX`).
pub(crate) const MAX_NAME_BYTES: usize = 255;

/// Why a path is refused for its size, before anything is made for it:
/// what the kernel cannot address in one call, or what would take a
/// handle per level to remove.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathBounds {
    #[error("is {0} bytes long; paths are at most {MAX_PATH_BYTES} bytes")]
    TooLong(usize),
    #[error("is {0} levels deep; paths are at most {MAX_PATH_DEPTH} levels deep")]
    TooDeep(usize),
    #[error("has a name of {0} bytes; names are at most {MAX_NAME_BYTES} bytes")]
    LongName(usize),
}

/// Checks `path` (as written in an archive or an index) against the
/// bounds every path in the prefix keeps.
pub(crate) fn check_bounds(path: &Path) -> Result<(), PathBounds> {
    let bytes = path.as_os_str().len();
    if bytes > MAX_PATH_BYTES {
        return Err(PathBounds::TooLong(bytes));
    }
    let mut depth = 0;
    for component in path.components() {
        if let Component::Normal(name) = component {
            depth += 1;
            if name.len() > MAX_NAME_BYTES {
                return Err(PathBounds::LongName(name.len()));
            }
        }
    }
    if depth > MAX_PATH_DEPTH {
        return Err(PathBounds::TooDeep(depth));
    }
    Ok(())
}

/// A relative path inside the prefix, checked: no absolute part, no `..`,
/// no empty or `.` components, nothing [`RelativePath`] refuses.
pub(crate) fn safe_relative(path: &Path) -> Result<RelativePath, UnsafePath> {
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => {
                let part = part.to_str().ok_or(UnsafePath::NotUtf8)?;
                parts.push(part);
            }
            Component::CurDir => {}
            Component::ParentDir => return Err(UnsafePath::ParentDir),
            Component::RootDir | Component::Prefix(_) => return Err(UnsafePath::Absolute),
        }
    }
    if parts.is_empty() {
        return Err(UnsafePath::Empty);
    }
    parts.join("/").parse().map_err(UnsafePath::Unusable)
}

/// Where one package's files are staged, and the prefix they are bound
/// for: errors name a file as it will be there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StageDir<'a> {
    pub dir: &'a ConfinedDir,
    pub prefix: &'a Path,
}

impl StageDir<'_> {
    /// A failure to stage `relative`, named as in the prefix; a path
    /// through a link the package made is a refusal.
    fn failed(
        &self,
        artifact: &RelativePath,
        relative: &RelativePath,
    ) -> impl FnOnce(ConfinedError) -> InstallError {
        let path = self.prefix.join(relative.as_str());
        let artifact = artifact.clone();
        let entry = relative.to_string();
        move |error| match error {
            ConfinedError::NotBeneath { .. } => InstallError::UnsafeEntry {
                artifact,
                entry,
                problem: EntryProblem::UnderLink,
            },
            // The cause alone: the file is named as in the prefix, not
            // as its staged copy.
            ConfinedError::Io { source, .. } => InstallError::Write { path, source },
            error => InstallError::Write {
                path,
                source: error.into(),
            },
        }
    }
}

impl StageDir<'_> {
    /// Makes `relative`'s directories and clears its place, for a file or
    /// link of `artifact`.
    fn clear(&self, artifact: &RelativePath, relative: &RelativePath) -> Result<(), InstallError> {
        if let Some(parent) = relative.parents().pop() {
            self.dir
                .create_dir_all(Path::new(parent.as_str()))
                .map_err(self.failed(artifact, relative))?;
        }
        self.dir
            .remove_all(Path::new(relative.as_str()))
            .map_err(self.failed(artifact, relative))
    }
}

/// Whether a symbolic link at `at` (relative to the prefix) pointing to
/// `target` stays inside the prefix by its text alone: a first, cheap
/// refusal; links are judged for good by where they resolve in the tree as
/// installed (`future`).
fn link_stays_inside(at: &RelativePath, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    // Depth below the prefix of the link's directory.
    let mut depth = at.parents().len() as i64;
    for component in target.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// The files staged for one package: relative path -> what it is.
pub(crate) type StagedFiles = BTreeMap<RelativePath, InstalledFile>;

/// The mode a file is installed with: the package's permission bits
/// without group and other write, setuid, setgid or sticky bits, as a
/// root-owned prefix expects.
pub(crate) fn installed_mode(mode: u32) -> u32 {
    mode & 0o755
}

/// Unpacks a tree artifact (a zstd-compressed tar) into `stage`, reading at
/// most `limit` bytes of tar: a tree that unpacks to more is refused.
pub(crate) fn extract_tree(
    archive: &Path,
    artifact: &RelativePath,
    limit: u64,
    stage: StageDir<'_>,
    files: &mut StagedFiles,
) -> Result<(), InstallError> {
    let bad = |entry: &str, problem: EntryProblem| InstallError::UnsafeEntry {
        artifact: artifact.clone(),
        entry: entry.to_owned(),
        problem,
    };
    let file = fs_err::File::open(archive)?;
    let unreadable = |entry: &str, error: std::io::Error| {
        bad(entry, EntryProblem::Unreadable(error.to_string()))
    };
    let decoder = zstd::Decoder::new(file).map_err(|e| unreadable("(archive)", e))?;
    let mut tar_stream = CountingReader::with_limit(decoder, limit);
    let unpacked = unpack_entries(
        &mut tar::Archive::new(&mut tar_stream),
        artifact,
        stage,
        files,
    );
    match unpacked {
        Ok(()) => Ok(()),
        // A read that fails once the limit is passed fails for the limit.
        Err(Unpack::Read(..)) if tar_stream.count() > limit => Err(InstallError::TooLarge {
            artifact: artifact.clone(),
            limit,
        }),
        Err(Unpack::Read(entry, error)) => Err(unreadable(&entry, error)),
        Err(Unpack::Install(error)) => Err(error),
    }
}

/// Why unpacking a tree stopped: reading it (at an entry, named for a
/// message), or what it holds.
enum Unpack {
    Read(String, std::io::Error),
    Install(InstallError),
}

impl From<InstallError> for Unpack {
    fn from(error: InstallError) -> Unpack {
        Unpack::Install(error)
    }
}

/// Stages each entry of `tar` (of `artifact`) in `stage`.
fn unpack_entries<R: Read>(
    tar: &mut tar::Archive<R>,
    artifact: &RelativePath,
    stage: StageDir<'_>,
    files: &mut StagedFiles,
) -> Result<(), Unpack> {
    let bad = |entry: &str, problem: EntryProblem| InstallError::UnsafeEntry {
        artifact: artifact.clone(),
        entry: entry.to_owned(),
        problem,
    };
    let unreadable = |entry: &str, error: std::io::Error| Unpack::Read(entry.to_owned(), error);
    let entries = tar.entries().map_err(|e| unreadable("(archive)", e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| unreadable("(archive)", e))?;
        let raw = entry
            .path()
            .map_err(|e| unreadable("(entry name)", e))?
            .into_owned();
        let shown = shorten(&raw.display().to_string());
        check_bounds(&raw).map_err(|reason| bad(&shown, reason.into()))?;
        let kind = entry.header().entry_type();
        if kind.is_dir() && safe_relative(&raw) == Err(UnsafePath::Empty) {
            continue;
        }
        let relative = safe_relative(&raw).map_err(|reason| bad(&shown, reason.into()))?;
        if is_bookkeeping(&relative) {
            return Err(bad(&shown, EntryProblem::Bookkeeping).into());
        }
        let failed = || stage.failed(artifact, &relative);
        if kind.is_dir() {
            stage
                .dir
                .create_dir_all(Path::new(relative.as_str()))
                .map_err(failed())?;
            continue;
        }
        // A later entry for the same path replaces the earlier one.
        stage.clear(artifact, &relative)?;
        let file = if kind.is_symlink() {
            let target = entry
                .link_name()
                .map_err(|e| unreadable(&shown, e))?
                .ok_or_else(|| bad(&shown, EntryProblem::NoLinkTarget))?
                .into_owned();
            stage_link(&relative, &target, stage).map_err(|problem| match problem {
                Ok(problem) => bad(&shown, problem),
                Err(error) => failed()(error),
            })?
        } else if kind.is_file() {
            let mode = installed_mode(entry.header().mode().unwrap_or(0o644));
            stage_file(&mut entry, &relative, mode, stage).map_err(|error| match error {
                StageError::Read(error) => unreadable(&shown, error),
                StageError::Write(error) => failed()(error).into(),
            })?
        } else {
            return Err(bad(&shown, EntryProblem::Kind(format!("{kind:?}"))).into());
        };
        files.insert(relative, file);
    }
    Ok(())
}

/// An entry's name for a message: its first and last 100 characters when
/// it is longer than 240.
fn shorten(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= 240 {
        return name.to_owned();
    }
    let head: String = chars.iter().take(100).collect();
    let tail: String = chars.iter().skip(chars.len() - 100).collect();
    format!("{head}...{tail}")
}

/// Whether `relative` is kpack-get's own: `.kpack` itself and everything
/// under it. Only archives placed by their `install-as` go there
/// ([`is_archive_slot`]).
pub(crate) fn is_bookkeeping(relative: &RelativePath) -> bool {
    relative.as_str() == KPACK_DIR || is_under_kpack_dir(relative).is_some()
}

/// Whether `relative` is where an archive may be placed in `.kpack/`:
/// directly in it, named `*.kpack`, not hidden nor `trash-*` (the lock,
/// the journal, the record, staging and what was moved aside are none of
/// these).
pub(crate) fn is_archive_slot(relative: &RelativePath) -> bool {
    is_under_kpack_dir(relative).is_some_and(|name| {
        !name.contains('/')
            && !name.starts_with('.')
            && !name.starts_with(super::commit::TRASH)
            && Path::new(name).extension() == Some(OsStr::new(ARCHIVE_EXTENSION))
    })
}

/// `relative` less its leading `.kpack/`, where it starts so.
fn is_under_kpack_dir(relative: &RelativePath) -> Option<&str> {
    relative
        .as_str()
        .strip_prefix(KPACK_DIR)
        .and_then(|rest| rest.strip_prefix('/'))
}

/// A symbolic link entry, if its text stays inside the prefix; the outer
/// error is a refusal, the inner one a failure to write.
fn stage_link(
    relative: &RelativePath,
    target: &Path,
    stage: StageDir<'_>,
) -> Result<InstalledFile, Result<EntryProblem, ConfinedError>> {
    if !link_stays_inside(relative, target) {
        return Err(Ok(EntryProblem::LinkOutside(target.to_owned())));
    }
    let link = target.to_str().ok_or(Ok(EntryProblem::LinkNotUtf8))?;
    stage
        .dir
        .symlink(target, Path::new(relative.as_str()))
        .map_err(Err)?;
    Ok(InstalledFile {
        path: relative.clone(),
        sha256: None,
        size: None,
        link: Some(link.to_owned()),
    })
}

/// Why a file could not be staged: its source or its copy.
enum StageError {
    Read(std::io::Error),
    Write(ConfinedError),
}

/// A regular file entry, hashed as it is written.
fn stage_file(
    reader: &mut impl Read,
    relative: &RelativePath,
    mode: u32,
    stage: StageDir<'_>,
) -> Result<InstalledFile, StageError> {
    let at = Path::new(relative.as_str());
    let write = |source: std::io::Error| {
        StageError::Write(ConfinedError::Io {
            op: "write",
            path: stage.dir.display_path(at),
            source,
        })
    };
    let mut out = stage.dir.create_file(at, mode).map_err(StageError::Write)?;
    let mut hashing = HashingReader::new(reader);
    copy(&mut hashing, &mut out).map_err(|error| match error {
        Copy::Read(error) => StageError::Read(error),
        Copy::Write(error) => write(error),
    })?;
    let (sha256, size) = hashing.finish();
    // Exactly the installed mode, whatever the umask.
    out.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(write)?;
    Ok(InstalledFile {
        path: relative.clone(),
        sha256: Some(sha256),
        size: Some(size),
        link: None,
    })
}

/// Which side of a copy failed.
enum Copy {
    Read(std::io::Error),
    Write(std::io::Error),
}

/// Copies `from` into `to`, telling a failure to read from one to write.
fn copy(from: &mut impl Read, to: &mut impl Write) -> Result<u64, Copy> {
    let mut buffer = vec![0u8; 256 << 10];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(Copy::Read(error)),
        };
        let chunk = buffer.get(..n).unwrap_or_default();
        to.write_all(chunk).map_err(Copy::Write)?;
        total += n as u64;
    }
}

/// Puts a verified archive at `relative` in `stage`: a kpack archive
/// (checked to be one, listing no more code than its shard allows), in
/// `.kpack/` or where a tree entry could go.
pub(crate) fn place_archive(
    ready: &ReadyArtifact,
    relative: &RelativePath,
    stage: StageDir<'_>,
    files: &mut StagedFiles,
) -> Result<(), InstallError> {
    let (blob, artifact, sha256, size) = (
        &ready.blob,
        &ready.artifact.path,
        ready.installed().sha256,
        ready.installed().size,
    );
    let refused = |problem| InstallError::UnsafeEntry {
        artifact: artifact.clone(),
        entry: shorten(relative.as_str()),
        problem,
    };
    check_bounds(Path::new(relative.as_str())).map_err(|reason| refused(reason.into()))?;
    if is_bookkeeping(relative) && !is_archive_slot(relative) {
        return Err(refused(EntryProblem::Bookkeeping));
    }
    open_bounded(ready)?;
    let failed = || stage.failed(artifact, relative);
    let at = Path::new(relative.as_str());
    stage.clear(artifact, relative)?;
    // A link to the cached file costs no copy and no second flush to disk;
    // another file system (or one without links) gets a copy. Archives are
    // read-only either way, which also keeps the cached copy intact.
    let file = match stage.dir.hard_link_from(blob, at) {
        Ok(()) => stage.dir.open_file(at).map_err(failed())?,
        Err(_) => {
            let mut out = stage.dir.create_file(at, 0o444).map_err(failed())?;
            let mut source = fs_err::File::open(blob)?;
            std::io::copy(&mut source, &mut out).map_err(|source| InstallError::Write {
                path: stage.prefix.join(relative.as_str()),
                source,
            })?;
            out
        }
    };
    file.set_permissions(std::fs::Permissions::from_mode(0o444))
        .map_err(|source| InstallError::Write {
            path: stage.prefix.join(relative.as_str()),
            source,
        })?;
    files.insert(
        relative.clone(),
        InstalledFile {
            path: relative.clone(),
            sha256: Some(sha256),
            size: Some(size),
            link: None,
        },
    );
    Ok(())
}

/// Opens the archive `artifact` names, once its code objects, every TOC
/// entry counted, decode to no more than its shard allows: what it
/// declares (`unpacked-size`), or for a shard without it a ratio of its
/// size. Nothing is decoded to find out.
pub(crate) fn open_bounded(artifact: &ReadyArtifact) -> Result<rocm_kpack::Archive, InstallError> {
    let archive =
        rocm_kpack::Archive::open(&artifact.blob).map_err(|source| InstallError::NotAnArchive {
            artifact: artifact.artifact.path.clone(),
            source: Box::new(source),
        })?;
    let decoded = archive.decoded_size();
    if decoded > artifact.artifact.unpack_limit() {
        return Err(InstallError::DecodesPastLimit {
            artifact: artifact.artifact.path.clone(),
            decoded,
            limit: artifact.artifact.unpack_limit(),
            declared: artifact.unpack_declared(),
        });
    }
    Ok(archive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_paths_leaving_the_prefix() {
        let path = |text: &str| text.parse::<RelativePath>().unwrap();
        assert_eq!(
            safe_relative(Path::new("lib/a.so")).unwrap(),
            path("lib/a.so")
        );
        assert_eq!(
            safe_relative(Path::new("./lib/./a.so")).unwrap(),
            path("lib/a.so")
        );
        assert!(matches!(
            safe_relative(Path::new("lib\\a.so")),
            Err(UnsafePath::Unusable(_))
        ));
        assert!(safe_relative(Path::new("../etc/passwd")).is_err());
        assert!(safe_relative(Path::new("lib/../../x")).is_err());
        assert!(safe_relative(Path::new("/etc/passwd")).is_err());
    }

    #[test]
    fn links_must_resolve_inside_the_prefix() {
        let at = |text: &str| text.parse::<RelativePath>().unwrap();
        assert!(link_stays_inside(
            &at("lib/librocrand.so"),
            Path::new("librocrand.so.1")
        ));
        assert!(link_stays_inside(
            &at("lib/x/y"),
            Path::new("../../share/z")
        ));
        assert!(!link_stays_inside(
            &at("lib/x"),
            Path::new("../../etc/passwd")
        ));
        assert!(!link_stays_inside(&at("lib/x"), Path::new("/etc/passwd")));
        assert!(!link_stays_inside(&at("x"), Path::new("..")));
    }
}

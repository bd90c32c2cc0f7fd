//! Staging: artifacts unpacked into a directory beside the prefix's files
//! (same file system, so committing is renames), every path checked to stay
//! inside the prefix and every file hashed as it is written.

// Errors here name a file as it will be in the prefix, not its staging
// copy, so they pair the path with the error by hand instead of fs-err.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use kpack_repo_index::{HashingReader, InvalidValue, RelativePath, Sha256};

use super::record::InstalledFile;
use super::InstallError;

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
    Unusable(InvalidValue),
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
}

/// A relative path inside the prefix, checked: no absolute part, no `..`,
/// no empty or `.` components, nothing [`RelativePath`] refuses.
pub fn safe_relative(path: &Path) -> Result<RelativePath, UnsafePath> {
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
pub struct StageDir<'a> {
    pub dir: &'a Path,
    pub prefix: &'a Path,
}

impl StageDir<'_> {
    /// Where `relative` is staged.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }

    /// An I/O error on the staged `relative`, named as in the prefix.
    pub fn failed(&self, relative: &str) -> impl FnOnce(std::io::Error) -> InstallError {
        let path = self.prefix.join(relative);
        move |source| InstallError::Write { path, source }
    }
}

/// Whether a symbolic link at `at` (relative to the prefix) pointing to
/// `target` stays inside the prefix.
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
pub type StagedFiles = BTreeMap<RelativePath, InstalledFile>;

/// Unpacks a tree artifact (a zstd-compressed tar) into `stage`.
pub fn extract_tree(
    archive: &Path,
    artifact: &RelativePath,
    stage: StageDir<'_>,
    files: &mut StagedFiles,
) -> Result<(), InstallError> {
    let bad = |entry: &str, problem: EntryProblem| InstallError::UnsafeEntry {
        artifact: artifact.clone(),
        entry: entry.to_owned(),
        problem,
    };
    let unreadable = |entry: &str, error: std::io::Error| {
        bad(entry, EntryProblem::Unreadable(error.to_string()))
    };
    let file = fs_err::File::open(archive)?;
    let decoder = zstd::Decoder::new(file).map_err(|e| unreadable("(archive)", e))?;
    let mut tar = tar::Archive::new(decoder);
    let entries = tar.entries().map_err(|e| unreadable("(archive)", e))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| unreadable("(archive)", e))?;
        let raw = entry
            .path()
            .map_err(|e| unreadable("(entry name)", e))?
            .into_owned();
        let shown = raw.display().to_string();
        let kind = entry.header().entry_type();
        if kind.is_dir() && safe_relative(&raw) == Err(UnsafePath::Empty) {
            continue;
        }
        let relative = safe_relative(&raw).map_err(|reason| bad(&shown, reason.into()))?;
        check_place(&relative, stage).map_err(|problem| bad(&shown, problem))?;
        let destination = stage.path(relative.as_str());
        for dir in relative.parents() {
            create_dir(stage, &dir)?;
        }
        if kind.is_dir() {
            create_dir(stage, &relative)?;
            continue;
        }
        // A later entry for the same path replaces the earlier one.
        remove_any(&destination).map_err(stage.failed(relative.as_str()))?;
        let file = if kind.is_symlink() {
            let target = entry
                .link_name()
                .map_err(|e| unreadable(&shown, e))?
                .ok_or_else(|| bad(&shown, EntryProblem::NoLinkTarget))?
                .into_owned();
            stage_link(&relative, &target, stage).map_err(|problem| match problem {
                Ok(problem) => bad(&shown, problem),
                Err(error) => error,
            })?
        } else if kind.is_file() {
            let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
            stage_file(&mut entry, &relative, mode, stage)?
        } else {
            return Err(bad(&shown, EntryProblem::Kind(format!("{kind:?}"))));
        };
        files.insert(relative, file);
    }
    Ok(())
}

/// Refuses entries that would touch kpack-get's own files or write through
/// a symbolic link an earlier entry made.
fn check_place(relative: &RelativePath, stage: StageDir<'_>) -> Result<(), EntryProblem> {
    let text = relative.as_str();
    if text == ".kpack" || text.starts_with(".kpack/.") {
        return Err(EntryProblem::Bookkeeping);
    }
    for dir in relative.parents() {
        let meta = std::fs::symlink_metadata(stage.path(dir.as_str()));
        if meta.is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(EntryProblem::UnderLink);
        }
    }
    Ok(())
}

fn create_dir(stage: StageDir<'_>, relative: &RelativePath) -> Result<(), InstallError> {
    std::fs::create_dir_all(stage.path(relative.as_str())).map_err(stage.failed(relative.as_str()))
}

/// A symbolic link entry, if it points inside the prefix; the outer error
/// is a refusal, the inner one a failure to write.
fn stage_link(
    relative: &RelativePath,
    target: &Path,
    stage: StageDir<'_>,
) -> Result<InstalledFile, Result<EntryProblem, InstallError>> {
    if !link_stays_inside(relative, target) {
        return Err(Ok(EntryProblem::LinkOutside(target.to_owned())));
    }
    let link = target.to_str().ok_or(Ok(EntryProblem::LinkNotUtf8))?;
    std::os::unix::fs::symlink(target, stage.path(relative.as_str()))
        .map_err(|e| Err(stage.failed(relative.as_str())(e)))?;
    Ok(InstalledFile {
        path: relative.clone(),
        sha256: None,
        size: None,
        link: Some(link.to_owned()),
    })
}

/// A regular file entry, hashed as it is written.
fn stage_file(
    reader: &mut impl Read,
    relative: &RelativePath,
    mode: u32,
    stage: StageDir<'_>,
) -> Result<InstalledFile, InstallError> {
    let destination = stage.path(relative.as_str());
    let failed = || stage.failed(relative.as_str());
    let mut out = File::create(&destination).map_err(failed())?;
    let mut hashing = HashingReader::new(reader);
    std::io::copy(&mut hashing, &mut out).map_err(failed())?;
    let (sha256, size) = hashing.finish();
    std::fs::set_permissions(&destination, std::fs::Permissions::from_mode(mode))
        .map_err(failed())?;
    Ok(InstalledFile {
        path: relative.clone(),
        sha256: Some(sha256),
        size: Some(size),
        link: None,
    })
}

/// Puts a verified archive at `relative` in `stage`.
pub fn place_file(
    blob: &Path,
    relative: &RelativePath,
    sha256: Sha256,
    size: u64,
    stage: StageDir<'_>,
    files: &mut StagedFiles,
) -> Result<(), InstallError> {
    let destination = stage.path(relative.as_str());
    let failed = || stage.failed(relative.as_str());
    for dir in relative.parents() {
        create_dir(stage, &dir)?;
    }
    remove_any(&destination).map_err(failed())?;
    // A link to the cached file costs no copy and no second flush to disk;
    // another file system (or one without links) gets a copy. Archives are
    // read-only either way, which also keeps the cached copy intact.
    if std::fs::hard_link(blob, &destination).is_err() {
        std::fs::copy(blob, &destination).map_err(failed())?;
    }
    std::fs::set_permissions(&destination, std::fs::Permissions::from_mode(0o444))
        .map_err(failed())?;
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

/// Removes a file or link, or nothing.
fn remove_any(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
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

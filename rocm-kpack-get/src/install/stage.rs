//! Staging: artifacts unpacked into a directory beside the prefix's files
//! (same file system, so committing is renames), every path checked to stay
//! inside the prefix and every file hashed as it is written.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use kpack_repo_index::{HashingReader, Sha256};

use super::record::InstalledFile;
use super::InstallError;

/// Why a path from an archive cannot be placed in the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UnsafePath {
    #[error("not UTF-8")]
    NotUtf8,
    #[error("contains '..'")]
    ParentDir,
    #[error("is absolute")]
    Absolute,
    #[error("is empty")]
    Empty,
}

/// A relative path inside the prefix, checked: no absolute part, no `..`,
/// no empty or `.` components, no NUL.
pub fn safe_relative(path: &Path) -> Result<String, UnsafePath> {
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
    Ok(parts.join("/"))
}

/// Whether a symbolic link at `at` (relative to the prefix) pointing to
/// `target` stays inside the prefix.
fn link_stays_inside(at: &str, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    // Depth below the prefix of the link's directory.
    let mut depth = at.split('/').count() as i64 - 1;
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
pub type StagedFiles = BTreeMap<String, InstalledFile>;

/// Unpacks a tree artifact (a zstd-compressed tar) under `root`.
pub fn extract_tree(
    archive: &Path,
    artifact: &str,
    root: &Path,
    files: &mut StagedFiles,
) -> Result<(), InstallError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| InstallError::Io { path, source }
    };
    let bad = |entry: &str, reason: &str| InstallError::UnsafeEntry {
        artifact: artifact.to_owned(),
        entry: entry.to_owned(),
        reason: reason.to_owned(),
    };
    let file = File::open(archive).map_err(io(archive))?;
    let decoder = zstd::Decoder::new(file).map_err(io(archive))?;
    let mut tar = tar::Archive::new(decoder);
    let entries = tar
        .entries()
        .map_err(|e| bad("(archive)", &e.to_string()))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| bad("(archive)", &e.to_string()))?;
        let raw = entry
            .path()
            .map_err(|e| bad("(entry name)", &e.to_string()))?
            .into_owned();
        let shown = raw.display().to_string();
        let kind = entry.header().entry_type();
        if kind.is_dir() && safe_relative(&raw) == Err(UnsafePath::Empty) {
            continue;
        }
        let relative = safe_relative(&raw).map_err(|reason| bad(&shown, &reason.to_string()))?;
        if relative == ".kpack" || relative.starts_with(".kpack/.") {
            return Err(bad(&shown, "is kpack-get's own bookkeeping"));
        }
        // An earlier entry may have made a parent a symbolic link; writing
        // through it could land anywhere.
        for dir in parent_dirs(&relative) {
            if std::fs::symlink_metadata(root.join(&dir)).is_ok_and(|m| m.file_type().is_symlink())
            {
                return Err(bad(&shown, "lies under a symbolic link"));
            }
        }
        let destination = root.join(&relative);
        if let Some(parent) = destination.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        if kind.is_dir() {
            std::fs::create_dir_all(&destination).map_err(io(&destination))?;
            continue;
        }
        // A later entry for the same path replaces the earlier one.
        remove_any(&destination).map_err(io(&destination))?;
        if kind.is_symlink() {
            let target = entry
                .link_name()
                .map_err(|e| bad(&shown, &e.to_string()))?
                .ok_or_else(|| bad(&shown, "a symbolic link without a target"))?
                .into_owned();
            if !link_stays_inside(&relative, &target) {
                return Err(bad(
                    &shown,
                    &format!("links to {} outside the prefix", target.display()),
                ));
            }
            std::os::unix::fs::symlink(&target, &destination).map_err(io(&destination))?;
            let link = target
                .to_str()
                .ok_or_else(|| bad(&shown, "link target is not UTF-8"))?
                .to_owned();
            files.insert(
                relative.clone(),
                InstalledFile {
                    path: relative,
                    sha256: None,
                    size: None,
                    link: Some(link),
                },
            );
        } else if kind.is_file() {
            let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
            let (sha256, size) = write_hashed(&mut entry, &destination)?;
            std::fs::set_permissions(&destination, std::fs::Permissions::from_mode(mode))
                .map_err(io(&destination))?;
            files.insert(
                relative.clone(),
                InstalledFile {
                    path: relative,
                    sha256: Some(sha256),
                    size: Some(size),
                    link: None,
                },
            );
        } else {
            return Err(bad(
                &shown,
                &format!(
                    "is a {:?} entry; trees hold files, directories and symbolic links only",
                    kind
                ),
            ));
        }
    }
    Ok(())
}

/// Puts a verified archive at `relative` under `root`.
pub fn place_file(
    blob: &Path,
    relative: &str,
    sha256: Sha256,
    size: u64,
    root: &Path,
    files: &mut StagedFiles,
) -> Result<(), InstallError> {
    let destination = root.join(relative);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| InstallError::Io { path, source }
    };
    if let Some(parent) = destination.parent() {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    remove_any(&destination).map_err(io(&destination))?;
    // A link to the cached file costs no copy and no second flush to disk;
    // another file system (or one without links) gets a copy. Archives are
    // read-only either way, which also keeps the cached copy intact.
    if std::fs::hard_link(blob, &destination).is_err() {
        std::fs::copy(blob, &destination).map_err(io(&destination))?;
    }
    std::fs::set_permissions(&destination, std::fs::Permissions::from_mode(0o444))
        .map_err(io(&destination))?;
    files.insert(
        relative.to_owned(),
        InstalledFile {
            path: relative.to_owned(),
            sha256: Some(sha256),
            size: Some(size),
            link: None,
        },
    );
    Ok(())
}

fn write_hashed(reader: &mut impl Read, destination: &Path) -> Result<(Sha256, u64), InstallError> {
    let io = |source| InstallError::Io {
        path: destination.to_owned(),
        source,
    };
    let mut out = File::create(destination).map_err(io)?;
    let mut hashing = HashingReader::new(reader);
    std::io::copy(&mut hashing, &mut out).map_err(io)?;
    Ok(hashing.finish())
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

/// The directories that must exist for `path` (relative), outermost first.
pub fn parent_dirs(path: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Path::new(path)
        .ancestors()
        .skip(1)
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_owned)
        .collect();
    dirs.reverse();
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_paths_leaving_the_prefix() {
        assert_eq!(safe_relative(Path::new("lib/a.so")).unwrap(), "lib/a.so");
        assert_eq!(
            safe_relative(Path::new("./lib/./a.so")).unwrap(),
            "lib/a.so"
        );
        assert!(safe_relative(Path::new("../etc/passwd")).is_err());
        assert!(safe_relative(Path::new("lib/../../x")).is_err());
        assert!(safe_relative(Path::new("/etc/passwd")).is_err());
    }

    #[test]
    fn links_must_resolve_inside_the_prefix() {
        assert!(link_stays_inside(
            "lib/librocrand.so",
            Path::new("librocrand.so.1")
        ));
        assert!(link_stays_inside("lib/x/y", Path::new("../../share/z")));
        assert!(!link_stays_inside("lib/x", Path::new("../../etc/passwd")));
        assert!(!link_stays_inside("lib/x", Path::new("/etc/passwd")));
        assert!(!link_stays_inside("x", Path::new("..")));
    }

    #[test]
    fn parent_dirs_are_outermost_first() {
        assert_eq!(
            parent_dirs("a/b/c.so"),
            [PathBuf::from("a"), PathBuf::from("a/b")]
        );
        assert!(parent_dirs("c.so").is_empty());
    }
}

//! What a publisher is given: a version to add, its artifacts, the fat
//! packages it was built from, and a version staged in the pool.

use std::path::{Path, PathBuf};

use fs_err as fs;
use kpack_repo_index::schema::{Artifact, BuiltFrom, SourceKind};
use kpack_repo_index::types::{Component, Dependency, Listed, PackageName};

/// A version to add: which, what it depends on in the repository and on
/// the system, and the package's summary (kept from before when `None`).
#[derive(Debug, Clone)]
pub struct NewVersion {
    pub name: PackageName,
    pub version: semver::Version,
    pub depends: Vec<Dependency>,
    pub system_requires: Vec<String>,
    pub summary: Option<String>,
    /// The fat packages it was built from, where known.
    pub built_from: Vec<BuiltFrom>,
}

impl NewVersion {
    /// `version` of `name`, with no dependencies and no summary.
    pub fn new(name: &PackageName, version: &semver::Version) -> NewVersion {
        NewVersion {
            name: name.clone(),
            version: version.clone(),
            depends: Vec::new(),
            system_requires: Vec::new(),
            summary: None,
            built_from: Vec::new(),
        }
    }
}

/// The fat package at `path` a version is built from, under its
/// distribution's name `package` where it has one: its file name and size.
pub fn built_from(path: &Path, package: Option<String>) -> std::io::Result<BuiltFrom> {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(BuiltFrom {
        kind: SourceKind::of_file(&file),
        size: fs::metadata(path)?.len(),
        file,
        package,
    })
}

/// A version whose artifacts are in the pool, ready to publish.
#[derive(Debug, Clone)]
pub struct Staged {
    pub new: NewVersion,
    pub(super) artifacts: Vec<Artifact>,
}

impl Staged {
    /// Bytes of its artifacts.
    pub fn bytes(&self) -> u64 {
        self.artifacts.iter().map(|a| a.size).sum()
    }
}

/// An artifact to add: a file, the targets it serves if it is device code
/// that does not say so itself, and the component of device code it is.
#[derive(Debug, Clone)]
pub struct NewArtifact {
    pub file: PathBuf,
    /// For trees: the targets of a device tree. Ignored for `.kpack` files,
    /// whose targets are read from their table of contents.
    pub targets: Option<Vec<Listed>>,
    /// For trees: the sub-family or family whose GPUs all need it, in place
    /// of targets.
    pub owner: Option<kpack_gpu::Owner>,
    /// The component of device code it is (a kernel database payload:
    /// `tensile`); none for the default, `kernels`, the component of a fat
    /// library's `.kpack` archives. Only device code has one.
    pub component: Option<Component>,
    /// For a tree: the length of its tar stream, when whoever wrote it
    /// counted it; otherwise the file is decoded to count it. Ignored for
    /// `.kpack` files, whose table of contents gives it.
    pub unpacked_size: Option<u64>,
}

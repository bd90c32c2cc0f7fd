//! Why a repository cannot be written, and what is wrong with an artifact
//! given to publish.

use std::path::PathBuf;

use crate::store::StoreError;
use kpack_repo_index::schema::SchemaError;
use kpack_repo_index::sign::SignError;
use kpack_repo_index::types::PackageName;

/// Why a repository cannot be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// A file-system call failed; the error names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Write(#[from] kpack_fs::PathError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{location}: no index to regenerate")]
    NoIndex { location: String },
    #[error("{location}: already published with different bytes; published files never change")]
    Immutable { location: String },
    #[error("{}: {problem}", path.display())]
    Artifact {
        path: PathBuf,
        #[source]
        problem: BadArtifact,
    },
    /// A `.kpack` artifact that cannot be read; the error names the path.
    #[error(transparent)]
    Archive(#[from] rocm_kpack::Error),
    #[error("{name} {version} is already published")]
    VersionExists {
        name: PackageName,
        version: semver::Version,
    },
    #[error("{location}: gave up after {attempts} publishes by others came in between")]
    Contended { location: String, attempts: usize },
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error(transparent)]
    Sign(#[from] SignError),
}

/// What is wrong with an artifact given to publish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BadArtifact {
    #[error("no usable file name")]
    NoFileName,
    #[error(transparent)]
    Path(#[from] kpack_repo_index::types::InvalidValue),
    #[error("an artifact is a .kpack archive or a .tar.zst tree")]
    Kind,
    #[error("a tree is device code for targets or for an owner, not both")]
    TargetsAndOwner,
    #[error("a component names device code: give the tree its targets")]
    ComponentWithoutDevice,
    #[error("not a zstd-compressed tree: {0}")]
    NotATree(#[source] std::io::Error),
}

/// The error for a file an index names that is not there.
pub(super) fn missing(location: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{location}: named by the index but not found"),
    )
}

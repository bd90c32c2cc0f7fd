//! Why a change to a prefix failed.

use std::path::PathBuf;

use kpack_fs::confined::ConfinedError;
use kpack_repo_index::{PackageName, RelativePath};

use super::future::LinkProblem;
use super::lock_holder::LockHolder;
use super::stage::EntryProblem;

/// Why a change to a prefix failed. The prefix is left as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// The prefix's bookkeeping or the cache (the error names the path).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A file of the change, named as it will be in the prefix.
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{artifact}: entry {entry:?} {problem}; refused")]
    UnsafeEntry {
        artifact: RelativePath,
        entry: String,
        problem: EntryProblem,
    },
    #[error("{path} is installed by {owner}; {package} would overwrite it")]
    OwnedByOther {
        path: RelativePath,
        owner: PackageName,
        package: PackageName,
    },
    #[error("{path} exists in {prefix} and was not installed by kpack-get; {package} would overwrite it")]
    Unowned {
        path: RelativePath,
        prefix: PathBuf,
        package: PackageName,
    },
    #[error(
        "{path} is a file{}; {package} needs a directory there for {needed_by}",
        installed_by(owner)
    )]
    NotADirectory {
        path: RelativePath,
        needed_by: RelativePath,
        package: PackageName,
        owner: Option<PackageName>,
    },
    #[error("{path} is a directory in the prefix; {package} would put a file there")]
    DirectoryInTheWay {
        path: RelativePath,
        package: PackageName,
    },
    #[error("{package}: {path} links to {target}, which {problem}; refused")]
    LinkRefused {
        package: PackageName,
        path: RelativePath,
        target: String,
        problem: LinkProblem,
    },
    #[error("{artifact}: not a kpack archive; refused")]
    NotAnArchive {
        artifact: RelativePath,
        #[source]
        source: Box<rocm_kpack::Error>,
    },
    #[error("{path}: cannot be made fat for the installed GPUs")]
    Materialize {
        path: RelativePath,
        #[source]
        source: Box<kpack_binary::Error>,
    },
    #[error("{artifact}: unpacks to more than {limit} bytes, more than the index allows; refused")]
    TooLarge { artifact: RelativePath, limit: u64 },
    #[error(
        "{artifact}: its code objects decode to {decoded} bytes, more than the {limit} bytes {}; refused",
        if *declared {
            "its shard declares (unpacked-size)"
        } else {
            "allowed to an archive whose shard declares no unpacked-size (256 times its size, at least 64 MiB)"
        }
    )]
    DecodesPastLimit {
        artifact: RelativePath,
        decoded: u64,
        limit: u64,
        declared: bool,
    },
    /// The package's split binaries would decode more than its archives
    /// declare, in all.
    #[error(transparent)]
    OverBudget(#[from] crate::decode_budget::OverBudget),
    /// A file-system operation in the prefix (the error names the path).
    #[error(transparent)]
    Confined(#[from] ConfinedError),
    #[error("{path}: {message}")]
    BadRecord { path: PathBuf, message: String },
    #[error(
        "{prefix} is being changed by {} (lock {lock})",
        holder.as_ref().map_or("another kpack-get".to_owned(), |h| h.to_string())
    )]
    Locked {
        prefix: PathBuf,
        lock: PathBuf,
        holder: Option<LockHolder>,
    },
    #[error(
        "{path} would be renamed across mounts: {} is not on the mount of {}, \
         where changes are staged; refused",
        mount.display(),
        staging.display()
    )]
    OtherFileSystem {
        path: RelativePath,
        mount: PathBuf,
        staging: PathBuf,
    },
    #[error("{path} cannot be removed: {} is a mount point; refused", mount.display())]
    MountPoint { path: RelativePath, mount: PathBuf },
    #[error("{name} is not installed in {prefix}")]
    NotInstalled { name: PackageName, prefix: PathBuf },
}

impl From<kpack_fs::PathError> for InstallError {
    fn from(error: kpack_fs::PathError) -> InstallError {
        InstallError::Io(error.into())
    }
}

/// ` (installed by NAME)` or ` not installed by kpack-get`.
fn installed_by(owner: &Option<PackageName>) -> String {
    match owner {
        Some(owner) => format!(" installed by {owner}"),
        None => " not installed by kpack-get".to_owned(),
    }
}

impl InstallError {
    /// The underlying I/O error, for exit codes and hints.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            InstallError::Io(source) | InstallError::Write { source, .. } => Some(source.kind()),
            InstallError::Confined(error) => Some(error.kind()),
            _ => None,
        }
    }
}

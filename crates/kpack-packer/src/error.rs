//! Errors of the packer library.

use std::path::PathBuf;

pub use kpack_binary::{BundleError, ElfError, ImageError, PeError, ProgramHeaderError};

/// Everything the packer library can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The code objects of a binary's bundle (its TOC key) cannot be read.
    #[error("{binary}: cannot read its code objects")]
    Code {
        binary: rocm_kpack::BinaryKey,
        #[source]
        source: BundleError,
    },
    /// A bundle's code objects, read as a stream, are bad (the caller
    /// names the binary).
    #[error(transparent)]
    Bundle(#[from] BundleError),
    #[error("{}: cannot split", path.display())]
    Split {
        path: PathBuf,
        #[source]
        source: ImageError,
    },
    /// A file-system call failed; the error (from fs-err or tempfile)
    /// names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Writing a file atomically failed.
    #[error(transparent)]
    Write(#[from] kpack_fs::PathError),
    #[error("{}: the output already exists", path.display())]
    OutputExists { path: PathBuf },
    #[error("{}: not a fat binary (no .hip_fatbin section)", path.display())]
    NotFat { path: PathBuf },
    #[error("{}: neither a file nor a directory", path.display())]
    NotAFile { path: PathBuf },
    #[error("{}: cannot be read as the original fat binary", path.display())]
    Original {
        path: PathBuf,
        #[source]
        source: ImageError,
    },
    #[error("{}: no directory beside it can hold the database payloads", path.display())]
    NoPayloadDir { path: PathBuf },
    #[error(
        "{} and {}: both database files would be stored under the key {key:?}",
        first.display(),
        second.display()
    )]
    DatabaseKeyClash {
        key: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error(transparent)]
    Sign(#[from] kpack_sign::SigningError),
    #[error(transparent)]
    Runtime(#[from] rocm_kpack::Error),
    #[error(transparent)]
    Key(#[from] kpack_sign::KeyError),
    /// Reading, splitting or materializing a binary.
    #[error(transparent)]
    Binary(#[from] kpack_binary::Error),
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

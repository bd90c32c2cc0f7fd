//! The kpack runtime: the archive format (reader and writer), GPU targets
//! (from `kpack-gpu`),
//! the loader that finds a binary's device code through its marker, and
//! `librocm_kpack`, a drop-in for ROCm's reference C API.
//!
//! ```no_run
//! use rocm_kpack::{Archive, Target};
//!
//! let archive = Archive::open("rocm_gfx90a.kpack")?;
//! let target = Target::parse("gfx90a:xnack-")?;
//! let code = archive.kernel("lib/librocrand.so.1.1#0", &target)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod error;
pub mod format;
pub mod loader;
mod msgpack;
mod read;
mod recode;
mod write;

pub mod capi;
pub mod discover;

pub use error::{Error, ErrorCode, Result};
pub use format::{Metadata, Scheme};
pub use kpack_gpu::{ParseTargetError, Target};
pub use loader::{Loader, LoaderConfig, Marker};
pub use read::{Archive, Kernel};
pub use recode::recode;
pub use write::{
    ArchiveOptions, ArchiveWriter, BinaryKey, CodeSource, Compression, EntryMetadata, PreparedBlob,
    StoredBlob,
};

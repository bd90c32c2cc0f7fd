//! The packer: splits fat binaries, install trees and wheels into host-only
//! binaries plus per-target kpack archives.
//!
//! In place: bundle parsing (offload bundles, CCOB v1-v3), ELF surgery,
//! per-processor archives and `kpack-pack split` for one file and
//! `kpack-pack inspect`. To come: trees, wheels, family archives, signing,
//! `verify`.

pub mod archive;
pub mod bundle;
pub mod cli;
pub mod elf;
pub mod error;
pub mod input;
pub mod sign;
pub mod split;
pub mod tree;
pub mod verify;

pub use error::{BundleError, ElfError, Error, Result};

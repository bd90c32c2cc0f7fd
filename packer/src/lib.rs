//! The packer: splits fat binaries, install trees and wheels into host-only
//! binaries plus per-target kpack archives.
//!
//! Work in progress: bundle parsing, ELF surgery and per-processor archives
//! are in place; trees, wheels, signing and the `kpack-pack` CLI follow.

pub mod archive;
pub mod bundle;
pub mod elf;
pub mod error;
pub mod split;

pub use error::{BundleError, ElfError, Error, Result};

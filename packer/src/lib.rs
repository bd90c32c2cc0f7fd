//! The packer: splits fat binaries, install trees and wheels into host-only
//! binaries plus per-target kpack archives.
//!
//! Work in progress: bundle parsing (uncompressed and compressed offload
//! bundles) is in place; ELF surgery, archives and the `kpack-pack` CLI
//! follow.

pub mod bundle;
pub mod elf;
pub mod error;

pub use error::{BundleError, ElfError, Error, Result};

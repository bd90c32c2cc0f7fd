//! The packer: splits fat binaries, install trees and wheels into host-only
//! binaries plus per-target kpack archives.
//!
//! Fat ELF files and install trees are split (`split`, `tree`) with the
//! bundle readers and ELF surgery of `kpack-binary`: code objects are
//! written to per-processor or per-family archives (`archive`) and signed
//! (`sign`), on every core within a memory budget (`pipeline`, `spool`);
//! kernel database files (rocBLAS, hipBLASLt, AOTriton, MIOpen, rocFFT),
//! recognised by path, and loose code objects, recognised by content, are
//! routed to their owners by one rule for trees and wheels (`route`) into
//! payloads, device wheels or archives (`databases`); `verify` checks the result through the runtime's loader;
//! `deps` lists the archives split binaries need at run time. Wheels are
//! split into a host wheel and per-processor device wheels (`wheel`).

pub mod archive;
pub mod databases;
pub mod deps;
pub mod error;
pub mod pipeline;
pub mod route;
pub mod sign;
pub mod split;
mod spool;
pub mod tree;
pub mod verify;
pub mod wheel;

pub use error::{BundleError, ElfError, Error, ImageError, PeError, ProgramHeaderError, Result};

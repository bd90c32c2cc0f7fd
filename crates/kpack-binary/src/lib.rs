//! Binaries carrying GPU device code, read and rewritten as their formats
//! say: loose and embedded code objects (`code_object`), offload bundles and compressed bundles (`bundle`), fat and split
//! ELF files, the plan that splits one and the plan that makes one fat
//! again (`elf`), the HIP wrapper record they share with PE (`wrapper`),
//! what kind of binary a file is (`sniff`), mapped inputs
//! (`input`), materializing split binaries from kpack archives
//! (`materialize`), and the kernel database files libraries keep beside
//! them (`databases`).
//!
//! The packer splits with it; kpack-get checks and materializes with it and
//! never links the packer.

pub mod bundle;
pub mod code_object;
pub mod databases;
pub mod elf;
pub mod error;
mod format;
pub mod image;
pub mod input;
pub mod materialize;
pub mod pe;
pub mod sniff;
mod stream;
pub mod wrapper;

pub use error::{BundleError, ElfError, Error, ImageError, PeError, ProgramHeaderError, Result};
pub use format::BinaryFormat;

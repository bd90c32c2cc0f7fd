//! Helpers for the packer's integration tests: fixtures, the runtime's C
//! library, the stand-in HIP runtime and binutils' view of split files, all
//! from the workspace's test-support crate.
#![allow(unused_imports)]

pub use kpack_test_support::elf_checks::*;
pub use kpack_test_support::hip::*;
pub use kpack_test_support::{fixtures, run, unpack_rocrand};

//! ELF fat binaries: finding their bundles and wrappers, rewriting them
//! into host-only files ([`SplitPlan`]), and host-only files back into fat
//! ones for chosen targets ([`MaterializePlan`]); the program header rule
//! executables must keep for old kernels ([`check_program_headers`]).

mod beside;
mod evict;
mod file;
mod materialize;
mod parse;
mod pointer;
mod program_headers;
mod records;
mod surgery;

pub use file::{ElfKind, Machine, SectionRange};
pub use materialize::MaterializePlan;
pub use parse::{FatElf, SplitElf, SplitWrapper, Wrapper};
pub use pointer::PointerSource;
pub use program_headers::{check_program_headers, ProgramHeaderRule};
pub use surgery::{SplitLayout, SplitPlan};

/// The section holding the offload bundles.
pub const FATBIN_SECTION: &str = ".hip_fatbin";
/// The section holding the 24-byte wrapper structs.
pub const WRAPPER_SECTION: &str = ".hipFatBinSegment";
/// The section a split adds, holding the kpack marker the `HIPK`
/// wrappers point at.
pub const MARKER_SECTION: &str = rocm_kpack::format::ELF_MARKER_SECTION;

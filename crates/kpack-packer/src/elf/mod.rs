//! ELF fat binaries: finding their bundles and wrappers, rewriting them
//! into host-only files ([`split_elf`]), and host-only files back into fat
//! ones for chosen targets ([`MaterializePlan`]); the program header rule
//! executables must keep for old kernels ([`check_program_headers`]).

mod beside;
mod evict;
mod materialize;
mod parse;
mod program_headers;
mod records;
mod surgery;

pub use materialize::MaterializePlan;
pub use parse::{
    ElfKind, FatElf, Machine, PointerSource, SectionRange, SplitElf, SplitWrapper, Wrapper,
};
pub use program_headers::{check_program_headers, ProgramHeaderRule};
pub use records::HipWrapper;
pub use surgery::{split_elf, SplitLayout, SplitPlan, MARKER_SECTION};

/// The section holding the offload bundles.
pub const FATBIN_SECTION: &str = ".hip_fatbin";
/// The section holding the 24-byte wrapper structs.
pub const WRAPPER_SECTION: &str = ".hipFatBinSegment";
/// Wrapper magic of a fat binary ("HIPF").
pub const HIPF_MAGIC: u32 = 0x4849_5046;
/// Wrapper magic after a split ("HIPK").
pub const HIPK_MAGIC: u32 = 0x4B50_4948;
/// Size of one wrapper struct.
pub const WRAPPER_SIZE: u64 = 24;

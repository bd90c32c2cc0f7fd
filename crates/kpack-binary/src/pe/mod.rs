//! PE/COFF fat images (09-windows.md): finding their bundles and
//! wrappers ([`FatPe`], [`SplitPe`]), rewriting them into host-only
//! images ([`SplitPlan`]) and host-only images back into fat ones for
//! chosen targets ([`MaterializePlan`]). A wrapper's pointer is an absolute address the
//! loader fixes up through a `DIR64` base relocation; its bundle is the
//! one the pointer lands on.

#[cfg(feature = "test-fixtures")]
pub mod build;
mod checksum;
mod edits;
mod image;
mod layout;
mod materialize;
mod parse;
mod relocs;
mod split;

pub use materialize::MaterializePlan;
pub use parse::{FatPe, PeSection, PeWrapper, SplitPe, SplitPeWrapper};
pub use split::{SplitLayout, SplitPlan};

/// The section holding the offload bundles (section names in an image's
/// table are 8 bytes, NUL-padded).
pub const FATBIN_SECTION: &str = ".hip_fat";
/// The section holding the 24-byte wrapper structs.
pub const WRAPPER_SECTION: &str = ".hipFatB";
/// The section a split adds, holding the kpack marker the `HIPK` wrappers
/// point at.
pub const MARKER_SECTION: &str = rocm_kpack::format::PE_MARKER_SECTION;
/// The section linkers put the base relocation table in.
pub const RELOC_SECTION: &str = ".reloc";

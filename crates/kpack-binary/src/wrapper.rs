//! The 24-byte record a HIP binary registers a translation unit's device
//! code with, whatever the container: one per unit in ELF's
//! `.hipFatBinSegment` (PE's `.hipFatB`), `HIPF` in a fat binary and
//! `HIPK` after a split (02-runtime.md).

use object::{LittleEndian, Pod, U32, U64};

/// Wrapper magic of a fat binary ("HIPF").
pub const HIPF_MAGIC: u32 = 0x4849_5046;
/// Wrapper magic after a split ("HIPK").
pub const HIPK_MAGIC: u32 = 0x4B50_4948;
/// Size of one wrapper record.
pub const WRAPPER_SIZE: u64 = std::mem::size_of::<HipWrapper>() as u64;
/// Where the pointer field lies in a wrapper record.
pub const POINTER_OFFSET: u64 = 8;

/// A wrapper: `HIPF` pointing at an offload bundle in a fat binary, `HIPK`
/// pointing at the kpack marker, with the bundle index in the low half of
/// `reserved`, after a split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct HipWrapper {
    pub magic: U32<LittleEndian>,
    pub version: U32<LittleEndian>,
    pub pointer: U64<LittleEndian>,
    pub reserved: U64<LittleEndian>,
}

// SAFETY: four fields of byte arrays, no padding, any bit pattern valid.
unsafe impl Pod for HipWrapper {}

impl HipWrapper {
    /// A wrapper with `magic`, version 1, `pointer` and `reserved`.
    pub fn new(magic: u32, pointer: u64, reserved: u64) -> HipWrapper {
        HipWrapper {
            magic: U32::new(LittleEndian, magic),
            version: U32::new(LittleEndian, 1),
            pointer: U64::new(LittleEndian, pointer),
            reserved: U64::new(LittleEndian, reserved),
        }
    }

    /// The bundle index a split stores in the low 32 bits of `reserved`.
    pub fn bundle_index(&self) -> u32 {
        (self.reserved.get(LittleEndian) & u64::from(u32::MAX)) as u32
    }
}

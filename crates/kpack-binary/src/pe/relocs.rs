//! The base relocation table (`.reloc`, data directory 5): which RVAs the
//! loader fixes up when the image loads away from its preferred base. A
//! wrapper's pointer must be one of them, as a 64-bit `DIR64` entry.

use object::pe::{
    ImageBaseRelocation, IMAGE_DIRECTORY_ENTRY_BASERELOC, IMAGE_FILE_RELOCS_STRIPPED,
    IMAGE_REL_BASED_DIR64,
};
use object::{LittleEndian, U16};

use super::image::{record, records, Headers, LE};
use crate::error::PeError;
use crate::wrapper::POINTER_OFFSET;

/// The `DIR64` base relocations of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct BaseRelocations {
    /// RVAs of the 8-byte values the loader fixes up, sorted.
    dir64: Vec<u32>,
    /// Whether the image says it can only load at its preferred base.
    stripped: bool,
}

/// Size of a relocation block's header.
const BLOCK_HEADER: u32 = size_of::<ImageBaseRelocation>() as u32;

impl BaseRelocations {
    /// Reads the table of `data`, whose headers are `headers`: every block
    /// inside the table, the table inside one section's file data.
    pub fn read(data: &[u8], headers: &Headers) -> Result<BaseRelocations, PeError> {
        let stripped = headers
            .file
            .characteristics
            .get(LE)
            .contains(IMAGE_FILE_RELOCS_STRIPPED);
        let Some((rva, size)) = headers.directory(IMAGE_DIRECTORY_ENTRY_BASERELOC) else {
            return Ok(BaseRelocations {
                dir64: Vec::new(),
                stripped,
            });
        };
        let (table, available) = headers.rva_to_offset(rva).ok_or_else(|| {
            PeError::Malformed(format!(
                "the base relocation table at RVA {rva:#x} is in no section's file data"
            ))
        })?;
        if u64::from(size) > available {
            return Err(PeError::Malformed(format!(
                "the base relocation table at RVA {rva:#x} ({size} bytes) runs past its section's file data"
            )));
        }
        let table_end = table + u64::from(size);
        let mut dir64 = Vec::new();
        let mut at = table;
        while at < table_end {
            let block: &ImageBaseRelocation = record(data, at)
                .filter(|_| at + u64::from(BLOCK_HEADER) <= table_end)
                .ok_or(PeError::RelocationBlockPastTable {
                    offset: at,
                    size: BLOCK_HEADER,
                    table_end,
                })?;
            let block_size = block.size_of_block.get(LE);
            if block_size < BLOCK_HEADER || !block_size.is_multiple_of(2) {
                return Err(PeError::Malformed(format!(
                    "base relocation block at {at:#x} has size {block_size}"
                )));
            }
            if at + u64::from(block_size) > table_end {
                return Err(PeError::RelocationBlockPastTable {
                    offset: at,
                    size: block_size,
                    table_end,
                });
            }
            let page = block.virtual_address.get(LE);
            let entries: &[U16<LittleEndian>] = records(
                data,
                at + u64::from(BLOCK_HEADER),
                u64::from(block_size - BLOCK_HEADER),
            )
            .unwrap_or_default();
            for entry in entries {
                // ABSOLUTE entries pad blocks; other kinds cannot hold
                // a 64-bit pointer.
                let entry = entry.get(LE);
                if entry >> 12 == IMAGE_REL_BASED_DIR64.0 {
                    dir64.push(page.wrapping_add(u32::from(entry & 0xfff)));
                }
            }
            at += u64::from(block_size);
        }
        dir64.sort_unstable();
        Ok(BaseRelocations { dir64, stripped })
    }

    /// Whether the loader fixes up the 8 bytes at `rva` as a pointer, or
    /// never moves the image.
    pub fn covers(&self, rva: u32) -> bool {
        self.stripped || self.dir64.binary_search(&rva).is_ok()
    }
}

/// Checks that the loader fixes up the pointer of each wrapper (at its
/// RVA, in section order) of `data`, whose headers are `headers`: a
/// pointer without a `DIR64` base relocation is wrong wherever the image
/// loads away from its preferred base, and a split refuses it.
pub(super) fn check_wrappers(
    data: &[u8],
    headers: &Headers,
    wrappers: impl IntoIterator<Item = u32>,
) -> Result<(), PeError> {
    let relocations = BaseRelocations::read(data, headers)?;
    for (index, rva) in wrappers.into_iter().enumerate() {
        if !relocations.covers(rva + POINTER_OFFSET as u32) {
            return Err(PeError::BadWrapper {
                index,
                rva,
                message: "its pointer has no DIR64 base relocation".into(),
            });
        }
    }
    Ok(())
}

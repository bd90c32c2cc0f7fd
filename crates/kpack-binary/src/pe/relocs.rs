//! The base relocation table (`.reloc`, data directory 5): which RVAs the
//! loader fixes up when the image loads away from its preferred base. A
//! wrapper's pointer must be one of them, as a 64-bit `DIR64` entry.

use object::pe::{
    ImageBaseRelocation, IMAGE_DIRECTORY_ENTRY_BASERELOC, IMAGE_FILE_RELOCS_STRIPPED,
    IMAGE_REL_BASED_DIR64,
};
use object::{pod, LittleEndian, U16, U32};

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
    /// The table's file offset and length, where there is one.
    table: Option<(u64, u32)>,
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
                table: None,
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
        Ok(BaseRelocations {
            dir64,
            stripped,
            table: Some((table, size)),
        })
    }

    /// Whether the loader fixes up the 8 bytes at `rva` as a pointer, or
    /// never moves the image.
    pub fn covers(&self, rva: u32) -> bool {
        self.stripped || self.dir64.binary_search(&rva).is_ok()
    }

    /// This table (read from `data`) with a block of `DIR64` entries
    /// added for each page of `pointers` (RVAs) it does not cover; `None`
    /// when it covers them all.
    pub fn covering(
        &self,
        data: &[u8],
        pointers: impl IntoIterator<Item = u32>,
    ) -> Option<Vec<u8>> {
        let mut missing: Vec<u32> = pointers.into_iter().filter(|&p| !self.covers(p)).collect();
        if missing.is_empty() {
            return None;
        }
        missing.sort_unstable();
        missing.dedup();
        // `read` checked the table lies in the file.
        let mut table = self
            .table
            .and_then(|(at, size)| data.get(at as usize..at as usize + size as usize))
            .unwrap_or_default()
            .to_vec();
        table.extend(dir64_blocks(&missing));
        Some(table)
    }
}

/// Base relocation blocks holding a `DIR64` entry for each of `rvas`
/// (sorted): a block per 4 KiB page, each padded to 4 bytes with an
/// `ABSOLUTE` entry.
pub(super) fn dir64_blocks(rvas: &[u32]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for page in rvas.chunk_by(|a, b| a & !0xfff == b & !0xfff) {
        let entries = page.len().next_multiple_of(2) as u32;
        let block = ImageBaseRelocation {
            virtual_address: U32::new(LE, page[0] & !0xfff),
            size_of_block: U32::new(LE, BLOCK_HEADER + 2 * entries),
        };
        bytes.extend_from_slice(pod::bytes_of(&block));
        for rva in page {
            let entry = (IMAGE_REL_BASED_DIR64.0 << 12) | (rva & 0xfff) as u16;
            bytes.extend_from_slice(&entry.to_le_bytes());
        }
        bytes.resize(bytes.len().next_multiple_of(4), 0);
    }
    bytes
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

//! Turns a host-only PE image back into a fat one (09-windows.md,
//! "Materializing an image"), so a HIP runtime without kpack support
//! registers it:
//!
//! - the new bundles (each at a 4096-byte boundary in memory, as clang
//!   lays them out) become `.hip_fat`'s file data again, at its place in
//!   memory when they fit the memory the split kept; otherwise in a new
//!   `.hip_fat` section after every other one, the old one left unnamed;
//! - their data goes where the split took it from in the file (or after
//!   every section's data, for a new section);
//! - every wrapper becomes `HIPF`, points at its bundle and has
//!   `reserved` 0; the base relocation that covers its pointer stays.
//!   Where a pointer has none (the fat image would point at its bundle
//!   only at its preferred base), the table, with a `DIR64` entry added
//!   for each such pointer, moves to a new `.reloc` section after every
//!   other one, the old one left unnamed; the image written is read back
//!   to hold one for each;
//! - the marker's section is left unnamed: its bytes stay, but the image
//!   reads as a fat one to every reader, and a split of it writes a
//!   marker of its own.

use std::collections::BTreeMap;
use std::io::{self, Read, Seek, Write};

use kpack_hash::CountingWriter;
use object::pe::{
    IMAGE_DIRECTORY_ENTRY_BASERELOC, IMAGE_SCN_CNT_INITIALIZED_DATA, IMAGE_SCN_MEM_DISCARDABLE,
    IMAGE_SCN_MEM_READ,
};

use super::image::{file_range, section_name, Headers, LE};
use super::layout::{next_rva, put, record_mut, section_header, Appended, Rewrite};
use super::parse::SplitPe;
use super::relocs::{check_wrappers, BaseRelocations};
use super::{FATBIN_SECTION, RELOC_SECTION};
use crate::error::PeError;
use crate::stream::write_zeros;
use crate::wrapper::{HipWrapper, HIPF_MAGIC, POINTER_OFFSET};

/// Alignment of every bundle in memory, as clang's HIP toolchain lays
/// them out.
pub const BUNDLE_ALIGN: u64 = 4096;

/// How a host-only image becomes fat, planned from the bundles' lengths
/// so it can be written as a stream ([`MaterializePlan::write`]) and then
/// patched in place ([`MaterializePlan::patch`]).
#[derive(Debug)]
pub struct MaterializePlan {
    rewrite: Rewrite,
    fatbin: FatbinLayout,
    appended: Appended,
    /// A base relocation table that covers every wrapper's pointer, and
    /// where it goes, where the input's does not.
    relocations: Option<(Vec<u8>, u64)>,
}

impl MaterializePlan {
    /// Plans `data` (parsed as `split`) with bundle index N's bundle
    /// `bundle_lens[N]` bytes long.
    pub fn new(
        data: &[u8],
        split: &SplitPe<'_>,
        bundle_lens: &BTreeMap<u32, u64>,
    ) -> Result<MaterializePlan, PeError> {
        let input = &split.headers;
        let pointers = split.wrappers.iter().map(|w| w.rva + POINTER_OFFSET as u32);
        let relocations = BaseRelocations::read(data, input)?.covering(data, pointers);
        let in_place = FatbinLayout::plan(split.fatbin.rva, bundle_lens);
        let fits = in_place.len <= u64::from(split.fatbin.virtual_size);
        let fatbin = if fits {
            in_place
        } else {
            FatbinLayout::plan(next_rva(input)?, bundle_lens)
        };
        let new_sections = u64::from(!fits) + u64::from(relocations.is_some());
        let mut rewrite = Rewrite::new(data, input, new_sections)?;
        // In place, the data goes where the split took it from: before the
        // data of the sections after it in memory.
        let at = if fits {
            input
                .sections
                .iter()
                .filter(|s| s.virtual_address.get(LE) > split.fatbin.rva)
                .filter_map(|s| match file_range(s) {
                    (_, 0) => None,
                    (start, _) => Some(start),
                })
                .min()
                .unwrap_or(rewrite.sections_end())
        } else {
            rewrite.sections_end()
        };
        let appended = rewrite.insert_data(at, fatbin.len, true);
        let relocations_at = relocations
            .as_ref()
            .map(|table| rewrite.insert_data(rewrite.sections_end(), table.len() as u64, false));
        rewrite.move_file_data(data, input, None)?;
        let flags = IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ;
        let sections = &mut rewrite.headers.sections;
        sections[split.marker.index].name = [0; 8];
        if fits {
            let section = &mut sections[split.fatbin.index];
            let header = section_header(
                FATBIN_SECTION,
                split.fatbin.rva,
                u64::from(split.fatbin.virtual_size),
                (appended.offset, appended.raw_len),
                flags,
            )?;
            section.size_of_raw_data = header.size_of_raw_data;
            section.pointer_to_raw_data = header.pointer_to_raw_data;
        } else {
            sections[split.fatbin.index].name = [0; 8];
            let header = section_header(
                FATBIN_SECTION,
                fatbin.rva,
                fatbin.len,
                (appended.offset, appended.raw_len),
                flags,
            )?;
            rewrite.add_section(header)?;
        }
        rewrite.add_initialized_data(appended.raw_len as i64);
        let relocations = match (relocations, relocations_at) {
            (Some(table), Some(at)) => Some(add_relocations(&mut rewrite, table, at)?),
            _ => None,
        };
        Ok(MaterializePlan {
            rewrite,
            fatbin,
            appended,
            relocations,
        })
    }

    /// The fat image's length.
    pub fn output_len(&self) -> u64 {
        self.rewrite.output_len()
    }

    /// Writes the fat image, unpatched: the input read from `input` (at
    /// its start), each bundle written by `bundle` (by index) at its
    /// place. Every bundle must be as long as planned.
    pub fn write<R: Read + Seek, W: Write, E: From<io::Error>>(
        &self,
        input: &mut R,
        out: &mut W,
        mut bundle: impl FnMut(u32, &mut dyn Write) -> Result<(), E>,
    ) -> Result<(), E> {
        let Appended {
            padding, raw_len, ..
        } = self.appended;
        self.rewrite.write(input, out, |_, out| {
            write_zeros(out, padding)?;
            let mut at = 0;
            for (&index, &(offset, len)) in &self.fatbin.bundles {
                write_zeros(out, offset - at)?;
                // A bundle stops at its planned length.
                let mut counted = CountingWriter::with_limit(&mut *out, len);
                bundle(index, &mut counted)?;
                if counted.count() != len {
                    let message =
                        format!("bundle {index} has {} bytes, not {len}", counted.count());
                    return Err(io::Error::new(io::ErrorKind::InvalidData, message).into());
                }
                at = offset + len;
            }
            Ok(write_zeros(out, raw_len - at)?)
        })
    }

    /// Makes the written image (`out`, whole) fat: its headers, and every
    /// wrapper `HIPF` pointing at its bundle.
    pub fn patch(&self, out: &mut [u8], split: &SplitPe<'_>) -> Result<(), PeError> {
        self.rewrite.write_headers(out)?;
        let base = self.rewrite.headers.image_base() + u64::from(self.fatbin.rva);
        for wrapper in &split.wrappers {
            let (offset, _) = self.fatbin.bundles.get(&wrapper.bundle).ok_or_else(|| {
                PeError::Malformed(format!("no bundle for index {}", wrapper.bundle))
            })?;
            let at = self.rewrite.map(wrapper.file_offset, "a wrapper")?;
            let record: &mut HipWrapper = record_mut(out, at)?;
            record.magic.set(LE, HIPF_MAGIC);
            record.pointer.set(LE, base + offset);
            record.reserved.set(LE, 0);
        }
        if let Some((table, at)) = &self.relocations {
            put(out, *at, table)?;
        }
        // What a split of this image requires of it.
        let written = Headers::read(out)?
            .ok_or_else(|| PeError::Malformed("the image written is no PE image".into()))?;
        check_wrappers(out, &written, split.wrappers.iter().map(|w| w.rva))?;
        self.rewrite.write_checksum(out)
    }
}

/// Adds a section for the base relocation `table` (its file data at
/// `at`) after every other one and points the image's table at it; a
/// section already named for it loses its name. Returns the table and its
/// file offset.
fn add_relocations(
    rewrite: &mut Rewrite,
    table: Vec<u8>,
    at: Appended,
) -> Result<(Vec<u8>, u64), PeError> {
    for section in &mut rewrite.headers.sections {
        if section.name == section_name(RELOC_SECTION) {
            section.name = [0; 8];
        }
    }
    let rva = next_rva(&rewrite.headers)?;
    let len = table.len() as u64;
    let flags = IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ | IMAGE_SCN_MEM_DISCARDABLE;
    rewrite.add_section(section_header(
        RELOC_SECTION,
        rva,
        len,
        (at.offset, at.raw_len),
        flags,
    )?)?;
    rewrite.add_initialized_data(at.raw_len as i64);
    let directory = rewrite
        .headers
        .directories
        .get_mut(IMAGE_DIRECTORY_ENTRY_BASERELOC)
        .ok_or_else(|| {
            PeError::Unsupported(
                "a wrapper's pointer has no base relocation, and the image's data directories end before the base relocation table's"
                    .into(),
            )
        })?;
    directory.virtual_address.set(LE, rva);
    directory.size.set(LE, len as u32);
    Ok((table, at.offset))
}

/// Where the bundles go in `.hip_fat`.
#[derive(Debug)]
struct FatbinLayout {
    rva: u32,
    /// The section's length: up to the last bundle's end.
    len: u64,
    /// Each bundle's offset in the section and length, by bundle index.
    bundles: BTreeMap<u32, (u64, u64)>,
}

impl FatbinLayout {
    /// Places the bundles in a section at `rva`, each at a 4096-byte
    /// boundary in memory.
    fn plan(rva: u32, lens: &BTreeMap<u32, u64>) -> FatbinLayout {
        let start = u64::from(rva);
        let mut bundles = BTreeMap::new();
        let mut end = start;
        for (&index, &len) in lens {
            let at = end.next_multiple_of(BUNDLE_ALIGN);
            bundles.insert(index, (at - start, len));
            end = at + len;
        }
        FatbinLayout {
            rva,
            len: end - start,
            bundles,
        }
    }
}

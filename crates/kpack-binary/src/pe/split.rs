//! Turns a fat PE image into a host-only one (09-windows.md, "Splitting
//! an image"):
//!
//! - `.hip_fat`'s file data leaves the file; the section stays, without
//!   file data, at its place in memory, so no RVA moves (the loader
//!   zero-fills it); later file data moves down;
//! - a `.kpackrf` section holds the marker, after every other section in
//!   memory and after every section's data in the file, its header in the
//!   free slot after the section table (the headers grow by
//!   `FileAlignment` where there is none);
//! - every wrapper becomes `HIPK`, points at the marker and stores its
//!   bundle index; its base relocation already covers the pointer;
//! - the headers follow (`layout.rs`): sizes, file offsets, the
//!   signature dropped, the checksum recomputed.

use std::io::{self, Read, Seek, Write};

use object::pe::{IMAGE_SCN_CNT_INITIALIZED_DATA, IMAGE_SCN_MEM_READ};

use super::edits::Edit;
use super::image::LE;
use super::layout::{next_rva, put, record_mut, section_header, Rewrite};
use super::parse::FatPe;
use super::{FATBIN_SECTION, MARKER_SECTION};
use crate::error::PeError;
use crate::stream::write_zeros;
use crate::wrapper::{HipWrapper, HIPK_MAGIC};

/// What a split did, for summaries and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitLayout {
    /// File bytes removed with `.hip_fat`'s data.
    pub removed: u64,
    /// RVA of the marker.
    pub marker_rva: u32,
    /// Whether the headers grew by `FileAlignment` to hold the marker's
    /// section header.
    pub grew_headers: bool,
    /// Whether an Authenticode signature was removed.
    pub removed_signature: bool,
}

/// A split planned from the input's headers alone, so the host-only image
/// can be written as a stream: [`write_body`](Self::write_body) copies the
/// input without its device code, and [`patch`](Self::patch) writes the
/// records that change through a mapping of the output.
#[derive(Debug)]
pub struct SplitPlan {
    rewrite: Rewrite,
    marker: Vec<u8>,
    marker_offset: u64,
    layout: SplitLayout,
}

impl SplitPlan {
    /// Plans the split of `data` (parsed as `fat`) with wrappers pointing
    /// at `marker`.
    pub fn new(data: &[u8], fat: &FatPe<'_>, marker: &[u8]) -> Result<SplitPlan, PeError> {
        let input = &fat.headers;
        let file_align = input.file_alignment();
        if !fat.fatbin.size.is_multiple_of(file_align)
            || !fat.fatbin.offset.is_multiple_of(file_align)
        {
            return Err(PeError::Unsupported(format!(
                "{FATBIN_SECTION}'s file data ({:#x} bytes at {:#x}) is not aligned to FileAlignment ({file_align:#x})",
                fat.fatbin.size, fat.fatbin.offset
            )));
        }
        let mut rewrite = Rewrite::new(data, input, 1)?;
        rewrite
            .edits
            .push(Edit::delete(fat.fatbin.offset, fat.fatbin.size));
        let marker_len = marker.len() as u64;
        let appended = rewrite.insert_data(rewrite.sections_end(), marker_len, false);
        let (marker_offset, marker_raw) = (appended.offset, appended.raw_len);
        rewrite.move_file_data(data, input, Some(fat.fatbin.index))?;
        let fatbin = &mut rewrite.headers.sections[fat.fatbin.index];
        fatbin.virtual_size.set(LE, fat.fatbin.virtual_size);
        fatbin.size_of_raw_data.set(LE, 0);
        fatbin.pointer_to_raw_data.set(LE, 0);
        let fatbin_initialized = fatbin
            .characteristics
            .get(LE)
            .contains(IMAGE_SCN_CNT_INITIALIZED_DATA);
        let marker_rva = next_rva(input)?;
        rewrite.add_section(section_header(
            MARKER_SECTION,
            marker_rva,
            marker_len,
            (marker_offset, marker_raw),
            IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ,
        )?)?;
        let removed = if fatbin_initialized {
            fat.fatbin.size as i64
        } else {
            0
        };
        rewrite.add_initialized_data(marker_raw as i64 - removed);
        let layout = SplitLayout {
            removed: fat.fatbin.size,
            marker_rva,
            grew_headers: rewrite.header_growth != 0,
            removed_signature: rewrite.removed_signature,
        };
        Ok(SplitPlan {
            rewrite,
            marker: marker.to_vec(),
            marker_offset,
            layout,
        })
    }

    /// The host-only image's length.
    pub fn output_len(&self) -> u64 {
        self.rewrite.output_len()
    }

    /// Writes the image's body: the input read from `input` (at its start)
    /// without `.hip_fat`'s data and signature, zeros where the headers
    /// grow and the marker goes.
    pub fn write_body<R: Read + Seek, W: Write>(
        &self,
        input: &mut R,
        out: &mut W,
    ) -> io::Result<()> {
        // Nothing the split inserts is filled: zeros, patched later.
        self.rewrite
            .write(input, out, |edit, out| write_zeros(out, edit.insert))
    }

    /// Writes what changes into `out`, the body as
    /// [`write_body`](Self::write_body) left it.
    pub fn patch(&self, fat: &FatPe<'_>, out: &mut [u8]) -> Result<SplitLayout, PeError> {
        self.rewrite.write_headers(out)?;
        put(out, self.marker_offset, &self.marker)?;
        let pointer = self.rewrite.headers.image_base() + u64::from(self.layout.marker_rva);
        for wrapper in &fat.wrappers {
            let at = self.rewrite.map(wrapper.file_offset, "a wrapper")?;
            let record: &mut HipWrapper = record_mut(out, at)?;
            record.magic.set(LE, HIPK_MAGIC);
            record.pointer.set(LE, pointer);
            record.reserved.set(LE, wrapper.bundle as u64);
        }
        self.rewrite.write_checksum(out)?;
        Ok(self.layout)
    }
}

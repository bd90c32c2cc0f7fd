//! Turns a fat PE image into a host-only one (09-windows.md, "Splitting
//! an image"):
//!
//! - `.hip_fat`'s file data leaves the file; the section stays, without
//!   file data, at its place in memory, so no RVA moves (the loader
//!   zero-fills it); later file data moves down;
//! - a `.kpackrf` section holds the marker, after every other section in
//!   memory and after every section's file data in the file, its header
//!   in the free slot after the section table (the headers grow by
//!   `FileAlignment` where there is none);
//! - every wrapper becomes `HIPK`, points at the marker and stores its
//!   bundle index; its base relocation already covers the pointer;
//! - `SizeOfImage`, `SizeOfInitializedData`, `SizeOfHeaders`, the file
//!   offsets of debug data and of the COFF symbol table follow, the
//!   Authenticode signature (which no longer holds) is dropped, and the
//!   checksum is recomputed where there was one.

use std::io::{self, Read, Write};

use object::pe::{
    ImageDebugDirectory, ImageSectionHeader, IMAGE_DIRECTORY_ENTRY_DEBUG,
    IMAGE_DIRECTORY_ENTRY_SECURITY, IMAGE_SCN_CNT_INITIALIZED_DATA, IMAGE_SCN_MEM_READ,
};
use object::{pod, U32};

use super::checksum::pe_checksum;
use super::edits::{Edit, Edits};
use super::image::{file_range, records, virtual_len, Headers, LE, SECTION_HEADER_SIZE};
use super::parse::FatPe;
use super::{FATBIN_SECTION, MARKER_SECTION};
use crate::error::PeError;
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
    input_len: u64,
    edits: Edits,
    /// The output's headers, the marker's section last.
    headers: Headers,
    marker: Vec<u8>,
    marker_offset: u64,
    /// The debug directory entries: where each lies in the output and the
    /// file offset of its data there.
    debug: Vec<(u64, u32)>,
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
        let mut edits = Edits::default();
        let header_growth = header_growth(data, input)?;
        if header_growth != 0 {
            edits.push(Edit {
                at: input.size_of_headers(),
                delete: 0,
                insert: header_growth,
            });
        }
        edits.push(Edit {
            at: fat.fatbin.offset,
            delete: fat.fatbin.size,
            insert: 0,
        });
        let sections_end = input
            .sections
            .iter()
            .map(|s| {
                let (start, size) = file_range(s);
                start + size
            })
            .max()
            .unwrap_or(0)
            .max(input.size_of_headers());
        let removed_signature = drop_signature(input, sections_end, &mut edits)?;
        let marker_at = edits.map(sections_end).unwrap_or(sections_end);
        let marker_offset = marker_at.next_multiple_of(file_align);
        let marker_raw = (marker.len() as u64).next_multiple_of(file_align);
        edits.push(Edit {
            at: sections_end,
            delete: 0,
            insert: marker_offset - marker_at + marker_raw,
        });

        let mut headers = Headers::clone(input);
        let marker_rva = marker_rva(input)?;
        move_file_data(&mut headers, fat, &edits)?;
        headers.sections.push(marker_section(
            marker_rva,
            marker.len() as u32,
            marker_raw as u32,
            marker_offset as u32,
        ));
        update_optional_header(
            &mut headers,
            fat,
            header_growth,
            marker_raw,
            removed_signature,
        );
        let debug = debug_entries(data, input, &edits)?;
        Ok(SplitPlan {
            input_len: data.len() as u64,
            edits,
            headers,
            marker: marker.to_vec(),
            marker_offset,
            debug,
            layout: SplitLayout {
                removed: fat.fatbin.size,
                marker_rva,
                grew_headers: header_growth != 0,
                removed_signature,
            },
        })
    }

    /// The host-only image's length.
    pub fn output_len(&self) -> u64 {
        self.edits.output_len(self.input_len)
    }

    /// Writes the image's body: the input read from `input` (at its start)
    /// without `.hip_fat`'s data and signature, zeros where the headers
    /// grow and the marker goes.
    pub fn write_body<R: Read, W: Write>(&self, input: &mut R, out: &mut W) -> io::Result<()> {
        self.edits.write(input, self.input_len, out)
    }

    /// Writes what changes into `out`, the body as
    /// [`write_body`](Self::write_body) left it.
    pub fn patch(&self, fat: &FatPe<'_>, out: &mut [u8]) -> Result<SplitLayout, PeError> {
        if out.len() as u64 != self.output_len() {
            return Err(PeError::Malformed(format!(
                "the output has {} bytes, not the {} planned",
                out.len(),
                self.output_len()
            )));
        }
        write_headers(out, &self.headers)?;
        put(out, self.marker_offset, &self.marker)?;
        let pointer = self.headers.image_base() + u64::from(self.layout.marker_rva);
        for wrapper in &fat.wrappers {
            let at = self.edits.map(wrapper.file_offset).ok_or_else(|| {
                PeError::Malformed(format!(
                    "wrapper at {:#x} lies in data the split removes",
                    wrapper.file_offset
                ))
            })?;
            let record: &mut HipWrapper = record_mut(out, at)?;
            record.magic.set(LE, HIPK_MAGIC);
            record.pointer.set(LE, pointer);
            record.reserved.set(LE, wrapper.bundle as u64);
        }
        for &(at, pointer) in &self.debug {
            let entry: &mut ImageDebugDirectory = record_mut(out, at)?;
            entry.pointer_to_raw_data.set(LE, pointer);
        }
        if self.headers.optional.check_sum.get(LE) != 0 {
            let at = self.headers.checksum_offset();
            let sum = pe_checksum(out, at as usize);
            put(out, at, &sum.to_le_bytes())?;
        }
        Ok(self.layout)
    }
}

/// How much the headers must grow for one more section header: nothing
/// when the bytes after the section table are free, else `FileAlignment`
/// (refused when the first section's memory leaves no room).
fn header_growth(data: &[u8], headers: &Headers) -> Result<u64, PeError> {
    let table_end = headers.sections_offset + headers.sections.len() as u64 * SECTION_HEADER_SIZE;
    let slot_end = table_end + SECTION_HEADER_SIZE;
    let size_of_headers = headers.size_of_headers();
    let present = &data[table_end as usize..slot_end.min(size_of_headers) as usize];
    if present.iter().any(|&b| b != 0) {
        return Err(PeError::Unsupported(format!(
            "the bytes after the section table (at {table_end:#x}) are in use, so it cannot grow"
        )));
    }
    if slot_end <= size_of_headers {
        return Ok(0);
    }
    let growth = (slot_end - size_of_headers).next_multiple_of(headers.file_alignment());
    let first_rva = headers
        .sections
        .iter()
        .map(|s| u64::from(s.virtual_address.get(LE)))
        .min()
        .unwrap_or(u64::MAX);
    if size_of_headers + growth > first_rva {
        return Err(PeError::Unsupported(format!(
            "no room for another section header: the headers would end at {:#x}, past the first section's RVA {first_rva:#x}",
            size_of_headers + growth
        )));
    }
    Ok(growth)
}

/// Drops the Authenticode signature (the certificate table, after every
/// section's data at `sections_end`), if there is one.
fn drop_signature(
    headers: &Headers,
    sections_end: u64,
    edits: &mut Edits,
) -> Result<bool, PeError> {
    let Some((offset, size)) = headers.directory(IMAGE_DIRECTORY_ENTRY_SECURITY) else {
        return Ok(false);
    };
    let (offset, size) = (u64::from(offset), u64::from(size));
    if offset < sections_end || offset + size > headers.len {
        return Err(PeError::Malformed(format!(
            "the certificate table [{offset:#x}, {:#x}) is not between the sections' data (ending at {sections_end:#x}) and the end of the file ({:#x})",
            offset + size,
            headers.len
        )));
    }
    edits.push(Edit {
        at: offset,
        delete: size,
        insert: 0,
    });
    Ok(true)
}

/// The marker's RVA: past every section's memory, at `SectionAlignment`.
fn marker_rva(headers: &Headers) -> Result<u32, PeError> {
    let end = headers
        .sections
        .iter()
        .map(|s| u64::from(s.virtual_address.get(LE)) + u64::from(virtual_len(s)))
        .max()
        .unwrap_or(headers.size_of_headers())
        .next_multiple_of(headers.section_alignment());
    u32::try_from(end).map_err(|_| PeError::Unsupported("the image fills its 4 GiB".into()))
}

/// Moves every section's file data where the edits put it; `.hip_fat`
/// keeps its memory and loses its file data.
fn move_file_data(headers: &mut Headers, fat: &FatPe<'_>, edits: &Edits) -> Result<(), PeError> {
    for (index, section) in headers.sections.iter_mut().enumerate() {
        if index == fat.fatbin.index {
            section.virtual_size.set(LE, fat.fatbin.virtual_size);
            section.size_of_raw_data.set(LE, 0);
            section.pointer_to_raw_data.set(LE, 0);
            continue;
        }
        let (start, size) = file_range(section);
        if size != 0 {
            section
                .pointer_to_raw_data
                .set(LE, moved(edits, start, "a section")?);
        }
    }
    let symbols = u64::from(headers.file.pointer_to_symbol_table.get(LE));
    if symbols != 0 {
        let moved = moved(edits, symbols, "the COFF symbol table")?;
        headers.file.pointer_to_symbol_table.set(LE, moved);
    }
    Ok(())
}

/// Where input offset `offset` (of `what`) lands, which must fit 32 bits.
fn moved(edits: &Edits, offset: u64, what: &str) -> Result<u32, PeError> {
    edits
        .map(offset)
        .and_then(|at| u32::try_from(at).ok())
        .ok_or_else(|| {
            PeError::Malformed(format!(
                "{what} at {offset:#x} lies in data the split removes"
            ))
        })
}

/// The `.kpackrf` section header: read-only initialized data.
fn marker_section(rva: u32, len: u32, raw_len: u32, offset: u32) -> ImageSectionHeader {
    let mut name = [0u8; 8];
    name[..MARKER_SECTION.len()].copy_from_slice(MARKER_SECTION.as_bytes());
    let zero = U32::new(LE, 0);
    ImageSectionHeader {
        name,
        virtual_size: U32::new(LE, len),
        virtual_address: U32::new(LE, rva),
        size_of_raw_data: U32::new(LE, raw_len),
        pointer_to_raw_data: U32::new(LE, offset),
        pointer_to_relocations: zero,
        pointer_to_linenumbers: zero,
        number_of_relocations: object::U16::new(LE, 0),
        number_of_linenumbers: object::U16::new(LE, 0),
        characteristics: U32::new(LE, IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ),
    }
}

/// The file and optional header fields that follow the sections: their
/// count, the image's size in memory, the headers' size, the initialized
/// data's size, and the security directory when the signature goes.
fn update_optional_header(
    headers: &mut Headers,
    fat: &FatPe<'_>,
    header_growth: u64,
    marker_raw: u64,
    removed_signature: bool,
) {
    let count = headers.sections.len() as u16;
    headers.file.number_of_sections.set(LE, count);
    let marker = headers.sections.last().copied();
    let optional = &mut headers.optional;
    if let Some(marker) = marker {
        let end = u64::from(marker.virtual_address.get(LE)) + u64::from(virtual_len(&marker));
        let size_of_image = end.next_multiple_of(u64::from(optional.section_alignment.get(LE)));
        optional.size_of_image.set(LE, size_of_image as u32);
    }
    let size_of_headers = optional.size_of_headers.get(LE) + header_growth as u32;
    optional.size_of_headers.set(LE, size_of_headers);
    let fatbin_flags = fat.headers.sections[fat.fatbin.index]
        .characteristics
        .get(LE);
    let mut initialized = optional.size_of_initialized_data.get(LE);
    if fatbin_flags.contains(IMAGE_SCN_CNT_INITIALIZED_DATA) {
        initialized = initialized.saturating_sub(fat.fatbin.size as u32);
    }
    optional
        .size_of_initialized_data
        .set(LE, initialized.saturating_add(marker_raw as u32));
    if removed_signature {
        let security = &mut headers.directories[IMAGE_DIRECTORY_ENTRY_SECURITY];
        security.virtual_address.set(LE, 0);
        security.size.set(LE, 0);
    }
}

/// The debug directory's entries with file data: where each lies in the
/// output and where its data moved.
fn debug_entries(data: &[u8], input: &Headers, edits: &Edits) -> Result<Vec<(u64, u32)>, PeError> {
    let Some((rva, size)) = input.directory(IMAGE_DIRECTORY_ENTRY_DEBUG) else {
        return Ok(Vec::new());
    };
    let (offset, _) = input
        .rva_to_offset(rva)
        .filter(|&(_, available)| u64::from(size) <= available)
        .ok_or_else(|| {
            PeError::Malformed(format!(
                "the debug directory at RVA {rva:#x} ({size} bytes) is not in a section's file data"
            ))
        })?;
    let entry_size = size_of::<ImageDebugDirectory>() as u64;
    let count = u64::from(size) / entry_size;
    let entries: &[ImageDebugDirectory] = records(data, offset, count * entry_size)
        .ok_or_else(|| PeError::Malformed("truncated debug directory".into()))?;
    let mut moved_entries = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let pointer = u64::from(entry.pointer_to_raw_data.get(LE));
        if pointer == 0 {
            continue;
        }
        let at = offset + index as u64 * entry_size;
        moved_entries.push((
            moved(edits, at, "a debug directory entry")?.into(),
            moved(edits, pointer, "debug data")?,
        ));
    }
    Ok(moved_entries)
}

/// Writes the headers' records where they lie in `out`.
fn write_headers(out: &mut [u8], headers: &Headers) -> Result<(), PeError> {
    put(out, headers.nt_offset + 4, pod::bytes_of(&headers.file))?;
    put(
        out,
        headers.optional_offset(),
        pod::bytes_of(&headers.optional),
    )?;
    put(
        out,
        headers.directories_offset(),
        pod::bytes_of_slice(&headers.directories),
    )?;
    put(
        out,
        headers.sections_offset,
        pod::bytes_of_slice(&headers.sections),
    )
}

/// Copies `bytes` into `out` at `at`, which must hold them.
fn put(out: &mut [u8], at: u64, bytes: &[u8]) -> Result<(), PeError> {
    usize::try_from(at)
        .ok()
        .and_then(|at| out.get_mut(at..at.checked_add(bytes.len())?))
        .ok_or_else(|| PeError::Malformed(format!("a record at {at:#x} past the end of the file")))?
        .copy_from_slice(bytes);
    Ok(())
}

/// The record of type `T` at `at` of `out`, to edit in place.
fn record_mut<T: object::Pod>(out: &mut [u8], at: u64) -> Result<&mut T, PeError> {
    usize::try_from(at)
        .ok()
        .and_then(|at| out.get_mut(at..))
        .and_then(|rest| pod::from_bytes_mut::<T>(rest).ok())
        .map(|(record, _)| record)
        .ok_or_else(|| PeError::Malformed(format!("a record at {at:#x} past the end of the file")))
}

//! What splitting and materializing an image share: a rewrite planned as
//! edits to the input file plus the output's headers. Section data moves
//! in the file, never in memory, so only file offsets follow the edits
//! (sections', the COFF symbol table's, debug data's); a section may be
//! added after every other one; the signature, invalid once a byte
//! changes, goes; the checksum is recomputed where there was one.

use object::pe::{
    ImageDebugDirectory, ImageSectionHeader, SectionFlags, IMAGE_DIRECTORY_ENTRY_DEBUG,
    IMAGE_DIRECTORY_ENTRY_SECURITY,
};
use std::io::{self, Read, Seek, Write};

use object::{pod, U16, U32};

use super::checksum::pe_checksum;
use super::edits::{Edit, Edits};
use super::image::{
    file_range, records, section_name, virtual_len, Headers, LE, SECTION_HEADER_SIZE,
};
use crate::error::PeError;

/// A rewrite of an image: the edits to its file and the output's headers.
#[derive(Debug)]
pub(super) struct Rewrite {
    input_len: u64,
    pub edits: Edits,
    /// The output's headers.
    pub headers: Box<Headers>,
    /// Where input offset `sections_end` (past every section's file data)
    /// is; new section data is inserted there.
    sections_end: u64,
    /// The debug directory entries: where each lies in the output and the
    /// file offset of its data there.
    debug: Vec<(u64, u32)>,
    /// How much the headers grew to hold a new section header.
    pub header_growth: u64,
    pub removed_signature: bool,
}

impl Rewrite {
    /// Starts rewriting `data` (with headers `input`), making room for
    /// `new_sections` more section headers, and dropping the signature.
    pub fn new(data: &[u8], input: &Headers, new_sections: u64) -> Result<Rewrite, PeError> {
        let mut edits = Edits::default();
        let header_growth = if new_sections > 0 {
            header_growth(data, input, new_sections)?
        } else {
            0
        };
        if header_growth != 0 {
            edits.push(Edit::zeros(input.size_of_headers(), header_growth));
        }
        let sections_end = sections_end(input);
        let removed_signature = drop_signature(input, sections_end, &mut edits)?;
        let mut headers = Box::new(input.clone());
        // The growth keeps the headers below the first section's RVA.
        let size_of_headers = (input.size_of_headers() + header_growth) as u32;
        headers.optional.size_of_headers.set(LE, size_of_headers);
        if removed_signature {
            let security = &mut headers.directories[IMAGE_DIRECTORY_ENTRY_SECURITY];
            security.virtual_address.set(LE, 0);
            security.size.set(LE, 0);
        }
        Ok(Rewrite {
            input_len: data.len() as u64,
            edits,
            headers,
            sections_end,
            debug: Vec::new(),
            header_growth,
            removed_signature,
        })
    }

    /// Inserts `len` bytes of new section data at input offset `at`
    /// (after every other edit before it is made), at `FileAlignment`;
    /// returns where they go. Zeros unless `filled`: then the writer's
    /// caller writes the padding and the data.
    pub fn insert_data(&mut self, at: u64, len: u64, filled: bool) -> Appended {
        let file_align = self.headers.file_alignment();
        let mapped = self.edits.insertion_point(at);
        let offset = mapped.next_multiple_of(file_align);
        let appended = Appended {
            padding: offset - mapped,
            offset,
            raw_len: len.next_multiple_of(file_align),
        };
        self.edits.push(Edit {
            filled,
            ..Edit::zeros(at, appended.padding + appended.raw_len)
        });
        appended
    }

    /// Where the input's section data ends: data of a section added after
    /// every other one is inserted there.
    pub fn sections_end(&self) -> u64 {
        self.sections_end
    }

    /// Once every edit is made: moves the file data of every section but
    /// `skip`, the COFF symbol table and the debug data where the edits
    /// put them (`data` is the input, `input` its headers).
    pub fn move_file_data(
        &mut self,
        data: &[u8],
        input: &Headers,
        skip: Option<usize>,
    ) -> Result<(), PeError> {
        for (index, section) in self.headers.sections.iter_mut().enumerate() {
            let (start, size) = file_range(section);
            if Some(index) != skip && size != 0 {
                let moved = moved(&self.edits, start, "a section")?;
                section.pointer_to_raw_data.set(LE, moved);
            }
        }
        let symbols = u64::from(self.headers.file.pointer_to_symbol_table.get(LE));
        if symbols != 0 {
            let moved = moved(&self.edits, symbols, "the COFF symbol table")?;
            self.headers.file.pointer_to_symbol_table.set(LE, moved);
        }
        self.debug = debug_entries(data, input, &self.edits)?;
        Ok(())
    }

    /// Adds `section` after every other one, the image growing to hold it
    /// in memory (which must stay within 4 GiB, and the address space).
    pub fn add_section(&mut self, section: ImageSectionHeader) -> Result<(), PeError> {
        let count = u16::try_from(self.headers.sections.len() + 1)
            .map_err(|_| PeError::Unsupported("no room for another section".into()))?;
        let end = u64::from(section.virtual_address.get(LE)) + u64::from(virtual_len(&section));
        let size_of_image = end.next_multiple_of(self.headers.section_alignment());
        let size_of_image = u32::try_from(size_of_image)
            .ok()
            .filter(|&size| {
                self.headers
                    .image_base()
                    .checked_add(u64::from(size))
                    .is_some()
            })
            .ok_or_else(|| {
                PeError::Unsupported(format!(
                    "the image would end at RVA {size_of_image:#x}, past its address space"
                ))
            })?;
        self.headers.sections.push(section);
        self.headers.file.number_of_sections.set(LE, count);
        self.headers.optional.size_of_image.set(LE, size_of_image);
        Ok(())
    }

    /// Adds `delta` to `SizeOfInitializedData` (as the linker counts it:
    /// initialized sections' file data).
    pub fn add_initialized_data(&mut self, delta: i64) {
        let size = &mut self.headers.optional.size_of_initialized_data;
        let value = i64::from(size.get(LE)).saturating_add(delta).max(0);
        size.set(LE, u32::try_from(value).unwrap_or(u32::MAX));
    }

    /// The output's length.
    pub fn output_len(&self) -> u64 {
        self.edits.output_len(self.input_len)
    }

    /// Writes the input read from `input` (at its start) with the edits,
    /// `fill` writing appended data that is `filled`.
    pub fn write<R: Read + Seek, W: Write, E: From<io::Error>>(
        &self,
        input: &mut R,
        out: &mut W,
        fill: impl FnMut(&Edit, &mut W) -> Result<(), E>,
    ) -> Result<(), E> {
        self.edits.write(input, self.input_len, out, fill)
    }

    /// Where input offset `offset` (of `what`) is in the output.
    pub fn map(&self, offset: u64, what: &str) -> Result<u64, PeError> {
        self.edits.map(offset).ok_or_else(|| {
            PeError::Malformed(format!(
                "{what} at {offset:#x} lies in data the rewrite removes"
            ))
        })
    }

    /// Writes the headers and the moved debug data's offsets into `out`,
    /// the output as the edits wrote it.
    pub fn write_headers(&self, out: &mut [u8]) -> Result<(), PeError> {
        if out.len() as u64 != self.output_len() {
            return Err(PeError::Malformed(format!(
                "the output has {} bytes, not the {} planned",
                out.len(),
                self.output_len()
            )));
        }
        let headers = &self.headers;
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
        )?;
        for &(at, pointer) in &self.debug {
            let entry: &mut ImageDebugDirectory = record_mut(out, at)?;
            entry.pointer_to_raw_data.set(LE, pointer);
        }
        Ok(())
    }

    /// Recomputes the checksum of `out`, the finished output, where the
    /// input had one.
    pub fn write_checksum(&self, out: &mut [u8]) -> Result<(), PeError> {
        if self.headers.optional.check_sum.get(LE) != 0 {
            let at = self.headers.checksum_offset();
            let sum = pe_checksum(out, at as usize);
            put(out, at, &sum.to_le_bytes())?;
        }
        Ok(())
    }
}

/// Where inserted section data goes in the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Appended {
    /// Zeros before it, up to `FileAlignment`.
    pub padding: u64,
    pub offset: u64,
    /// Its size in the file, rounded up to `FileAlignment`.
    pub raw_len: u64,
}

/// Where every section's file data (and the headers) ends.
fn sections_end(headers: &Headers) -> u64 {
    headers
        .sections
        .iter()
        .map(|s| {
            let (start, size) = file_range(s);
            start + size
        })
        .max()
        .unwrap_or(0)
        .max(headers.size_of_headers())
}

/// How much the headers must grow for `count` more section headers:
/// nothing when the bytes after the section table are free, else a
/// multiple of `FileAlignment` (refused when the first section's memory
/// leaves no room).
fn header_growth(data: &[u8], headers: &Headers, count: u64) -> Result<u64, PeError> {
    let table_end = headers.sections_offset + headers.sections.len() as u64 * SECTION_HEADER_SIZE;
    let slot_end = table_end + count * SECTION_HEADER_SIZE;
    let size_of_headers = headers.size_of_headers();
    // Headers::read checked the table and SizeOfHeaders lie in the file.
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
    edits.push(Edit::delete(offset, size));
    Ok(true)
}

/// The RVA a section added after every other one gets: past every
/// section's memory, at `SectionAlignment`.
pub(super) fn next_rva(headers: &Headers) -> Result<u32, PeError> {
    let end = headers
        .sections
        .iter()
        .map(|s| u64::from(s.virtual_address.get(LE)) + u64::from(virtual_len(s)))
        .max()
        .unwrap_or(headers.size_of_headers())
        .next_multiple_of(headers.section_alignment());
    u32::try_from(end).map_err(|_| PeError::Unsupported("the image fills its 4 GiB".into()))
}

/// A section header for `len` bytes at `rva` in memory and `raw_len`
/// bytes at `offset` in the file.
pub(super) fn section_header(
    name: &str,
    rva: u32,
    len: u64,
    (offset, raw_len): (u64, u64),
    flags: SectionFlags,
) -> Result<ImageSectionHeader, PeError> {
    let fits = |value: u64| {
        u32::try_from(value)
            .map_err(|_| PeError::Unsupported(format!("{name}: {value:#x} does not fit 32 bits")))
    };
    Ok(ImageSectionHeader {
        name: section_name(name),
        virtual_size: U32::new(LE, fits(len)?),
        virtual_address: U32::new(LE, rva),
        size_of_raw_data: U32::new(LE, fits(raw_len)?),
        pointer_to_raw_data: U32::new(LE, fits(offset)?),
        pointer_to_relocations: U32::new(LE, 0),
        pointer_to_linenumbers: U32::new(LE, 0),
        number_of_relocations: U16::new(LE, 0),
        number_of_linenumbers: U16::new(LE, 0),
        characteristics: U32::new(LE, flags),
    })
}

/// Where input offset `offset` (of `what`) lands, which must fit 32 bits.
fn moved(edits: &Edits, offset: u64, what: &str) -> Result<u32, PeError> {
    edits
        .map(offset)
        .and_then(|at| u32::try_from(at).ok())
        .ok_or_else(|| {
            PeError::Malformed(format!(
                "{what} at {offset:#x} lies in data the rewrite removes"
            ))
        })
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

/// Copies `bytes` into `out` at `at`, which must hold them.
pub(super) fn put(out: &mut [u8], at: u64, bytes: &[u8]) -> Result<(), PeError> {
    usize::try_from(at)
        .ok()
        .and_then(|at| out.get_mut(at..at.checked_add(bytes.len())?))
        .ok_or_else(|| PeError::Malformed(format!("a record at {at:#x} past the end of the file")))?
        .copy_from_slice(bytes);
    Ok(())
}

/// The record of type `T` at `at` of `out`, to edit in place.
pub(super) fn record_mut<T: object::Pod>(out: &mut [u8], at: u64) -> Result<&mut T, PeError> {
    usize::try_from(at)
        .ok()
        .and_then(|at| out.get_mut(at..))
        .and_then(|rest| pod::from_bytes_mut::<T>(rest).ok())
        .map(|(record, _)| record)
        .ok_or_else(|| PeError::Malformed(format!("a record at {at:#x} past the end of the file")))
}

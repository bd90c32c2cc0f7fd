//! The headers of a PE32+ image as `object` declares them, copied out to
//! be read and edited: the file header, the optional header, the data
//! directories and the section table, each checked against the file's
//! length before anything else reads it.

use object::pe::{
    ImageDataDirectory, ImageDosHeader, ImageFileHeader, ImageNtHeaders64, ImageOptionalHeader64,
    ImageSectionHeader, IMAGE_FILE_MACHINE_AMD64, IMAGE_NT_OPTIONAL_HDR64_MAGIC,
    IMAGE_NT_SIGNATURE,
};
use object::{pod, LittleEndian};

use crate::error::PeError;

/// The byte order of every PE image.
pub(super) const LE: LittleEndian = LittleEndian;

/// Size of one section header.
pub(super) const SECTION_HEADER_SIZE: u64 = size_of::<ImageSectionHeader>() as u64;

/// The headers of a PE32+ x86-64 image, checked: every section's file data
/// inside the file, no two sections overlapping in the file or in memory.
#[derive(Debug, Clone)]
pub(super) struct Headers {
    /// File offset of the `PE\0\0` signature (`e_lfanew`).
    pub nt_offset: u64,
    pub file: ImageFileHeader,
    pub optional: ImageOptionalHeader64,
    pub directories: Vec<ImageDataDirectory>,
    /// File offset of the section table.
    pub sections_offset: u64,
    pub sections: Vec<ImageSectionHeader>,
    /// The file's length.
    pub len: u64,
}

impl Headers {
    /// Reads the headers of `data`: `Ok(None)` when it is not a PE image
    /// at all (no `MZ` and `PE\0\0` signatures), an error when it is one
    /// that cannot be read or is not PE32+ for x86-64.
    pub fn read(data: &[u8]) -> Result<Option<Headers>, PeError> {
        let Ok(dos) = ImageDosHeader::parse(data) else {
            return Ok(None);
        };
        let nt_offset = u64::from(dos.nt_headers_offset());
        let Some(signature) = record::<object::U32<LittleEndian>>(data, nt_offset) else {
            return Ok(None);
        };
        if signature.get(LE) != IMAGE_NT_SIGNATURE {
            return Ok(None);
        }
        let nt: &ImageNtHeaders64 = record(data, nt_offset)
            .ok_or_else(|| PeError::Malformed("truncated NT headers".into()))?;
        let magic = nt.optional_header.magic.get(LE);
        if magic != IMAGE_NT_OPTIONAL_HDR64_MAGIC {
            return Err(PeError::Unsupported(format!(
                "optional header magic {magic:#x} is not PE32+ ({IMAGE_NT_OPTIONAL_HDR64_MAGIC:#x})"
            )));
        }
        let machine = nt.file_header.machine.get(LE);
        if machine != IMAGE_FILE_MACHINE_AMD64 {
            return Err(PeError::Unsupported(format!(
                "machine {machine:#06x} is not x86-64"
            )));
        }
        let optional_offset = nt_offset + 4 + size_of::<ImageFileHeader>() as u64;
        let optional_size = u64::from(nt.file_header.size_of_optional_header.get(LE));
        let directories_offset = optional_offset + size_of::<ImageOptionalHeader64>() as u64;
        let directory_count = u64::from(nt.optional_header.number_of_rva_and_sizes.get(LE));
        let directories_len = directory_count
            .checked_mul(size_of::<ImageDataDirectory>() as u64)
            .filter(|&len| directories_offset - optional_offset + len <= optional_size)
            .ok_or_else(|| {
                PeError::Malformed(format!(
                    "{directory_count} data directories do not fit the {optional_size}-byte optional header"
                ))
            })?;
        let directories = records(data, directories_offset, directories_len)
            .ok_or_else(|| PeError::Malformed("truncated data directories".into()))?;
        let sections_offset = optional_offset + optional_size;
        let section_count = u64::from(nt.file_header.number_of_sections.get(LE));
        let sections = records(data, sections_offset, section_count * SECTION_HEADER_SIZE)
            .ok_or_else(|| {
                PeError::Malformed(format!(
                    "the table of {section_count} section headers at {sections_offset:#x} runs past the end of the file"
                ))
            })?;
        let headers = Headers {
            nt_offset,
            file: nt.file_header,
            optional: nt.optional_header,
            directories: directories.to_vec(),
            sections_offset,
            sections: sections.to_vec(),
            len: data.len() as u64,
        };
        headers.check()?;
        Ok(Some(headers))
    }

    /// File offset of the optional header.
    pub fn optional_offset(&self) -> u64 {
        self.nt_offset + 4 + size_of::<ImageFileHeader>() as u64
    }

    /// File offset of the data directories.
    pub fn directories_offset(&self) -> u64 {
        self.optional_offset() + size_of::<ImageOptionalHeader64>() as u64
    }

    /// File offset of the optional header's `CheckSum`.
    pub fn checksum_offset(&self) -> u64 {
        self.optional_offset() + std::mem::offset_of!(ImageOptionalHeader64, check_sum) as u64
    }

    pub fn image_base(&self) -> u64 {
        self.optional.image_base.get(LE)
    }

    pub fn file_alignment(&self) -> u64 {
        u64::from(self.optional.file_alignment.get(LE))
    }

    pub fn section_alignment(&self) -> u64 {
        u64::from(self.optional.section_alignment.get(LE))
    }

    pub fn size_of_headers(&self) -> u64 {
        u64::from(self.optional.size_of_headers.get(LE))
    }

    /// The data directory `index`, when the image has it and it is not
    /// empty.
    pub fn directory(&self, index: usize) -> Option<(u32, u32)> {
        let directory = self.directories.get(index)?;
        let (address, size) = (directory.virtual_address.get(LE), directory.size.get(LE));
        (size != 0).then_some((address, size))
    }

    /// Index of the section named `name` (the 8 bytes of the table,
    /// NUL-padded).
    pub fn section_named(&self, name: &str) -> Option<usize> {
        let name = section_name(name);
        self.sections.iter().position(|s| s.name == name)
    }

    /// The section whose memory holds `rva`.
    pub fn section_containing(&self, rva: u32) -> Option<&ImageSectionHeader> {
        self.sections.iter().find(|s| {
            rva.checked_sub(s.virtual_address.get(LE))
                .is_some_and(|within| within < virtual_len(s))
        })
    }

    /// The file offset of `rva`, inside a section's file data, with how
    /// many bytes of that data follow it.
    pub fn rva_to_offset(&self, rva: u32) -> Option<(u64, u64)> {
        let section = self.section_containing(rva)?;
        let within = rva - section.virtual_address.get(LE);
        let data = section.size_of_raw_data.get(LE).min(virtual_len(section));
        (within < data).then(|| {
            (
                u64::from(section.pointer_to_raw_data.get(LE)) + u64::from(within),
                u64::from(data - within),
            )
        })
    }

    /// Refuses section data past the end of the file, sections overlapping
    /// in the file or in memory, headers overlapping sections, and
    /// alignments that are not powers of two.
    fn check(&self) -> Result<(), PeError> {
        let (file_align, section_align) = (self.file_alignment(), self.section_alignment());
        if !file_align.is_power_of_two() || !section_align.is_power_of_two() {
            return Err(PeError::Malformed(format!(
                "alignments {file_align:#x} (file) and {section_align:#x} (sections) must be powers of two"
            )));
        }
        if self.size_of_headers() > self.len {
            return Err(PeError::Malformed(format!(
                "SizeOfHeaders ({:#x}) is past the end of the file ({:#x})",
                self.size_of_headers(),
                self.len
            )));
        }
        let table_end = self.sections_offset + self.sections.len() as u64 * SECTION_HEADER_SIZE;
        if table_end > self.size_of_headers() {
            return Err(PeError::Malformed(format!(
                "the section table ends at {table_end:#x}, past SizeOfHeaders ({:#x})",
                self.size_of_headers()
            )));
        }
        // Every RVA lies below SizeOfImage, and the image's addresses fit
        // 64 bits: sums of RVAs, offsets and the base cannot overflow.
        let size_of_image = u64::from(self.optional.size_of_image.get(LE));
        if self.image_base().checked_add(size_of_image).is_none() {
            return Err(PeError::Malformed(format!(
                "ImageBase {:#x} plus SizeOfImage {size_of_image:#x} passes the end of the address space",
                self.image_base()
            )));
        }
        let mut in_file = Vec::new();
        let mut in_memory = Vec::new();
        for section in &self.sections {
            let (start, size) = file_range(section);
            let end = start + size;
            if end > self.len {
                return Err(PeError::SectionPastEnd {
                    section: name(section),
                    start,
                    end,
                    len: self.len,
                });
            }
            if size != 0 {
                if start < self.size_of_headers() {
                    return Err(PeError::Malformed(format!(
                        "section {}'s file data at {start:#x} starts inside the headers (SizeOfHeaders {:#x})",
                        name(section),
                        self.size_of_headers()
                    )));
                }
                in_file.push((start, end, section));
            }
            let address = u64::from(section.virtual_address.get(LE));
            let memory_end = address + u64::from(virtual_len(section));
            if memory_end > size_of_image {
                return Err(PeError::Malformed(format!(
                    "section {} ends at RVA {memory_end:#x}, past SizeOfImage ({size_of_image:#x})",
                    name(section)
                )));
            }
            in_memory.push((address, memory_end, section));
        }
        no_overlap(in_file, "in the file")?;
        no_overlap(in_memory, "in memory")
    }
}

/// The bytes a section occupies in memory: its `VirtualSize`, or its file
/// data where that is zero (as loaders read it).
pub(super) fn virtual_len(section: &ImageSectionHeader) -> u32 {
    match section.virtual_size.get(LE) {
        0 => section.size_of_raw_data.get(LE),
        size => size,
    }
}

/// A section's file data: its offset and size.
pub(super) fn file_range(section: &ImageSectionHeader) -> (u64, u64) {
    match section.size_of_raw_data.get(LE) {
        0 => (0, 0),
        size => (
            u64::from(section.pointer_to_raw_data.get(LE)),
            u64::from(size),
        ),
    }
}

/// `name` as the 8 NUL-padded bytes of a section table (cut at 8).
pub(super) fn section_name(name: &str) -> [u8; 8] {
    let mut padded = [0u8; 8];
    let len = name.len().min(8);
    padded[..len].copy_from_slice(&name.as_bytes()[..len]);
    padded
}

/// A section's name as errors show it.
pub(super) fn name(section: &ImageSectionHeader) -> String {
    let end = section.name.iter().position(|&b| b == 0).unwrap_or(8);
    String::from_utf8_lossy(&section.name[..end]).into_owned()
}

/// Refuses two of `ranges` (start, end, section) that share a byte.
fn no_overlap(
    mut ranges: Vec<(u64, u64, &ImageSectionHeader)>,
    place: &'static str,
) -> Result<(), PeError> {
    ranges.sort_by_key(|&(start, end, _)| (start, end));
    for pair in ranges.windows(2) {
        let ((_, first_end, first), (second_start, _, second)) = (pair[0], pair[1]);
        if second_start < first_end {
            return Err(PeError::OverlappingSections {
                first: name(first),
                second: name(second),
                place,
            });
        }
    }
    Ok(())
}

/// The record of type `T` at `offset` of `data`, if it fits.
pub(super) fn record<T: object::Pod>(data: &[u8], offset: u64) -> Option<&T> {
    let rest = data.get(usize::try_from(offset).ok()?..)?;
    pod::from_bytes(rest).ok().map(|(record, _)| record)
}

/// The `len` bytes at `offset` of `data` as records of type `T`, if they
/// fit and are a whole number of records.
pub(super) fn records<T: object::Pod>(data: &[u8], offset: u64, len: u64) -> Option<&[T]> {
    let start = usize::try_from(offset).ok()?;
    let bytes = data.get(start..start.checked_add(usize::try_from(len).ok()?)?)?;
    pod::slice_from_all_bytes(bytes).ok()
}

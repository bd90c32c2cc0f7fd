//! Reads a fat ELF file: its `.hip_fatbin` bundles and which wrapper owns
//! which bundle, found from the relocation (or plain value) of each
//! wrapper's pointer field.

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use object::{pod, FileKind, Object, ObjectSection};

use super::file::{ElfFile, ElfKind, ElfSection, Machine, SectionRange};
use super::pointer::{pointer_relocations, pointer_source, read_wrapper, PointerSource};
use super::records::{malformed, LE};
use super::{FATBIN_SECTION, MARKER_SECTION, WRAPPER_SECTION};
use crate::bundle::{bundle_starting_at, describe_starts, parse_fatbin, Bundle};
use crate::error::ElfError;
use crate::wrapper::{HipWrapper, HIPK_MAGIC, WRAPPER_SIZE};

/// One 24-byte wrapper in `.hipFatBinSegment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wrapper {
    /// Address of the wrapper.
    pub address: u64,
    /// File offset of the wrapper.
    pub file_offset: u64,
    /// The address its pointer holds at run time.
    pub target_address: u64,
    pub pointer: PointerSource,
    /// Index of the bundle it points at, in section order.
    pub bundle: usize,
}

/// A parsed fat ELF file.
#[derive(Debug)]
pub struct FatElf<'a> {
    pub machine: Machine,
    pub kind: ElfKind,
    /// Page size: the largest `p_align` of the load segments.
    pub page_size: u64,
    pub fatbin: SectionRange,
    pub wrapper_section: SectionRange,
    pub bundles: Vec<Bundle<'a>>,
    /// Wrappers in section order.
    pub wrappers: Vec<Wrapper>,
}

impl<'a> FatElf<'a> {
    /// Parses `data`: `Ok(None)` when it is not a 64-bit little-endian ELF
    /// file with a `.hip_fatbin` section (nothing to split), an error when
    /// it is one but cannot be split.
    pub fn parse(data: &'a [u8]) -> Result<Option<FatElf<'a>>, ElfError> {
        let Some(file) = elf64(data)? else {
            return Ok(None);
        };
        let Some(fatbin_section) = file.section_by_name(FATBIN_SECTION) else {
            return Ok(None);
        };
        let (machine, kind) = machine_and_kind(&file)?;
        let page_size = page_size(&file)?;

        let fatbin = section_range(&fatbin_section)?;
        let bundles = parse_fatbin(section_data(&fatbin_section, FATBIN_SECTION)?)?;

        let (wrapper_range, records) = wrappers_of(&file, FATBIN_SECTION)?;

        let relocations = pointer_relocations(&file, wrapper_range)?;
        let bundle_starts = BundleStarts {
            fatbin: fatbin.address,
            bundles: &bundles,
        };
        let wrappers = records
            .iter()
            .enumerate()
            .map(|(index, raw)| {
                let address = wrapper_range
                    .address
                    .wrapping_add(index as u64 * WRAPPER_SIZE);
                let stored = read_wrapper(raw, index, address)?;
                let pointer = pointer_source(&relocations, kind, index, address)?;
                let target_address = pointer.target_address(stored);
                Ok(Wrapper {
                    address,
                    file_offset: wrapper_range.offset + index as u64 * WRAPPER_SIZE,
                    target_address,
                    pointer,
                    bundle: bundle_starts.find(target_address, index, address)?,
                })
            })
            .collect::<Result<Vec<_>, ElfError>>()?;
        Ok(Some(FatElf {
            machine,
            kind,
            page_size,
            fatbin,
            wrapper_section: wrapper_range,
            bundles,
            wrappers,
        }))
    }
}

/// One wrapper of a split file: where it is, how its pointer is
/// relocated, and the bundle index it stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitWrapper {
    pub address: u64,
    pub file_offset: u64,
    pub pointer: PointerSource,
    pub bundle: u32,
}

/// A host-only file as [`SplitPlan`](super::SplitPlan) leaves it: `HIPK`
/// wrappers, a memory-only `.hip_fatbin`, and the marker naming the
/// archives that hold its code.
#[derive(Debug)]
pub struct SplitElf<'a> {
    pub machine: Machine,
    pub kind: ElfKind,
    pub page_size: u64,
    /// Index of the `.hip_fatbin` section header.
    pub fatbin_index: usize,
    pub marker: SectionRange,
    pub marker_bytes: &'a [u8],
    pub wrapper_section: SectionRange,
    /// Wrappers in section order.
    pub wrappers: Vec<SplitWrapper>,
}

impl<'a> SplitElf<'a> {
    /// Parses `data`: `Ok(None)` when it is not a 64-bit ELF file with a
    /// kpack marker (not a split file), an error when it has one but its
    /// wrappers cannot be read.
    pub fn parse(data: &'a [u8]) -> Result<Option<SplitElf<'a>>, ElfError> {
        let Some(file) = elf64(data)? else {
            return Ok(None);
        };
        let Some(marker_section) = file.section_by_name(MARKER_SECTION) else {
            return Ok(None);
        };
        let (machine, kind) = machine_and_kind(&file)?;
        let page_size = page_size(&file)?;
        let marker = section_range(&marker_section)?;
        let marker_bytes = section_data(&marker_section, MARKER_SECTION)?;
        let fatbin_index = file
            .section_by_name(FATBIN_SECTION)
            .ok_or_else(|| {
                ElfError::Malformed(format!("{MARKER_SECTION} without {FATBIN_SECTION}"))
            })?
            .index()
            .0;
        let (wrapper_range, records) = wrappers_of(&file, MARKER_SECTION)?;
        let relocations = pointer_relocations(&file, wrapper_range)?;
        let wrappers = records
            .iter()
            .enumerate()
            .map(|(index, record)| {
                let address = wrapper_range
                    .address
                    .wrapping_add(index as u64 * WRAPPER_SIZE);
                if record.magic.get(LE) != HIPK_MAGIC {
                    return Err(ElfError::BadWrapper {
                        index,
                        address,
                        message: format!("magic {:#010x} is not HIPK", record.magic.get(LE)),
                    });
                }
                Ok(SplitWrapper {
                    address,
                    file_offset: wrapper_range.offset + index as u64 * WRAPPER_SIZE,
                    pointer: pointer_source(&relocations, kind, index, address)?,
                    bundle: record.bundle_index(),
                })
            })
            .collect::<Result<Vec<_>, ElfError>>()?;
        Ok(Some(SplitElf {
            machine,
            kind,
            page_size,
            fatbin_index,
            marker,
            marker_bytes,
            wrapper_section: wrapper_range,
            wrappers,
        }))
    }
}

/// `data` as a 64-bit ELF file, if it is one.
fn elf64(data: &[u8]) -> Result<Option<ElfFile<'_>>, ElfError> {
    if !matches!(FileKind::parse(data), Ok(FileKind::Elf64)) {
        return Ok(None);
    }
    ElfFile::parse(data).map(Some).map_err(malformed)
}

/// The `.hipFatBinSegment` section of `file`, which a file with `owner`
/// (a section's name) must have, and its wrapper records.
fn wrappers_of<'a>(
    file: &ElfFile<'a>,
    owner: &str,
) -> Result<(SectionRange, &'a [HipWrapper]), ElfError> {
    let section = file
        .section_by_name(WRAPPER_SECTION)
        .ok_or_else(|| ElfError::Malformed(format!("{owner} without {WRAPPER_SECTION}")))?;
    let range = section_range(&section)?;
    Ok((
        range,
        wrapper_records(section_data(&section, WRAPPER_SECTION)?)?,
    ))
}

/// The wrapper records of a `.hipFatBinSegment` section.
fn wrapper_records(data: &[u8]) -> Result<&[HipWrapper], ElfError> {
    pod::slice_from_all_bytes(data).map_err(|()| {
        ElfError::Malformed(format!(
            "{WRAPPER_SECTION} is {} bytes, not a multiple of {WRAPPER_SIZE}",
            data.len()
        ))
    })
}

/// The architecture and file type, which must be ones the surgery knows.
fn machine_and_kind(file: &ElfFile<'_>) -> Result<(Machine, ElfKind), ElfError> {
    let endian = file.endian();
    let header = file.elf_header();
    if !file.is_little_endian() {
        return Err(ElfError::Unsupported("big-endian ELF".into()));
    }
    let machine = match header.e_machine(endian) {
        elf::EM_X86_64 => Machine::X86_64,
        elf::EM_AARCH64 => Machine::Aarch64,
        other => return Err(ElfError::Unsupported(format!("machine {other}"))),
    };
    let kind = match header.e_type(endian) {
        elf::ET_DYN => ElfKind::Dynamic,
        elf::ET_EXEC => ElfKind::Executable,
        other => return Err(ElfError::Unsupported(format!("ELF type {other}"))),
    };
    Ok((machine, kind))
}

/// The largest page size the cut works in: 1 GiB, the largest huge page.
const MAX_PAGE_SIZE: u64 = 1 << 30;

/// The largest alignment of the load segments: the cut removes whole
/// pages of this size.
fn page_size(file: &ElfFile<'_>) -> Result<u64, ElfError> {
    let endian = file.endian();
    let page = file
        .elf_program_headers()
        .iter()
        .filter(|p| p.p_type(endian) == elf::PT_LOAD)
        .map(|p| p.p_align(endian))
        .max()
        .filter(|&align| align.is_power_of_two())
        .ok_or_else(|| {
            ElfError::Malformed("no load segment with a power-of-two alignment".into())
        })?;
    if page > MAX_PAGE_SIZE {
        return Err(ElfError::Unsupported(format!(
            "load segments aligned to {page:#x} bytes, more than the largest page ({MAX_PAGE_SIZE:#x})"
        )));
    }
    Ok(page)
}

/// Where `section` is in memory and in the file; it must have file data.
fn section_range(section: &ElfSection<'_, '_>) -> Result<SectionRange, ElfError> {
    let (offset, size) = section.file_range().ok_or_else(|| {
        ElfError::Malformed(format!(
            "{} has no file data",
            section.name().unwrap_or("?")
        ))
    })?;
    Ok(SectionRange {
        index: section.index().0,
        address: section.address(),
        offset,
        size,
    })
}

/// The bytes of `section` (called `name`), inside the file.
fn section_data<'a>(section: &ElfSection<'a, '_>, name: &str) -> Result<&'a [u8], ElfError> {
    section
        .data()
        .map_err(|e| ElfError::Malformed(format!("{name}: {e}")))
}

/// The bundles of `.hip_fatbin` (at address `fatbin`), found by where they
/// start.
struct BundleStarts<'b, 'a> {
    fatbin: u64,
    bundles: &'b [Bundle<'a>],
}

impl BundleStarts<'_, '_> {
    /// Index of the bundle starting at `target`, which wrapper `index` at
    /// `address` points at.
    fn find(&self, target: u64, index: usize, address: u64) -> Result<usize, ElfError> {
        target
            .checked_sub(self.fatbin)
            .and_then(|offset| bundle_starting_at(self.bundles, offset))
            .ok_or_else(|| ElfError::BadWrapper {
                index,
                address,
                message: format!(
                    "points at {target:#x}, which is not the start of a bundle in {FATBIN_SECTION} (bundles start at {})",
                    describe_starts(self.bundles, self.fatbin)
                ),
            })
    }
}

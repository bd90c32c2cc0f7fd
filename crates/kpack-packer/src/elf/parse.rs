//! Reads a fat ELF file: its `.hip_fatbin` bundles and which wrapper owns
//! which bundle, found from the relocation (or plain value) of each
//! wrapper's pointer field.

use std::collections::HashMap;

use object::elf;
use object::elf::FileHeader64;
use object::read::elf::{
    ElfFile64, ElfSection64, FileHeader, ProgramHeader, Rel, Rela, SectionHeader, Sym, SymbolTable,
};
use object::{pod, Endianness, FileKind, Object, ObjectSection};

use super::records::{malformed, HipWrapper, LE};
use super::surgery::MARKER_SECTION;
use super::{FATBIN_SECTION, HIPF_MAGIC, HIPK_MAGIC, WRAPPER_SECTION, WRAPPER_SIZE};
use crate::bundle::{parse_fatbin, Bundle};
use crate::error::ElfError;

/// The architectures whose fat binaries can be split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Machine {
    X86_64,
    Aarch64,
}

/// What the ELF file is, which decides how its pointers are relocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElfKind {
    /// `ET_DYN`: a shared library or a position-independent executable.
    Dynamic,
    /// `ET_EXEC`: loaded at its link address; pointers are plain values.
    Executable,
}

/// Where a section is, in memory and in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectionRange {
    pub index: usize,
    pub address: u64,
    pub offset: u64,
    pub size: u64,
}

/// How a wrapper's pointer gets its run-time value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointerSource {
    /// A RELA relocation; `symbol` is the dynamic symbol's value, if any.
    Rela {
        section: usize,
        index: usize,
        r_type: u32,
        addend: i64,
        symbol: Option<u64>,
    },
    /// A REL relocation; the addend is the value stored in the file.
    Rel {
        section: usize,
        index: usize,
        r_type: u32,
    },
    /// A packed relative relocation; the addend is the value in the file.
    Relr { section: usize },
    /// No relocation: the value in the file is the address (`ET_EXEC`).
    Absolute,
}

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

type ElfFile<'a> = ElfFile64<'a, Endianness>;
type ElfSection<'a, 'file> = ElfSection64<'a, 'file, Endianness>;

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

/// A host-only file as [`split_elf`](super::split_elf) leaves it: `HIPK`
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

/// How the pointer of wrapper `index` at `address` is relocated: by the
/// relocation found for it, or, in an `ET_EXEC` file, not at all.
fn pointer_source(
    relocations: &HashMap<u64, PointerSource>,
    kind: ElfKind,
    index: usize,
    address: u64,
) -> Result<PointerSource, ElfError> {
    match relocations.get(&address.wrapping_add(8)) {
        Some(&source) => Ok(source),
        None if kind == ElfKind::Executable => Ok(PointerSource::Absolute),
        None => Err(ElfError::BadWrapper {
            index,
            address,
            message: "its pointer has no relocation in a position-independent file".into(),
        }),
    }
}

/// Checks the magic of wrapper `record` (number `index`, at `address`)
/// and returns the value its pointer field holds in the file.
fn read_wrapper(record: &HipWrapper, index: usize, address: u64) -> Result<u64, ElfError> {
    match record.magic.get(LE) {
        HIPF_MAGIC => Ok(record.pointer.get(LE)),
        HIPK_MAGIC => Err(ElfError::AlreadySplit),
        magic => Err(ElfError::BadWrapper {
            index,
            address,
            message: format!("magic {magic:#010x} is not HIPF"),
        }),
    }
}

impl PointerSource {
    /// The address the pointer holds at run time, `stored` being the value
    /// in the file.
    fn target_address(self, stored: u64) -> u64 {
        match self {
            PointerSource::Rela { addend, symbol, .. } => {
                symbol.unwrap_or(0).wrapping_add(addend as u64)
            }
            PointerSource::Rel { .. } | PointerSource::Relr { .. } | PointerSource::Absolute => {
                stored
            }
        }
    }
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
            .and_then(|offset| self.bundles.iter().position(|b| b.offset as u64 == offset))
            .ok_or_else(|| ElfError::BadWrapper {
                index,
                address,
                message: format!(
                    "points at {target:#x}, which is not the start of a bundle in {FATBIN_SECTION} (bundles start at {})",
                    self.bundles
                        .iter()
                        .map(|b| format!("{:#x}", self.fatbin + b.offset as u64))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
    }
}

/// The pointer fields of the wrappers in `.hipFatBinSegment`.
#[derive(Clone, Copy)]
struct PointerFields(SectionRange);

impl PointerFields {
    /// Whether `offset` is the pointer field of a wrapper.
    fn contains(self, offset: u64) -> bool {
        let wrappers = self.0;
        offset >= wrappers.address
            && offset < wrappers.address.saturating_add(wrappers.size)
            && (offset - wrappers.address) % WRAPPER_SIZE == 8
    }
}

/// Every relocation whose offset is the pointer field of a wrapper, keyed
/// by that offset.
fn pointer_relocations(
    file: &ElfFile<'_>,
    wrappers: SectionRange,
) -> Result<HashMap<u64, PointerSource>, ElfError> {
    let endian = file.endian();
    let data = file.data();
    let sections = file.elf_section_table();
    let fields = PointerFields(wrappers);
    let mut found = HashMap::new();
    for (index, section) in sections.enumerate() {
        let index = index.0;
        if let Some((relocations, link)) = section.rela(endian, data).map_err(malformed)? {
            let symbols = sections
                .symbol_table_by_index(endian, data, link)
                .map_err(malformed)?;
            rela_pointers(relocations, &symbols, endian, index, fields, &mut found)?;
        } else if let Some((relocations, _)) = section.rel(endian, data).map_err(malformed)? {
            for (i, rel) in relocations.iter().enumerate() {
                let offset = rel.r_offset(endian);
                if fields.contains(offset) {
                    let r_type = rel.r_type(endian).0;
                    let source = PointerSource::Rel {
                        section: index,
                        index: i,
                        r_type,
                    };
                    found.insert(offset, source);
                }
            }
        } else if let Some(relocations) = section.relr(endian, data).map_err(malformed)? {
            for offset in relocations.filter(|&offset| fields.contains(offset)) {
                found.insert(offset, PointerSource::Relr { section: index });
            }
        }
    }
    Ok(found)
}

/// The wrapper pointers among the RELA relocations of section `section`,
/// with the value of the symbol each names.
fn rela_pointers(
    relocations: &[elf::Rela64<Endianness>],
    symbols: &SymbolTable<'_, FileHeader64<Endianness>>,
    endian: Endianness,
    section: usize,
    fields: PointerFields,
    found: &mut HashMap<u64, PointerSource>,
) -> Result<(), ElfError> {
    for (index, rela) in relocations.iter().enumerate() {
        let offset = rela.r_offset(endian);
        if !fields.contains(offset) {
            continue;
        }
        let symbol = match rela.r_sym(endian, false) {
            0 => None,
            symbol => Some(
                symbols
                    .symbol(object::SymbolIndex(symbol as usize))
                    .map_err(malformed)?
                    .st_value(endian),
            ),
        };
        let source = PointerSource::Rela {
            section,
            index,
            r_type: rela.r_type(endian, false).0,
            addend: rela.r_addend(endian),
            symbol,
        };
        found.insert(offset, source);
    }
    Ok(())
}

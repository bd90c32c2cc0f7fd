//! Reads a fat ELF file: its `.hip_fatbin` bundles and which wrapper owns
//! which bundle, found from the relocation (or plain value) of each
//! wrapper's pointer field.

use std::collections::HashMap;

use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, Rel, Rela, SectionHeader, Sym};
use object::{Endianness, FileKind, Object, ObjectSection};

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

impl<'a> FatElf<'a> {
    /// Parses `data`: `Ok(None)` when it is not a 64-bit little-endian ELF
    /// file with a `.hip_fatbin` section (nothing to split), an error when
    /// it is one but cannot be split.
    pub fn parse(data: &'a [u8]) -> Result<Option<FatElf<'a>>, ElfError> {
        if !matches!(FileKind::parse(data), Ok(FileKind::Elf64)) {
            return Ok(None);
        }
        let file =
            ElfFile64::<Endianness>::parse(data).map_err(|e| ElfError::Malformed(e.to_string()))?;
        let Some(fatbin_section) = file.section_by_name(FATBIN_SECTION) else {
            return Ok(None);
        };
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
        let page_size = file
            .elf_program_headers()
            .iter()
            .filter(|p| p.p_type(endian) == elf::PT_LOAD)
            .map(|p| p.p_align(endian))
            .max()
            .filter(|&align| align.is_power_of_two())
            .ok_or_else(|| {
                ElfError::Malformed("no load segment with a power-of-two alignment".into())
            })?;

        let range = |section: &object::read::elf::ElfSection64<'a, '_, Endianness>| -> Result<SectionRange, ElfError> {
            let (offset, size) = section
                .file_range()
                .ok_or_else(|| ElfError::Malformed(format!("{} has no file data", section.name().unwrap_or("?"))))?;
            Ok(SectionRange {
                index: section.index().0,
                address: section.address(),
                offset,
                size,
            })
        };
        let fatbin = range(&fatbin_section)?;
        let fatbin_data = fatbin_section
            .data()
            .map_err(|e| ElfError::Malformed(format!("{FATBIN_SECTION}: {e}")))?;
        let bundles = parse_fatbin(fatbin_data).map_err(ElfError::Bundle)?;

        let wrapper_section = file.section_by_name(WRAPPER_SECTION).ok_or_else(|| {
            ElfError::Malformed(format!("{FATBIN_SECTION} without {WRAPPER_SECTION}"))
        })?;
        let wrappers_range = range(&wrapper_section)?;
        let wrapper_data = wrapper_section
            .data()
            .map_err(|e| ElfError::Malformed(format!("{WRAPPER_SECTION}: {e}")))?;
        if !(wrapper_data.len() as u64).is_multiple_of(WRAPPER_SIZE) {
            return Err(ElfError::Malformed(format!(
                "{WRAPPER_SECTION} is {} bytes, not a multiple of {WRAPPER_SIZE}",
                wrapper_data.len()
            )));
        }

        let relocations = pointer_relocations(&file, wrappers_range)?;
        let mut wrappers = Vec::new();
        for (index, raw) in wrapper_data.chunks_exact(WRAPPER_SIZE as usize).enumerate() {
            let le32 =
                |at: usize| u32::from_le_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]]);
            let mut pointer_bytes = [0u8; 8];
            pointer_bytes.copy_from_slice(&raw[8..16]);
            let stored = u64::from_le_bytes(pointer_bytes);
            let address = wrappers_range.address + index as u64 * WRAPPER_SIZE;
            match le32(0) {
                HIPF_MAGIC => {}
                HIPK_MAGIC => return Err(ElfError::AlreadySplit),
                magic => {
                    return Err(ElfError::BadWrapper {
                        index,
                        address,
                        message: format!("magic {magic:#010x} is not HIPF"),
                    })
                }
            }
            let pointer = match relocations.get(&(address + 8)) {
                Some(&source) => source,
                None if kind == ElfKind::Executable => PointerSource::Absolute,
                None => {
                    return Err(ElfError::BadWrapper {
                        index,
                        address,
                        message: "its pointer has no relocation in a position-independent file"
                            .into(),
                    })
                }
            };
            let target_address = match pointer {
                PointerSource::Rela { addend, symbol, .. } => {
                    symbol.unwrap_or(0).wrapping_add(addend as u64)
                }
                PointerSource::Rel { .. }
                | PointerSource::Relr { .. }
                | PointerSource::Absolute => stored,
            };
            let bundle = target_address
                .checked_sub(fatbin.address)
                .and_then(|offset| bundles.iter().position(|b| b.offset as u64 == offset))
                .ok_or_else(|| ElfError::BadWrapper {
                    index,
                    address,
                    message: format!(
                        "points at {target_address:#x}, which is not the start of a bundle in {FATBIN_SECTION} (bundles start at {})",
                        bundles
                            .iter()
                            .map(|b| format!("{:#x}", fatbin.address + b.offset as u64))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                })?;
            wrappers.push(Wrapper {
                address,
                file_offset: wrappers_range.offset + index as u64 * WRAPPER_SIZE,
                target_address,
                pointer,
                bundle,
            });
        }
        Ok(Some(FatElf {
            machine,
            kind,
            page_size,
            fatbin,
            wrapper_section: wrappers_range,
            bundles,
            wrappers,
        }))
    }
}

/// Every relocation whose offset is the pointer field of a wrapper, keyed
/// by that offset.
fn pointer_relocations(
    file: &ElfFile64<'_, Endianness>,
    wrappers: SectionRange,
) -> Result<HashMap<u64, PointerSource>, ElfError> {
    let endian = file.endian();
    let data = file.data();
    let sections = file.elf_section_table();
    let is_pointer = |offset: u64| {
        offset >= wrappers.address
            && offset < wrappers.address + wrappers.size
            && (offset - wrappers.address) % WRAPPER_SIZE == 8
    };
    let malformed = |e: object::Error| ElfError::Malformed(e.to_string());
    let mut found = HashMap::new();
    for (section_index, section) in sections.enumerate() {
        let index = section_index.0;
        match section.sh_type(endian) {
            elf::SHT_RELA => {
                let Some((relocations, link)) = section.rela(endian, data).map_err(malformed)?
                else {
                    continue;
                };
                let symbols = sections
                    .symbol_table_by_index(endian, data, link)
                    .map_err(malformed)?;
                for (i, rela) in relocations.iter().enumerate() {
                    let offset = rela.r_offset(endian);
                    if !is_pointer(offset) {
                        continue;
                    }
                    let symbol_index = rela.r_sym(endian, false);
                    let symbol = if symbol_index == 0 {
                        None
                    } else {
                        let sym = symbols
                            .symbol(object::SymbolIndex(symbol_index as usize))
                            .map_err(malformed)?;
                        Some(sym.st_value(endian))
                    };
                    found.insert(
                        offset,
                        PointerSource::Rela {
                            section: index,
                            index: i,
                            r_type: rela.r_type(endian, false).0,
                            addend: rela.r_addend(endian),
                            symbol,
                        },
                    );
                }
            }
            elf::SHT_REL => {
                let Some((relocations, _)) = section.rel(endian, data).map_err(malformed)? else {
                    continue;
                };
                for (i, rel) in relocations.iter().enumerate() {
                    let offset = rel.r_offset(endian);
                    if is_pointer(offset) {
                        found.insert(
                            offset,
                            PointerSource::Rel {
                                section: index,
                                index: i,
                                r_type: rel.r_type(endian).0,
                            },
                        );
                    }
                }
            }
            elf::SHT_RELR => {
                let Some(relocations) = section.relr(endian, data).map_err(malformed)? else {
                    continue;
                };
                for offset in relocations {
                    if is_pointer(offset) {
                        found.insert(offset, PointerSource::Relr { section: index });
                    }
                }
            }
            _ => {}
        }
    }
    Ok(found)
}

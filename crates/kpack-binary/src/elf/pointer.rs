//! How a wrapper's pointer gets its run-time value in an ELF file: the
//! relocation (RELA, REL or RELR) at its pointer field, or in an `ET_EXEC`
//! file the value itself; read when a fat file is parsed, rewritten with
//! the wrapper when it is split or made fat again.

use std::collections::HashMap;

use object::elf;
use object::elf::FileHeader64;
use object::read::elf::{Rel, Rela, SectionHeader, Sym, SymbolTable};
use object::{Endianness, U32, U64};

use super::file::{ElfFile, ElfKind, SectionRange};
use super::records::{malformed, record_mut, section_records_mut, Rela as RelaRecord, Shdr, LE};
use crate::error::ElfError;
use crate::wrapper::{HipWrapper, HIPF_MAGIC, HIPK_MAGIC, POINTER_OFFSET, WRAPPER_SIZE};

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

/// Where a wrapper is in the output file, and how its pointer is relocated.
#[derive(Debug, Clone, Copy)]
pub(super) struct WrapperSite {
    pub file_offset: u64,
    pub pointer: PointerSource,
}

/// What a wrapper is rewritten to hold.
#[derive(Debug, Clone, Copy)]
pub(super) struct WrapperValue {
    pub magic: u32,
    /// The address its pointer holds at run time.
    pub address: u64,
    pub reserved: u64,
}

/// Writes the wrapper at `site` with `value` (its version kept), and makes
/// its pointer's relocation (`shdrs` the output's section headers) give
/// that address at run time: a RELA entry's addend is set; for REL and RELR the
/// value in the file is the addend, and in an `ET_EXEC` file the address
/// itself, both written with the record. The relocation keeps its kind.
pub(super) fn write_wrapper(
    out: &mut [u8],
    shdrs: &[Shdr],
    site: WrapperSite,
    value: WrapperValue,
) -> Result<(), ElfError> {
    let record = record_mut::<HipWrapper>(out, site.file_offset)?;
    *record = HipWrapper {
        magic: U32::new(LE, value.magic),
        pointer: U64::new(LE, value.address),
        reserved: U64::new(LE, value.reserved),
        ..*record
    };
    if let PointerSource::Rela {
        section,
        index,
        symbol,
        ..
    } = site.pointer
    {
        let rela = shdrs
            .get(section)
            .ok_or_else(|| ElfError::Malformed(format!("relocation section {section} vanished")))?;
        section_records_mut::<RelaRecord>(out, rela)?
            .get_mut(index)
            .ok_or_else(|| {
                ElfError::Malformed(format!("relocation {index} of section {section} vanished"))
            })?
            .r_addend
            .set(LE, value.address.wrapping_sub(symbol.unwrap_or(0)) as i64);
    }
    Ok(())
}

/// How the pointer of wrapper `index` at `address` is relocated: by the
/// relocation found for it, or, in an `ET_EXEC` file, not at all.
pub(super) fn pointer_source(
    relocations: &HashMap<u64, PointerSource>,
    kind: ElfKind,
    index: usize,
    address: u64,
) -> Result<PointerSource, ElfError> {
    match relocations.get(&address.wrapping_add(POINTER_OFFSET)) {
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
pub(super) fn read_wrapper(
    record: &HipWrapper,
    index: usize,
    address: u64,
) -> Result<u64, ElfError> {
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
    pub(super) fn target_address(self, stored: u64) -> u64 {
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

/// The pointer fields of the wrappers in `.hipFatBinSegment`.
#[derive(Clone, Copy)]
struct PointerFields(SectionRange);

impl PointerFields {
    /// Whether `offset` is the pointer field of a wrapper.
    fn contains(self, offset: u64) -> bool {
        let wrappers = self.0;
        offset >= wrappers.address
            && offset < wrappers.address.saturating_add(wrappers.size)
            && (offset - wrappers.address) % WRAPPER_SIZE == POINTER_OFFSET
    }
}

/// Every relocation whose offset is the pointer field of a wrapper, keyed
/// by that offset.
pub(super) fn pointer_relocations(
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

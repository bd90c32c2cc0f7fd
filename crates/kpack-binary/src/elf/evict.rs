//! Making room for a larger program header table where it is, at the start
//! of the first load segment, by moving the sections right after it to the
//! new segment at the end of the file.
//!
//! Only sections the dynamic loader finds through the program headers or
//! `.dynamic` can move (notes, `.interp`, hash tables, dynamic symbols and
//! strings, symbol versions, dynamic relocations): nothing else refers to
//! their addresses. They move as one block by a whole number of pages, so
//! every alignment holds. Keeping the table in the first segment, after the
//! ELF header, is the layout every linker produces and the one GNU strip
//! preserves; elsewhere strip keeps only a table right after another load
//! segment's last section (`beside.rs`) and re-lays out any other into a
//! broken file.

use object::elf::{
    DynamicTag, ProgramType, SectionType, DT_GNU_HASH, DT_HASH, DT_JMPREL, DT_NULL, DT_REL,
    DT_RELA, DT_RELR, DT_STRTAB, DT_SYMTAB, DT_VERDEF, DT_VERNEED, DT_VERSYM, PT_GNU_PROPERTY,
    PT_INTERP, PT_LOAD, PT_NOTE, PT_PHDR, SHF_ALLOC, SHT_DYNAMIC, SHT_DYNSYM, SHT_GNU_HASH,
    SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM, SHT_HASH, SHT_NOTE, SHT_PROGBITS, SHT_REL,
    SHT_RELA, SHT_RELR, SHT_STRTAB, SHT_SYMTAB,
};
use object::read::elf::{Dyn as _, ProgramHeader, SectionHeader, Sym as _};
use object::StringTable;

use super::records::{
    has_file_data, malformed, section_records_mut, Dyn, Phdr, SegmentEnds, Shdr, Sym, LE,
};
use crate::error::ElfError;

/// `.dynamic` tags whose value is the address of a section that may move.
const ADDRESS_TAGS: &[DynamicTag] = &[
    DT_HASH,
    DT_STRTAB,
    DT_SYMTAB,
    DT_RELA,
    DT_REL,
    DT_JMPREL,
    DT_RELR,
    DT_GNU_HASH,
    DT_VERSYM,
    DT_VERDEF,
    DT_VERNEED,
];

/// Segment types that describe one of the movable sections.
const MOVABLE_SEGMENTS: &[ProgramType] = &[PT_INTERP, PT_NOTE, PT_GNU_PROPERTY];

/// Section types that may move.
const MOVABLE_SECTIONS: &[SectionType] = &[
    SHT_PROGBITS, // only `.interp`, checked by name
    SHT_STRTAB,   // only the dynamic string table, checked by tag
    SHT_RELA,
    SHT_HASH,
    SHT_NOTE,
    SHT_REL,
    SHT_DYNSYM,
    SHT_RELR,
    SHT_GNU_HASH,
    SHT_GNU_VERDEF,
    SHT_GNU_VERNEED,
    SHT_GNU_VERSYM,
];

/// The sections to move: a contiguous block of the file.
#[derive(Debug, Clone)]
pub(super) struct Eviction {
    /// Indices of the moved sections.
    pub sections: Vec<usize>,
    /// File range of the block.
    pub start: u64,
    pub end: u64,
    /// Address of the block's first byte.
    pub address: u64,
}

impl Eviction {
    /// Plans moving whatever lies in file bytes `[from, to)` (all within
    /// the first load segment); `None` when something there cannot move.
    pub fn plan(
        shdrs: &[Shdr],
        names: &[u8],
        dynamic_addresses: &[u64],
        from: u64,
        to: u64,
    ) -> Option<Eviction> {
        let mut sections: Vec<usize> = Vec::new();
        let (mut start, mut end) = (u64::MAX, 0);
        // Grow the block until no section straddles its end.
        let mut limit = to;
        loop {
            let before = sections.len();
            for (index, section) in shdrs.iter().enumerate() {
                if sections.contains(&index) || !has_file_data(section) || section.sh_size(LE) == 0
                {
                    continue;
                }
                let s = section.sh_offset(LE);
                let e = s.saturating_add(section.sh_size(LE));
                if s < limit && e > from {
                    if !section.sh_flags(LE).contains(SHF_ALLOC)
                        || !movable(section, names, dynamic_addresses)
                    {
                        return None;
                    }
                    sections.push(index);
                    start = start.min(s);
                    end = end.max(e);
                }
            }
            limit = limit.max(end);
            if sections.len() == before {
                break;
            }
        }
        let first = sections
            .iter()
            .filter_map(|&i| shdrs.get(i))
            .min_by_key(|s| s.sh_offset(LE))?;
        Some(Eviction {
            address: first.sh_addr(LE) - (first.sh_offset(LE) - start),
            sections,
            start,
            end,
        })
    }
}

fn movable(section: &Shdr, names: &[u8], dynamic_addresses: &[u64]) -> bool {
    let kind = section.sh_type(LE);
    if !MOVABLE_SECTIONS.contains(&kind) {
        return false;
    }
    match kind {
        SHT_PROGBITS => {
            let names = StringTable::new(names, 0, names.len() as u64);
            section.name(LE, names).ok() == Some(b".interp".as_slice())
        }
        SHT_STRTAB => dynamic_addresses.contains(&section.sh_addr(LE)),
        _ => true,
    }
}

/// Values of the address tags in `.dynamic` (for recognising `.dynstr`).
pub(super) fn dynamic_addresses(data: &[u8], shdrs: &[Shdr]) -> Result<Vec<u64>, ElfError> {
    let mut values = Vec::new();
    for section in shdrs {
        let Some((entries, _)) = section.dynamic(LE, data).map_err(malformed)? else {
            continue;
        };
        for entry in entries.iter().take_while(|e| e.d_tag(LE) != DT_NULL) {
            if ADDRESS_TAGS.contains(&entry.d_tag(LE)) {
                values.push(entry.d_val(LE));
            }
        }
    }
    Ok(values)
}

/// Rewrites every reference to the moved sections in `out` (the file body,
/// section offsets already final in `shdrs`) for a move by `delta` bytes in
/// memory: `.dynamic` tags, symbols defined in them, and the segments that
/// describe them. Section headers are updated by the caller.
pub(super) fn relocate_references(
    out: &mut [u8],
    shdrs: &[Shdr],
    phdrs: &mut [Phdr],
    eviction: &Eviction,
    delta: u64,
    file_delta: u64,
) -> Result<(), ElfError> {
    let moved = |address: u64| {
        eviction
            .sections
            .iter()
            .filter_map(|&i| shdrs.get(i))
            .any(|s| {
                let start = s.sh_addr(LE);
                address >= start && address < start.saturating_add(s.sh_size(LE).max(1))
            })
    };
    for section in shdrs.iter().filter(|s| s.sh_type(LE) == SHT_DYNAMIC) {
        let entries = section_records_mut::<Dyn>(out, section)?;
        for entry in entries.iter_mut().take_while(|e| e.d_tag(LE) != DT_NULL) {
            let value = entry.d_val(LE);
            if ADDRESS_TAGS.contains(&entry.d_tag(LE)) && moved(value) {
                entry.d_val.set(LE, value.wrapping_add(delta));
            }
        }
    }
    for section in shdrs
        .iter()
        .filter(|s| s.sh_type(LE) == SHT_SYMTAB || s.sh_type(LE) == SHT_DYNSYM)
    {
        for symbol in section_records_mut::<Sym>(out, section)? {
            if eviction
                .sections
                .contains(&usize::from(symbol.st_shndx(LE).0))
            {
                let value = symbol.st_value(LE);
                symbol.st_value.set(LE, value.wrapping_add(delta));
            }
        }
    }
    for phdr in phdrs.iter_mut() {
        if phdr.p_type(LE) == PT_LOAD || phdr.p_filesz(LE) == 0 {
            continue;
        }
        let inside = phdr.p_offset(LE) >= eviction.start && phdr.file_end() <= eviction.end;
        let overlaps = phdr.p_offset(LE) < eviction.end && phdr.file_end() > eviction.start;
        if inside && MOVABLE_SEGMENTS.contains(&phdr.p_type(LE)) {
            phdr.p_offset.set(LE, phdr.p_offset(LE) + file_delta);
            phdr.p_vaddr.set(LE, phdr.p_vaddr(LE).wrapping_add(delta));
            phdr.p_paddr.set(LE, phdr.p_paddr(LE).wrapping_add(delta));
        } else if overlaps && phdr.p_type(LE) != PT_PHDR {
            return Err(ElfError::Unsupported(format!(
                "segment of type {:#x} covers sections that must move to make room for program headers",
                phdr.p_type(LE)
            )));
        }
    }
    Ok(())
}

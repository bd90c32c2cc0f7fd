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
//! preserves; a table elsewhere is re-laid out by strip into a broken file.

use super::records::*;
use crate::error::ElfError;

const SHT_DYNAMIC: u32 = 6;
const SHT_SYMTAB: u32 = 2;
const SHT_DYNSYM: u32 = 11;
const SYM_SIZE: usize = 24;
const DYN_SIZE: usize = 16;

/// `.dynamic` tags whose value is the address of a section that may move.
const ADDRESS_TAGS: &[u64] = &[
    4,           // DT_HASH
    5,           // DT_STRTAB
    6,           // DT_SYMTAB
    7,           // DT_RELA
    17,          // DT_REL
    23,          // DT_JMPREL
    36,          // DT_RELR
    0x6fff_fef5, // DT_GNU_HASH
    0x6fff_fff0, // DT_VERSYM
    0x6fff_fffc, // DT_VERDEF
    0x6fff_fffe, // DT_VERNEED
];

/// Segment types that describe one of the movable sections.
const MOVABLE_SEGMENTS: &[u32] = &[
    3,           // PT_INTERP
    4,           // PT_NOTE
    0x6474_e553, // PT_GNU_PROPERTY
];

/// Section types that may move.
const MOVABLE_SECTIONS: &[u32] = &[
    1,           // SHT_PROGBITS (only `.interp`, checked by name)
    3,           // SHT_STRTAB (only the dynamic string table, checked by tag)
    4,           // SHT_RELA
    5,           // SHT_HASH
    7,           // SHT_NOTE
    9,           // SHT_REL
    11,          // SHT_DYNSYM
    19,          // SHT_RELR
    0x6fff_fff6, // SHT_GNU_HASH
    0x6fff_fffd, // SHT_GNU_verdef
    0x6fff_fffe, // SHT_GNU_verneed
    0x6fff_ffff, // SHT_GNU_versym
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
                if sections.contains(&index) || !section.has_file_data() || section.sh_size == 0 {
                    continue;
                }
                let (s, e) = (section.sh_offset, section.sh_offset + section.sh_size);
                if s < limit && e > from {
                    if section.sh_flags & SHF_ALLOC == 0
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
        let first = *sections.iter().min_by_key(|&&i| shdrs[i].sh_offset)?;
        Some(Eviction {
            address: shdrs[first].sh_addr - (shdrs[first].sh_offset - start),
            sections,
            start,
            end,
        })
    }
}

fn movable(section: &Shdr, names: &[u8], dynamic_addresses: &[u64]) -> bool {
    if !MOVABLE_SECTIONS.contains(&section.sh_type) {
        return false;
    }
    match section.sh_type {
        SHT_PROGBITS => section_name(names, section.sh_name) == Some(b".interp".as_slice()),
        3 => dynamic_addresses.contains(&section.sh_addr),
        _ => true,
    }
}

fn section_name(names: &[u8], offset: u32) -> Option<&[u8]> {
    let rest = names.get(offset as usize..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    Some(&rest[..end])
}

/// Values of the address tags in `.dynamic` (for recognising `.dynstr`).
pub(super) fn dynamic_addresses(data: &[u8], shdrs: &[Shdr]) -> Vec<u64> {
    let mut values = Vec::new();
    for section in shdrs.iter().filter(|s| s.sh_type == SHT_DYNAMIC) {
        let base = section.sh_offset as usize;
        for entry in 0..(section.sh_size as usize / DYN_SIZE) {
            let at = base + entry * DYN_SIZE;
            let (Ok(tag), Ok(value)) = (read_u64(data, at), read_u64(data, at + 8)) else {
                break;
            };
            if tag == 0 {
                break;
            }
            if ADDRESS_TAGS.contains(&tag) {
                values.push(value);
            }
        }
    }
    values
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
        eviction.sections.iter().any(|&i| {
            let s = &shdrs[i];
            address >= s.sh_addr && address < s.sh_addr + s.sh_size.max(1)
        })
    };
    for section in shdrs.iter().filter(|s| s.sh_type == SHT_DYNAMIC) {
        let base = section.sh_offset as usize;
        for entry in 0..(section.sh_size as usize / DYN_SIZE) {
            let at = base + entry * DYN_SIZE;
            let tag = read_u64(out, at)?;
            if tag == 0 {
                break;
            }
            let value = read_u64(out, at + 8)?;
            if ADDRESS_TAGS.contains(&tag) && moved(value) {
                write_u64(out, at + 8, value.wrapping_add(delta));
            }
        }
    }
    for section in shdrs
        .iter()
        .filter(|s| s.sh_type == SHT_SYMTAB || s.sh_type == SHT_DYNSYM)
    {
        let base = section.sh_offset as usize;
        for entry in 0..(section.sh_size as usize / SYM_SIZE) {
            let at = base + entry * SYM_SIZE;
            let shndx = read_u16(out, at + 6)? as usize;
            if eviction.sections.contains(&shndx) {
                let value = read_u64(out, at + 8)?;
                write_u64(out, at + 8, value.wrapping_add(delta));
            }
        }
    }
    for phdr in phdrs.iter_mut() {
        if phdr.p_type == PT_LOAD || phdr.p_filesz == 0 {
            continue;
        }
        let inside = phdr.p_offset >= eviction.start && phdr.file_end() <= eviction.end;
        let overlaps = phdr.p_offset < eviction.end && phdr.file_end() > eviction.start;
        if inside && MOVABLE_SEGMENTS.contains(&phdr.p_type) {
            phdr.p_offset += file_delta;
            phdr.p_vaddr = phdr.p_vaddr.wrapping_add(delta);
            phdr.p_paddr = phdr.p_paddr.wrapping_add(delta);
        } else if overlaps && phdr.p_type != PT_PHDR {
            return Err(ElfError::Unsupported(format!(
                "segment of type {:#x} covers sections that must move to make room for program headers",
                phdr.p_type
            )));
        }
    }
    Ok(())
}

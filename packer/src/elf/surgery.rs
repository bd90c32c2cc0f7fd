//! Turns a fat ELF file into a host-only one (03-packer.md, "Transforming
//! the binary"):
//!
//! - the page-aligned middle of `.hip_fatbin` leaves the file; the section
//!   becomes memory-only (`NOBITS`) at the end of its load segment, and
//!   what followed it in that segment moves to a segment of its own, so
//!   every load segment keeps its offset congruent to its address and no
//!   two share file bytes; everything after the cut shifts down by a whole
//!   number of pages;
//! - the remaining device bytes (the partial pages around the cut) are
//!   zeroed;
//! - a `.rocm_kpack_ref` section holds the marker, mapped by a new
//!   read-only load segment past every other one, which also carries the
//!   program header table when it has no room to grow where it is;
//! - every wrapper becomes `HIPK`, points at the marker (its relocation
//!   rewritten in kind) and stores its bundle index.
//!
//! The result is a normal file: section headers are rewritten at the end
//! with the new name in a new `.shstrtab`, existing section indices stay.

use super::evict::{dynamic_addresses, relocate_references, Eviction};
use super::parse::{FatElf, PointerSource};
use super::records::*;
use super::{HIPK_MAGIC, WRAPPER_SIZE};
use crate::error::ElfError;

/// The marker section's name.
pub const MARKER_SECTION: &str = ".rocm_kpack_ref";

/// What the surgery did, for summaries and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitLayout {
    /// File bytes removed with the middle of `.hip_fatbin`.
    pub removed: u64,
    /// Address of the marker.
    pub marker_address: u64,
    /// Whether the program header table moved into the new segment.
    pub moved_program_headers: bool,
}

/// Where the grown program header table goes.
#[derive(Debug)]
enum Layout {
    /// There is room where it is.
    InPlace,
    /// Where it is, after moving the sections that follow it.
    Evict(Eviction),
    /// At the start of the new segment (GNU strip mishandles this one).
    MoveTable,
}

fn round_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align) * align
}

fn round_down(value: u64, align: u64) -> u64 {
    value / align * align
}

/// Rewrites `data` (parsed as `fat`) into a host-only file whose wrappers
/// point at `marker`.
pub fn split_elf(
    data: &[u8],
    fat: &FatElf<'_>,
    marker: &[u8],
) -> Result<(Vec<u8>, SplitLayout), ElfError> {
    let page = fat.page_size;
    let malformed = |message: String| ElfError::Malformed(message);

    let phoff = read_u64(data, E_PHOFF)? as usize;
    let phnum = read_u16(data, E_PHNUM)? as usize;
    let shoff = read_u64(data, E_SHOFF)? as usize;
    let shnum = read_u16(data, E_SHNUM)? as usize;
    let shstrndx = read_u16(data, E_SHSTRNDX)? as usize;
    if read_u16(data, E_PHENTSIZE)? as usize != PHDR_SIZE
        || read_u16(data, E_SHENTSIZE)? as usize != SHDR_SIZE
    {
        return Err(malformed(
            "unexpected program or section header entry size".into(),
        ));
    }
    let phdrs = (0..phnum)
        .map(|i| Phdr::read(data, phoff + i * PHDR_SIZE))
        .collect::<Result<Vec<_>, _>>()?;
    let mut shdrs = (0..shnum)
        .map(|i| Shdr::read(data, shoff + i * SHDR_SIZE))
        .collect::<Result<Vec<_>, _>>()?;
    let shstrtab = *shdrs
        .get(shstrndx)
        .ok_or_else(|| malformed("no section name table".into()))?;

    // The fat binary section and its load segment.
    let fatbin = fat.fatbin;
    let (f0, f1) = (fatbin.address, fatbin.address + fatbin.size);
    let off_f0 = fatbin.offset;
    let segment_index = phdrs
        .iter()
        .position(|p| p.p_type == PT_LOAD && p.p_vaddr <= f0 && f1 <= p.p_vaddr + p.p_filesz)
        .ok_or_else(|| {
            malformed(".hip_fatbin is not inside the file image of a load segment".into())
        })?;
    let segment = phdrs[segment_index];
    if off_f0 - segment.p_offset != f0 - segment.p_vaddr {
        return Err(malformed(
            ".hip_fatbin's offset does not match its address".into(),
        ));
    }

    // The whole pages inside [f0, f1) leave the file.
    let (a0, a1) = (round_up(f0, page), round_down(f1, page));
    // With no whole page inside (a small section, or pages larger than it)
    // nothing is cut; the section still becomes memory-only.
    let removed = a1.saturating_sub(a0);
    let cut_start = if removed > 0 {
        off_f0 + (a0 - f0)
    } else {
        off_f0 + fatbin.size
    };
    let cut_end = cut_start + removed;
    let shift = |offset: u64| {
        if offset >= cut_end {
            offset - removed
        } else {
            offset
        }
    };

    // Nothing else may live in the cut.
    for (index, section) in shdrs.iter().enumerate() {
        if removed == 0 || index == fatbin.index || !section.has_file_data() || section.sh_size == 0
        {
            continue;
        }
        let (start, end) = (section.sh_offset, section.sh_offset + section.sh_size);
        if start < cut_end && end > cut_start {
            return Err(malformed(format!(
                "section {index} overlaps the device code being removed"
            )));
        }
    }

    // Program headers: the fat segment ends with `.hip_fatbin` as memory
    // only; whatever followed it gets a segment of its own.
    let next_start = shdrs
        .iter()
        .filter(|s| {
            s.sh_flags & SHF_ALLOC != 0
                && s.sh_addr >= f1
                && s.sh_addr < segment.memory_end()
                && s.sh_size > 0
        })
        .map(|s| s.sh_addr)
        .min();
    let mut new_phdrs: Vec<Phdr> = Vec::with_capacity(phnum + 2);
    for (index, phdr) in phdrs.iter().enumerate() {
        if index == segment_index {
            let head = Phdr {
                p_filesz: f0 - segment.p_vaddr,
                p_memsz: match next_start {
                    Some(_) => f1 - segment.p_vaddr,
                    None => segment.p_memsz.max(f1 - segment.p_vaddr),
                },
                ..segment
            };
            new_phdrs.push(head);
            if let Some(start) = next_start {
                let delta = start - segment.p_vaddr;
                new_phdrs.push(Phdr {
                    p_offset: shift(segment.p_offset + delta),
                    p_vaddr: start,
                    p_paddr: segment.p_paddr + delta,
                    p_filesz: segment.p_filesz.saturating_sub(delta),
                    p_memsz: segment.p_memsz - delta,
                    ..segment
                });
            }
            continue;
        }
        if removed > 0
            && phdr.p_filesz > 0
            && phdr.p_offset < cut_end
            && phdr.file_end() > cut_start
        {
            return Err(malformed(format!(
                "segment {index} overlaps the device code being removed"
            )));
        }
        let mut phdr = *phdr;
        phdr.p_offset = shift(phdr.p_offset);
        new_phdrs.push(phdr);
    }

    // The new load segment goes after the last one, page-aligned in memory
    // and in the file.
    let body_len = data.len() as u64 - removed;
    let new_vaddr = round_up(
        phdrs
            .iter()
            .filter(|p| p.p_type == PT_LOAD)
            .map(Phdr::memory_end)
            .max()
            .unwrap_or(0),
        page,
    );
    let new_offset = round_up(body_len, page);
    let last_load = new_phdrs
        .iter()
        .rposition(|p| p.p_type == PT_LOAD)
        .unwrap_or(new_phdrs.len() - 1);
    let table_len = ((new_phdrs.len() + 1) * PHDR_SIZE) as u64;
    let phoff64 = phoff as u64;
    let first_load = *phdrs
        .iter()
        .find(|p| p.p_type == PT_LOAD && p.p_offset <= phoff64 && phoff64 < p.file_end())
        .ok_or_else(|| malformed("no load segment maps the program headers".into()))?;
    // Room to grow in place: up to the first byte anything else uses.
    let first_content = shdrs
        .iter()
        .filter(|s| s.has_file_data() && s.sh_size > 0 && s.sh_offset > phoff64)
        .map(|s| s.sh_offset)
        .chain(
            phdrs
                .iter()
                .filter(|p| p.p_type != PT_PHDR && p.p_offset > phoff64)
                .map(|p| p.p_offset),
        )
        .min()
        .unwrap_or(u64::MAX);
    let names_start = shstrtab.sh_offset as usize;
    let old_names = data
        .get(names_start..names_start + shstrtab.sh_size as usize)
        .ok_or_else(|| malformed("section name table past the end of the file".into()))?;
    let layout = if phoff64 + table_len <= first_content {
        Layout::InPlace
    } else {
        match Eviction::plan(
            &shdrs,
            old_names,
            &dynamic_addresses(data, &shdrs),
            phoff64,
            phoff64 + table_len,
        ) {
            Some(eviction)
                if eviction.end <= first_load.file_end() && eviction.start >= phoff64 =>
            {
                Layout::Evict(eviction)
            }
            _ => Layout::MoveTable,
        }
    };

    // The new segment's start (congruent with the moved block, if any) and
    // where the marker goes in it.
    let (segment_vaddr, segment_offset, marker_at) = match &layout {
        Layout::InPlace => (new_vaddr, new_offset, 0),
        Layout::Evict(eviction) => {
            let skew = eviction.address % page;
            (
                new_vaddr + skew,
                new_offset + skew,
                round_up(eviction.end - eviction.start, 8),
            )
        }
        Layout::MoveTable => (new_vaddr, new_offset, table_len),
    };
    let marker_address = segment_vaddr + marker_at;
    let segment_len = marker_at + marker.len() as u64;
    new_phdrs.insert(
        last_load + 1,
        Phdr {
            p_type: PT_LOAD,
            p_flags: PF_R,
            p_offset: segment_offset,
            p_vaddr: segment_vaddr,
            p_paddr: segment_vaddr,
            p_filesz: segment_len,
            p_memsz: segment_len,
            p_align: page,
        },
    );

    // The body without the cut, device bytes around it zeroed.
    let mut out = Vec::with_capacity((segment_offset + segment_len) as usize + 4096);
    out.extend_from_slice(&data[..cut_start as usize]);
    out.extend_from_slice(&data[cut_end as usize..]);
    let zero_start = off_f0 as usize;
    let zero_end = (off_f0 + fatbin.size - removed) as usize;
    out[zero_start..zero_end].fill(0);

    // Section offsets in the body: `.hip_fatbin` becomes memory-only and
    // later sections shift.
    for (index, section) in shdrs.iter_mut().enumerate() {
        if index == fatbin.index {
            section.sh_type = SHT_NOBITS;
            section.sh_offset = off_f0;
        } else if section.sh_type != SHT_NULL {
            section.sh_offset = shift(section.sh_offset);
        }
    }

    // Wrappers and their relocations.
    for wrapper in &fat.wrappers {
        let at = shift(wrapper.file_offset) as usize;
        write_u32(&mut out, at, HIPK_MAGIC);
        write_u64(&mut out, at + 8, marker_address);
        write_u64(&mut out, at + 16, wrapper.bundle as u64);
        match wrapper.pointer {
            PointerSource::Rela {
                section,
                index,
                symbol,
                ..
            } => {
                let rela = shdrs
                    .get(section)
                    .ok_or_else(|| malformed(format!("relocation section {section} vanished")))?;
                let entry = rela.sh_offset as usize + index * RELA_SIZE;
                let addend = marker_address.wrapping_sub(symbol.unwrap_or(0));
                write_u64(&mut out, entry + 16, addend);
            }
            // The value in the file is the implicit addend (REL, RELR) or
            // the address itself (ET_EXEC): both were written above.
            PointerSource::Rel { .. } | PointerSource::Relr { .. } | PointerSource::Absolute => {}
        }
    }
    debug_assert_eq!(WRAPPER_SIZE, 24);

    // Sections moved out of the table's way: references first (in the
    // body, where the tables still are), then the bytes.
    let block = if let Layout::Evict(eviction) = &layout {
        let delta = segment_vaddr - eviction.address;
        let file_delta = segment_offset - eviction.start;
        relocate_references(
            &mut out,
            &shdrs,
            &mut new_phdrs,
            eviction,
            delta,
            file_delta,
        )?;
        let range = eviction.start as usize..eviction.end as usize;
        let bytes = out[range.clone()].to_vec();
        out[range].fill(0);
        for &index in &eviction.sections {
            shdrs[index].sh_addr += delta;
            shdrs[index].sh_offset += file_delta;
        }
        bytes
    } else {
        Vec::new()
    };

    // Program headers, in place or in the new segment.
    let (table_offset, table_vaddr) = match layout {
        Layout::InPlace | Layout::Evict(_) => (
            phoff64,
            first_load.p_vaddr + (phoff64 - first_load.p_offset),
        ),
        Layout::MoveTable => (segment_offset, segment_vaddr),
    };
    for phdr in new_phdrs.iter_mut().filter(|p| p.p_type == PT_PHDR) {
        phdr.p_offset = table_offset;
        phdr.p_vaddr = table_vaddr;
        phdr.p_paddr = table_vaddr;
        phdr.p_filesz = table_len;
        phdr.p_memsz = table_len;
    }
    let mut table = Vec::with_capacity(table_len as usize);
    for phdr in &new_phdrs {
        phdr.encode(&mut table);
    }

    // The new segment: the moved block or the table, then the marker.
    out.resize(segment_offset as usize, 0);
    match layout {
        Layout::InPlace | Layout::Evict(_) => {
            out.extend_from_slice(&block);
            out.resize((segment_offset + marker_at) as usize, 0);
            out[phoff..phoff + table.len()].copy_from_slice(&table);
        }
        Layout::MoveTable => out.extend_from_slice(&table),
    }
    out.extend_from_slice(marker);

    // Section headers: the marker section is appended, names go to a new
    // table at the end.
    let mut names = old_names.to_vec();
    let marker_name = names.len() as u32;
    names.extend_from_slice(MARKER_SECTION.as_bytes());
    names.push(0);
    let names_offset = out.len() as u64;
    out.extend_from_slice(&names);
    shdrs[shstrndx].sh_offset = names_offset;
    shdrs[shstrndx].sh_size = names.len() as u64;
    shdrs.push(Shdr {
        sh_name: marker_name,
        sh_type: SHT_PROGBITS,
        sh_flags: SHF_ALLOC,
        sh_addr: marker_address,
        sh_offset: segment_offset + marker_at,
        sh_size: marker.len() as u64,
        sh_link: 0,
        sh_info: 0,
        sh_addralign: 1,
        sh_entsize: 0,
    });
    out.resize(round_up(out.len() as u64, 8) as usize, 0);
    let new_shoff = out.len() as u64;
    for section in &shdrs {
        section.encode(&mut out);
    }

    let phnum_new =
        u16::try_from(new_phdrs.len()).map_err(|_| malformed("too many program headers".into()))?;
    let shnum_new =
        u16::try_from(shdrs.len()).map_err(|_| malformed("too many sections".into()))?;
    write_u64(&mut out, E_PHOFF, table_offset);
    write_u16(&mut out, E_PHNUM, phnum_new);
    write_u64(&mut out, E_SHOFF, new_shoff);
    write_u16(&mut out, E_SHNUM, shnum_new);
    debug_assert!(EHDR_SIZE <= out.len());

    Ok((
        out,
        SplitLayout {
            removed,
            marker_address,
            moved_program_headers: table_offset != phoff64,
        },
    ))
}

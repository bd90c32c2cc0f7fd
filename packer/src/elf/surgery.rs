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
    let Tables {
        phoff,
        shstrndx,
        phdrs,
        mut shdrs,
    } = Tables::read(data)?;
    let shstrtab = *shdrs
        .get(shstrndx)
        .ok_or_else(|| malformed("no section name table".into()))?;

    let segment_index = fat_segment(&phdrs, fat)?;
    let cut = Cut::plan(fat, page);
    cut.check_free(&shdrs, fat.fatbin.index)?;
    let mut new_phdrs = split_segments(&phdrs, &shdrs, segment_index, fat, &cut)?;

    let last_load = new_phdrs
        .iter()
        .rposition(|p| p.p_type == PT_LOAD)
        .unwrap_or(new_phdrs.len() - 1);
    let table_len = ((new_phdrs.len() + 1) * PHDR_SIZE) as u64;
    let names_start = shstrtab.sh_offset as usize;
    let old_names = data
        .get(names_start..names_start + shstrtab.sh_size as usize)
        .ok_or_else(|| malformed("section name table past the end of the file".into()))?;
    let (layout, first_load) = choose_layout(data, &phdrs, &shdrs, old_names, phoff, table_len)?;

    let (segment_vaddr, segment_offset, marker_at) = place_new_segment(
        &phdrs,
        &layout,
        data.len() as u64 - cut.removed,
        page,
        table_len,
    );
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

    let mut out = cut_body(
        data,
        fat,
        &cut,
        (segment_offset + segment_len) as usize + 4096,
    );
    shift_sections(&mut shdrs, fat, &cut);

    point_wrappers_at(&mut out, fat, &shdrs, &cut, marker_address)?;

    let block = match &layout {
        Layout::Evict(eviction) => evict(
            &mut out,
            &mut shdrs,
            &mut new_phdrs,
            eviction,
            (segment_vaddr, segment_offset),
        )?,
        Layout::InPlace | Layout::MoveTable => Vec::new(),
    };

    // Program headers, in place or in the new segment.
    let (table_offset, table_vaddr) = match layout {
        Layout::InPlace | Layout::Evict(_) => {
            (phoff, first_load.p_vaddr + (phoff - first_load.p_offset))
        }
        Layout::MoveTable => (segment_offset, segment_vaddr),
    };
    let table = program_header_table(&mut new_phdrs, table_offset, table_vaddr);

    // The new segment: the moved block or the table, then the marker.
    out.resize(segment_offset as usize, 0);
    match layout {
        Layout::InPlace | Layout::Evict(_) => {
            out.extend_from_slice(&block);
            out.resize((segment_offset + marker_at) as usize, 0);
            let at = phoff as usize;
            out[at..at + table.len()].copy_from_slice(&table);
        }
        Layout::MoveTable => out.extend_from_slice(&table),
    }
    out.extend_from_slice(marker);

    let new_shoff = append_section_headers(
        &mut out,
        &mut shdrs,
        (shstrndx, old_names),
        Shdr {
            sh_name: 0,
            sh_type: SHT_PROGBITS,
            sh_flags: SHF_ALLOC,
            sh_addr: marker_address,
            sh_offset: segment_offset + marker_at,
            sh_size: marker.len() as u64,
            sh_link: 0,
            sh_info: 0,
            sh_addralign: 1,
            sh_entsize: 0,
        },
    );

    write_table_places(
        &mut out,
        (table_offset, new_phdrs.len()),
        (new_shoff, shdrs.len()),
    )?;

    Ok((
        out,
        SplitLayout {
            removed: cut.removed,
            marker_address,
            moved_program_headers: table_offset != phoff,
        },
    ))
}

/// The new segment's address, file offset and where the marker goes in
/// it: past every other load segment, page-aligned in memory and in the
/// file (congruent with the moved block, if any), after the moved block or
/// the table when it holds one.
fn place_new_segment(
    phdrs: &[Phdr],
    layout: &Layout,
    body_len: u64,
    page: u64,
    table_len: u64,
) -> (u64, u64, u64) {
    let vaddr = round_up(
        phdrs
            .iter()
            .filter(|p| p.p_type == PT_LOAD)
            .map(Phdr::memory_end)
            .max()
            .unwrap_or(0),
        page,
    );
    let offset = round_up(body_len, page);
    match layout {
        Layout::InPlace => (vaddr, offset, 0),
        Layout::Evict(eviction) => {
            let skew = eviction.address % page;
            (
                vaddr + skew,
                offset + skew,
                round_up(eviction.end - eviction.start, 8),
            )
        }
        Layout::MoveTable => (vaddr, offset, table_len),
    }
}

/// The file without the cut, the device bytes around it zeroed.
fn cut_body(data: &[u8], fat: &FatElf<'_>, cut: &Cut, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity);
    out.extend_from_slice(&data[..cut.start as usize]);
    out.extend_from_slice(&data[cut.end as usize..]);
    let zero_start = fat.fatbin.offset as usize;
    let zero_end = (fat.fatbin.offset + fat.fatbin.size - cut.removed) as usize;
    out[zero_start..zero_end].fill(0);
    out
}

/// Section offsets in the body: `.hip_fatbin` becomes memory-only and
/// later sections shift.
fn shift_sections(shdrs: &mut [Shdr], fat: &FatElf<'_>, cut: &Cut) {
    for (index, section) in shdrs.iter_mut().enumerate() {
        if index == fat.fatbin.index {
            section.sh_type = SHT_NOBITS;
            section.sh_offset = fat.fatbin.offset;
        } else if section.sh_type != SHT_NULL {
            section.sh_offset = cut.shift(section.sh_offset);
        }
    }
}

/// Moves the sections in the table's way to the new segment at
/// `(vaddr, offset)`: references first (in the body, where the tables
/// still are), then the bytes, which are returned and zeroed where they
/// were.
fn evict(
    out: &mut [u8],
    shdrs: &mut [Shdr],
    new_phdrs: &mut [Phdr],
    eviction: &Eviction,
    (vaddr, offset): (u64, u64),
) -> Result<Vec<u8>, ElfError> {
    let delta = vaddr - eviction.address;
    let file_delta = offset - eviction.start;
    relocate_references(out, shdrs, new_phdrs, eviction, delta, file_delta)?;
    let range = eviction.start as usize..eviction.end as usize;
    let bytes = out[range.clone()].to_vec();
    out[range].fill(0);
    for &index in &eviction.sections {
        shdrs[index].sh_addr += delta;
        shdrs[index].sh_offset += file_delta;
    }
    Ok(bytes)
}

/// The encoded program header table, its `PT_PHDR` entry pointing at
/// where it goes.
fn program_header_table(phdrs: &mut [Phdr], offset: u64, vaddr: u64) -> Vec<u8> {
    let len = (phdrs.len() * PHDR_SIZE) as u64;
    for phdr in phdrs.iter_mut().filter(|p| p.p_type == PT_PHDR) {
        phdr.p_offset = offset;
        phdr.p_vaddr = vaddr;
        phdr.p_paddr = vaddr;
        phdr.p_filesz = len;
        phdr.p_memsz = len;
    }
    let mut table = Vec::with_capacity(len as usize);
    for phdr in phdrs.iter() {
        phdr.encode(&mut table);
    }
    table
}

/// Points the ELF header at the program and section header tables.
fn write_table_places(
    out: &mut [u8],
    (phoff, phnum): (u64, usize),
    (shoff, shnum): (u64, usize),
) -> Result<(), ElfError> {
    let phnum =
        u16::try_from(phnum).map_err(|_| ElfError::Malformed("too many program headers".into()))?;
    let shnum =
        u16::try_from(shnum).map_err(|_| ElfError::Malformed("too many sections".into()))?;
    write_u64(out, E_PHOFF, phoff);
    write_u16(out, E_PHNUM, phnum);
    write_u64(out, E_SHOFF, shoff);
    write_u16(out, E_SHNUM, shnum);
    debug_assert!(EHDR_SIZE <= out.len());
    Ok(())
}

/// The load segment whose file image holds `.hip_fatbin`, at an offset
/// congruent with its address.
fn fat_segment(phdrs: &[Phdr], fat: &FatElf<'_>) -> Result<usize, ElfError> {
    let fatbin = fat.fatbin;
    let (f0, f1) = (fatbin.address, fatbin.address + fatbin.size);
    let index = phdrs
        .iter()
        .position(|p| p.p_type == PT_LOAD && p.p_vaddr <= f0 && f1 <= p.p_vaddr + p.p_filesz)
        .ok_or_else(|| {
            ElfError::Malformed(".hip_fatbin is not inside the file image of a load segment".into())
        })?;
    let segment = phdrs[index];
    if fatbin.offset - segment.p_offset != f0 - segment.p_vaddr {
        return Err(ElfError::Malformed(
            ".hip_fatbin's offset does not match its address".into(),
        ));
    }
    Ok(index)
}

/// The program headers after the cut: the fat segment ends with
/// `.hip_fatbin` as memory only; whatever followed it gets a segment of its
/// own; every other segment shifts with the file.
fn split_segments(
    phdrs: &[Phdr],
    shdrs: &[Shdr],
    segment_index: usize,
    fat: &FatElf<'_>,
    cut: &Cut,
) -> Result<Vec<Phdr>, ElfError> {
    let segment = phdrs[segment_index];
    let (f0, f1) = (fat.fatbin.address, fat.fatbin.address + fat.fatbin.size);
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
    let mut new_phdrs: Vec<Phdr> = Vec::with_capacity(phdrs.len() + 2);
    for (index, phdr) in phdrs.iter().enumerate() {
        if index == segment_index {
            new_phdrs.push(Phdr {
                p_filesz: f0 - segment.p_vaddr,
                p_memsz: match next_start {
                    Some(_) => f1 - segment.p_vaddr,
                    None => segment.p_memsz.max(f1 - segment.p_vaddr),
                },
                ..segment
            });
            if let Some(start) = next_start {
                let delta = start - segment.p_vaddr;
                new_phdrs.push(Phdr {
                    p_offset: cut.shift(segment.p_offset + delta),
                    p_vaddr: start,
                    p_paddr: segment.p_paddr + delta,
                    p_filesz: segment.p_filesz.saturating_sub(delta),
                    p_memsz: segment.p_memsz - delta,
                    ..segment
                });
            }
            continue;
        }
        if cut.removed > 0
            && phdr.p_filesz > 0
            && phdr.p_offset < cut.end
            && phdr.file_end() > cut.start
        {
            return Err(ElfError::Malformed(format!(
                "segment {index} overlaps the device code being removed"
            )));
        }
        let mut phdr = *phdr;
        phdr.p_offset = cut.shift(phdr.p_offset);
        new_phdrs.push(phdr);
    }
    Ok(new_phdrs)
}

/// Where the program header table, grown to `table_len`, goes; with the
/// load segment that maps it.
fn choose_layout(
    data: &[u8],
    phdrs: &[Phdr],
    shdrs: &[Shdr],
    old_names: &[u8],
    phoff: u64,
    table_len: u64,
) -> Result<(Layout, Phdr), ElfError> {
    let first_load = *phdrs
        .iter()
        .find(|p| p.p_type == PT_LOAD && p.p_offset <= phoff && phoff < p.file_end())
        .ok_or_else(|| ElfError::Malformed("no load segment maps the program headers".into()))?;
    // Room to grow in place: up to the first byte anything else uses.
    let first_content = shdrs
        .iter()
        .filter(|s| s.has_file_data() && s.sh_size > 0 && s.sh_offset > phoff)
        .map(|s| s.sh_offset)
        .chain(
            phdrs
                .iter()
                .filter(|p| p.p_type != PT_PHDR && p.p_offset > phoff)
                .map(|p| p.p_offset),
        )
        .min()
        .unwrap_or(u64::MAX);
    if phoff + table_len <= first_content {
        return Ok((Layout::InPlace, first_load));
    }
    let layout = match Eviction::plan(
        shdrs,
        old_names,
        &dynamic_addresses(data, shdrs),
        phoff,
        phoff + table_len,
    ) {
        Some(eviction) if eviction.end <= first_load.file_end() && eviction.start >= phoff => {
            Layout::Evict(eviction)
        }
        _ => Layout::MoveTable,
    };
    Ok((layout, first_load))
}

/// The program and section header tables of the input.
struct Tables {
    phoff: u64,
    shstrndx: usize,
    phdrs: Vec<Phdr>,
    shdrs: Vec<Shdr>,
}

impl Tables {
    fn read(data: &[u8]) -> Result<Tables, ElfError> {
        let phoff = read_u64(data, E_PHOFF)?;
        let phnum = read_u16(data, E_PHNUM)? as usize;
        let shoff = read_u64(data, E_SHOFF)? as usize;
        let shnum = read_u16(data, E_SHNUM)? as usize;
        let shstrndx = read_u16(data, E_SHSTRNDX)? as usize;
        if read_u16(data, E_PHENTSIZE)? as usize != PHDR_SIZE
            || read_u16(data, E_SHENTSIZE)? as usize != SHDR_SIZE
        {
            return Err(ElfError::Malformed(
                "unexpected program or section header entry size".into(),
            ));
        }
        let phdrs = (0..phnum)
            .map(|i| Phdr::read(data, phoff as usize + i * PHDR_SIZE))
            .collect::<Result<Vec<_>, _>>()?;
        let shdrs = (0..shnum)
            .map(|i| Shdr::read(data, shoff + i * SHDR_SIZE))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Tables {
            phoff,
            shstrndx,
            phdrs,
            shdrs,
        })
    }
}

/// The file bytes that leave: the whole pages inside `.hip_fatbin`.
#[derive(Debug, Clone, Copy)]
struct Cut {
    start: u64,
    end: u64,
    removed: u64,
}

impl Cut {
    fn plan(fat: &FatElf<'_>, page: u64) -> Cut {
        let fatbin = fat.fatbin;
        let (f0, f1) = (fatbin.address, fatbin.address + fatbin.size);
        let (a0, a1) = (round_up(f0, page), round_down(f1, page));
        // With no whole page inside (a small section, or pages larger than
        // it) nothing is cut; the section still becomes memory-only.
        let removed = a1.saturating_sub(a0);
        let start = if removed > 0 {
            fatbin.offset + (a0 - f0)
        } else {
            fatbin.offset + fatbin.size
        };
        Cut {
            start,
            end: start + removed,
            removed,
        }
    }

    /// Where a file offset of the input lands in the output.
    fn shift(&self, offset: u64) -> u64 {
        if offset >= self.end {
            offset - self.removed
        } else {
            offset
        }
    }

    /// Nothing but `.hip_fatbin` (section `fatbin`) may live in the cut.
    fn check_free(&self, shdrs: &[Shdr], fatbin: usize) -> Result<(), ElfError> {
        if self.removed == 0 {
            return Ok(());
        }
        for (index, section) in shdrs.iter().enumerate() {
            if index == fatbin || !section.has_file_data() || section.sh_size == 0 {
                continue;
            }
            let (start, end) = (section.sh_offset, section.sh_offset + section.sh_size);
            if start < self.end && end > self.start {
                return Err(ElfError::Malformed(format!(
                    "section {index} overlaps the device code being removed"
                )));
            }
        }
        Ok(())
    }
}

/// Makes every wrapper `HIPK` with the marker's address and its bundle
/// index, and rewrites its relocation's addend where it has one.
fn point_wrappers_at(
    out: &mut [u8],
    fat: &FatElf<'_>,
    shdrs: &[Shdr],
    cut: &Cut,
    marker_address: u64,
) -> Result<(), ElfError> {
    debug_assert_eq!(WRAPPER_SIZE, 24);
    for wrapper in &fat.wrappers {
        let at = cut.shift(wrapper.file_offset) as usize;
        write_u32(out, at, HIPK_MAGIC);
        write_u64(out, at + 8, marker_address);
        write_u64(out, at + 16, wrapper.bundle as u64);
        match wrapper.pointer {
            PointerSource::Rela {
                section,
                index,
                symbol,
                ..
            } => {
                let rela = shdrs.get(section).ok_or_else(|| {
                    ElfError::Malformed(format!("relocation section {section} vanished"))
                })?;
                let entry = rela.sh_offset as usize + index * RELA_SIZE;
                let addend = marker_address.wrapping_sub(symbol.unwrap_or(0));
                write_u64(out, entry + 16, addend);
            }
            // The value in the file is the implicit addend (REL, RELR) or
            // the address itself (ET_EXEC): both were written above.
            PointerSource::Rel { .. } | PointerSource::Relr { .. } | PointerSource::Absolute => {}
        }
    }
    Ok(())
}

/// Appends a new section name table (the old names plus the marker's) and
/// the section headers with `marker` last; returns the headers' offset.
fn append_section_headers(
    out: &mut Vec<u8>,
    shdrs: &mut Vec<Shdr>,
    (shstrndx, old_names): (usize, &[u8]),
    mut marker: Shdr,
) -> u64 {
    let mut names = old_names.to_vec();
    marker.sh_name = names.len() as u32;
    names.extend_from_slice(MARKER_SECTION.as_bytes());
    names.push(0);
    shdrs[shstrndx].sh_offset = out.len() as u64;
    shdrs[shstrndx].sh_size = names.len() as u64;
    out.extend_from_slice(&names);
    shdrs.push(marker);
    out.resize(round_up(out.len() as u64, 8) as usize, 0);
    let offset = out.len() as u64;
    for section in shdrs.iter() {
        section.encode(out);
    }
    offset
}

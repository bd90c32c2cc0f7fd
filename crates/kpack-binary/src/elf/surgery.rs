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
//!   read-only load segment past every other one;
//! - the program header table, one or two entries longer, grows where it
//!   is, or where it is after moving the sections in its way, or else
//!   moves into padding after a load segment (`beside.rs`); a shared
//!   library with no such padding carries it in the marker's segment, an
//!   executable is refused: old kernels need its table loaded at its file
//!   offset plus the first load segment's bias, and every executable
//!   written is checked for it (`program_headers.rs`);
//! - every wrapper becomes `HIPK`, points at the marker (its relocation
//!   rewritten in kind) and stores its bundle index.
//!
//! The result is a normal file: section headers are rewritten at the end
//! with the new name in a new `.shstrtab`, existing section indices stay.

use object::elf::{
    self, PF_R, PT_INTERP, PT_LOAD, PT_PHDR, SHF_ALLOC, SHT_NOBITS, SHT_NULL, SHT_PROGBITS,
};
use object::read::elf::{ProgramHeader, SectionHeader};
use object::{pod, U32, U64};
use std::io::{self, Read, Seek, Write};

use super::beside::Beside;
use super::evict::{dynamic_addresses, relocate_references, Eviction};
use super::parse::FatElf;
use super::pointer::{write_wrapper, WrapperSite, WrapperValue};
use super::program_headers::check_program_headers;
use super::records::{
    has_file_data, malformed, record_mut, Ehdr, Phdr, SegmentEnds, Shdr, Tables, LE,
};
use super::MARKER_SECTION;
use crate::error::ElfError;
use crate::stream::{copy_exact, skip, write_zeros};
use crate::wrapper::HIPK_MAGIC;

/// What the surgery did, for summaries and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitLayout {
    /// File bytes removed with the middle of `.hip_fatbin`.
    pub removed: u64,
    /// Address of the marker.
    pub marker_address: u64,
    /// Whether the program header table moved: beside a load segment, or
    /// (in a shared library with no room there) into the new segment.
    pub moved_program_headers: bool,
}

/// Where the grown program header table goes.
#[derive(Debug)]
enum Layout {
    /// There is room where it is.
    InPlace,
    /// Where it is, after moving the sections that follow it.
    Evict(Eviction),
    /// In a segment of its own after a load segment, in padding.
    Beside(Beside),
    /// At the start of the new segment: never for an executable (it breaks
    /// the program header rule) and moved by GNU strip.
    MoveTable,
}

impl Layout {
    /// The program header table's file offset and address: where it was
    /// (`phoff`, mapped by `first_load`), beside a segment, or the start
    /// of the new segment.
    fn table_place(&self, phoff: u64, first_load: &Phdr, segment: &NewSegment) -> (u64, u64) {
        match self {
            Layout::InPlace | Layout::Evict(_) => (
                phoff,
                first_load.p_vaddr(LE) + (phoff - first_load.p_offset(LE)),
            ),
            Layout::Beside(beside) => (beside.offset(), beside.vaddr()),
            Layout::MoveTable => (segment.offset, segment.vaddr),
        }
    }
}

fn round_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align) * align
}

fn round_down(value: u64, align: u64) -> u64 {
    value / align * align
}

/// A split planned from the input's tables alone, so the host-only file
/// can be written as a stream: [`write_body`](Self::write_body) copies the
/// input without its device code, the file is extended with zeros to
/// [`output_len`](Self::output_len), and [`patch`](Self::patch) writes the
/// few records that change (wrappers, their relocations, the tables, the
/// marker) through a mapping of the output.
#[derive(Debug)]
pub struct SplitPlan {
    phoff: u64,
    shstrndx: usize,
    /// Section headers with offsets in the output, `.hip_fatbin` memory-only.
    shdrs: Vec<Shdr>,
    /// The input's section names.
    old_names: Vec<u8>,
    /// The output's program headers, the new segment's included.
    phdrs: Vec<Phdr>,
    layout: Layout,
    first_load: Phdr,
    segment: NewSegment,
    cut: Cut,
    /// `.hip_fatbin`'s file range in the input.
    fatbin: (u64, u64),
    marker: Vec<u8>,
    /// Where the new section name table goes, and the section headers.
    names_offset: u64,
    shoff: u64,
    output_len: u64,
}

impl SplitPlan {
    /// Plans the split of `data` (parsed as `fat`) with wrappers pointing
    /// at `marker`.
    pub fn new(data: &[u8], fat: &FatElf<'_>, marker: &[u8]) -> Result<SplitPlan, ElfError> {
        let page = fat.page_size;
        let Tables {
            phoff,
            shstrndx,
            phdrs,
            mut shdrs,
        } = Tables::read(data)?;
        let old_names = shdrs
            .get(shstrndx)
            .ok_or_else(|| ElfError::Malformed("no section name table".into()))?
            .data(LE, data)
            .map_err(malformed)?
            .to_vec();

        let segment_index = fat_segment(&phdrs, fat)?;
        let cut = Cut::plan(fat, page);
        cut.check_free(&shdrs, fat.fatbin.index)?;
        let mut new_phdrs = split_segments(&phdrs, &shdrs, segment_index, fat, &cut)?;

        let table_len = ((new_phdrs.len() + 1) * size_of::<Phdr>()) as u64;
        let (layout, first_load) =
            choose_layout(data, &phdrs, &shdrs, &old_names, phoff, table_len)?;
        shift_sections(&mut shdrs, fat, &cut);
        let layout = match layout {
            Layout::MoveTable => move_table(data, &phdrs, &mut new_phdrs, &shdrs, fat, &cut)?,
            layout => layout,
        };
        let table_len = ((new_phdrs.len() + 1) * size_of::<Phdr>()) as u64;
        let body_len = data.len() as u64 - cut.removed;
        let segment = NewSegment::place(&phdrs, &layout, body_len, page, table_len);
        insert_after_last_load(&mut new_phdrs, segment.header(marker.len(), page));

        let names_offset = segment.offset + segment.len(marker.len());
        let names_len = (old_names.len() + MARKER_SECTION.len() + 1) as u64;
        let shoff = round_up(names_offset + names_len, 8);
        let output_len = shoff + ((shdrs.len() + 1) * size_of::<Shdr>()) as u64;
        Ok(SplitPlan {
            phoff,
            shstrndx,
            shdrs,
            old_names,
            phdrs: new_phdrs,
            layout,
            first_load,
            segment,
            cut,
            fatbin: (fat.fatbin.offset, fat.fatbin.offset + fat.fatbin.size),
            marker: marker.to_vec(),
            names_offset,
            shoff,
            output_len,
        })
    }

    /// The host-only file's length.
    pub fn output_len(&self) -> u64 {
        self.output_len
    }

    /// Writes the file's body: the input read from `input` (at its start)
    /// without the cut, the device bytes left around it as zeros (skipped
    /// in the input, never read). Between files `io::copy` lets the kernel
    /// copy the ranges.
    pub fn write_body<R: Read + Seek, W: Write>(
        &self,
        input: &mut R,
        out: &mut W,
    ) -> io::Result<()> {
        let (start, end) = self.fatbin;
        copy_exact(input, out, start)?;
        skip(input, end - start)?;
        write_zeros(out, end - start - self.cut.removed)?;
        io::copy(input, out)?;
        Ok(())
    }

    /// Writes what changes into `out`: the body as
    /// [`write_body`](Self::write_body) left it, extended with zeros to
    /// [`output_len`](Self::output_len).
    pub fn patch(&self, fat: &FatElf<'_>, out: &mut [u8]) -> Result<SplitLayout, ElfError> {
        if out.len() as u64 != self.output_len {
            return Err(ElfError::Malformed(format!(
                "the output has {} bytes, not the {} planned",
                out.len(),
                self.output_len
            )));
        }
        let (mut shdrs, mut phdrs) = (self.shdrs.clone(), self.phdrs.clone());
        let marker_address = self.segment.marker_address();
        point_wrappers_at(out, fat, &shdrs, &self.cut, marker_address)?;
        let block = match &self.layout {
            Layout::Evict(eviction) => evict(out, &mut shdrs, &mut phdrs, eviction, &self.segment)?,
            Layout::InPlace | Layout::Beside(_) | Layout::MoveTable => Vec::new(),
        };
        let (table_offset, table_vaddr) =
            self.layout
                .table_place(self.phoff, &self.first_load, &self.segment);
        let table = program_header_table(&mut phdrs, table_offset, table_vaddr);
        self.segment
            .write(out, table_offset, &table, &block, &self.marker)?;
        append_section_headers(
            out,
            &mut shdrs,
            self.shstrndx,
            &self.old_names,
            self.segment.marker_section(self.marker.len()),
            self.names_offset,
            self.shoff,
        )?;
        let program_headers = TablePlace {
            offset: table_offset,
            count: phdrs.len(),
        };
        let section_headers = TablePlace {
            offset: self.shoff,
            count: shdrs.len(),
        };
        write_table_places(out, program_headers, section_headers)?;
        check_program_headers(out)?;
        Ok(SplitLayout {
            removed: self.cut.removed,
            marker_address,
            moved_program_headers: table_offset != self.phoff,
        })
    }
}

/// Copies `bytes` into `out` at `at`, which must hold them.
fn put(out: &mut [u8], at: u64, bytes: &[u8]) -> Result<(), ElfError> {
    usize::try_from(at)
        .ok()
        .and_then(|at| out.get_mut(at..at.checked_add(bytes.len())?))
        .ok_or_else(|| ElfError::Malformed("a table past the end of the file".into()))?
        .copy_from_slice(bytes);
    Ok(())
}

/// Inserts `segment` after the last load segment, keeping them in address
/// order.
fn insert_after_last_load(phdrs: &mut Vec<Phdr>, segment: Phdr) {
    let last_load = phdrs
        .iter()
        .rposition(|p| p.p_type(LE) == PT_LOAD)
        .unwrap_or(phdrs.len().saturating_sub(1));
    phdrs.insert((last_load + 1).min(phdrs.len()), segment);
}

/// The read-only load segment added past every other one, holding the
/// marker after the moved block or the table when it holds one.
#[derive(Debug, Clone, Copy)]
struct NewSegment {
    vaddr: u64,
    offset: u64,
    /// Where the marker starts in the segment.
    marker_at: u64,
}

impl NewSegment {
    /// Places the segment past every other load segment, page-aligned in
    /// memory and in the file (congruent with the moved block, if any),
    /// the file body being `body_len` bytes.
    fn place(
        phdrs: &[Phdr],
        layout: &Layout,
        body_len: u64,
        page: u64,
        table_len: u64,
    ) -> NewSegment {
        let vaddr = round_up(
            phdrs
                .iter()
                .filter(|p| p.p_type(LE) == PT_LOAD)
                .map(Phdr::memory_end)
                .max()
                .unwrap_or(0),
            page,
        );
        let offset = round_up(body_len, page);
        let (vaddr, offset, marker_at) = match layout {
            Layout::InPlace | Layout::Beside(_) => (vaddr, offset, 0),
            Layout::Evict(eviction) => {
                let skew = eviction.address % page;
                (
                    vaddr + skew,
                    offset + skew,
                    round_up(eviction.end - eviction.start, 8),
                )
            }
            Layout::MoveTable => (vaddr, offset, table_len),
        };
        NewSegment {
            vaddr,
            offset,
            marker_at,
        }
    }

    fn marker_address(&self) -> u64 {
        self.vaddr + self.marker_at
    }

    /// Its length with a marker of `marker_len` bytes.
    fn len(&self, marker_len: usize) -> u64 {
        self.marker_at + marker_len as u64
    }

    /// Its program header.
    fn header(&self, marker_len: usize, page: u64) -> Phdr {
        let len = self.len(marker_len);
        Phdr {
            p_type: U32::new(LE, PT_LOAD),
            p_flags: U32::new(LE, PF_R),
            p_offset: U64::new(LE, self.offset),
            p_vaddr: U64::new(LE, self.vaddr),
            p_paddr: U64::new(LE, self.vaddr),
            p_filesz: U64::new(LE, len),
            p_memsz: U64::new(LE, len),
            p_align: U64::new(LE, page),
        }
    }

    /// The marker's section header (its name is set when the name table
    /// is written).
    fn marker_section(&self, marker_len: usize) -> Shdr {
        Shdr {
            sh_name: U32::new(LE, 0),
            sh_type: U32::new(LE, SHT_PROGBITS),
            sh_flags: U64::new(LE, SHF_ALLOC),
            sh_addr: U64::new(LE, self.marker_address()),
            sh_offset: U64::new(LE, self.offset + self.marker_at),
            sh_size: U64::new(LE, marker_len as u64),
            sh_link: U32::new(LE, 0),
            sh_info: U32::new(LE, 0),
            sh_addralign: U64::new(LE, 1),
            sh_entsize: U64::new(LE, 0),
        }
    }

    /// Writes the segment into `out`: the moved block (if any) at its
    /// start, then the marker; and the program header `table` at its
    /// offset (over the old one, beside a segment, or at the segment's
    /// start where there is no block).
    fn write(
        &self,
        out: &mut [u8],
        table_offset: u64,
        table: &[u8],
        block: &[u8],
        marker: &[u8],
    ) -> Result<(), ElfError> {
        put(out, self.offset, block)?;
        put(out, table_offset, table)?;
        put(out, self.offset + self.marker_at, marker)
    }
}

/// Section offsets in the body: `.hip_fatbin` becomes memory-only and
/// later sections shift.
fn shift_sections(shdrs: &mut [Shdr], fat: &FatElf<'_>, cut: &Cut) {
    for (index, section) in shdrs.iter_mut().enumerate() {
        if index == fat.fatbin.index {
            section.sh_type.set(LE, SHT_NOBITS);
            section.sh_offset.set(LE, fat.fatbin.offset);
        } else if section.sh_type(LE) != SHT_NULL {
            section.sh_offset.set(LE, cut.shift(section.sh_offset(LE)));
        }
    }
}

/// Moves the sections in the table's way to the new segment `to`:
/// references first (in the body, where the tables
/// still are), then the bytes, which are returned and zeroed where they
/// were.
fn evict(
    out: &mut [u8],
    shdrs: &mut [Shdr],
    new_phdrs: &mut [Phdr],
    eviction: &Eviction,
    to: &NewSegment,
) -> Result<Vec<u8>, ElfError> {
    let (vaddr, offset) = (to.vaddr, to.offset);
    let (Some(delta), Some(file_delta)) = (
        vaddr.checked_sub(eviction.address),
        offset.checked_sub(eviction.start),
    ) else {
        return Err(ElfError::Malformed(
            "sections to move lie past the end of the file".into(),
        ));
    };
    relocate_references(out, shdrs, new_phdrs, eviction, delta, file_delta)?;
    let block = usize::try_from(eviction.start)
        .ok()
        .zip(usize::try_from(eviction.end).ok())
        .and_then(|(start, end)| out.get_mut(start..end))
        .ok_or_else(|| ElfError::Malformed("moved sections past the end of the file".into()))?;
    let bytes = block.to_vec();
    block.fill(0);
    for &index in &eviction.sections {
        if let Some(section) = shdrs.get_mut(index) {
            section.sh_addr.set(LE, section.sh_addr(LE) + delta);
            section
                .sh_offset
                .set(LE, section.sh_offset(LE) + file_delta);
        }
    }
    Ok(bytes)
}

/// The encoded program header table, its `PT_PHDR` entry pointing at
/// where it goes.
fn program_header_table(phdrs: &mut [Phdr], offset: u64, vaddr: u64) -> Vec<u8> {
    let len = size_of_val(phdrs) as u64;
    for phdr in phdrs.iter_mut().filter(|p| p.p_type(LE) == PT_PHDR) {
        phdr.p_offset.set(LE, offset);
        phdr.p_vaddr.set(LE, vaddr);
        phdr.p_paddr.set(LE, vaddr);
        phdr.p_filesz.set(LE, len);
        phdr.p_memsz.set(LE, len);
    }
    pod::bytes_of_slice(phdrs).to_vec()
}

/// Where a header table lies in the file, and how many entries it has.
#[derive(Debug, Clone, Copy)]
struct TablePlace {
    offset: u64,
    count: usize,
}

/// Points the ELF header at the program and section header tables.
fn write_table_places(
    out: &mut [u8],
    program_headers: TablePlace,
    section_headers: TablePlace,
) -> Result<(), ElfError> {
    let (phoff, phnum) = (program_headers.offset, program_headers.count);
    let (shoff, shnum) = (section_headers.offset, section_headers.count);
    let phnum = u16::try_from(phnum)
        .ok()
        .filter(|&n| n < elf::PN_XNUM)
        .ok_or_else(|| ElfError::Malformed("too many program headers".into()))?;
    let shnum = u16::try_from(shnum)
        .ok()
        .filter(|&n| n < elf::SHN_LORESERVE)
        .ok_or_else(|| ElfError::Malformed("too many sections".into()))?;
    let header = record_mut::<Ehdr>(out, 0)?;
    header.e_phoff.set(LE, phoff);
    header.e_phnum.set(LE, phnum);
    header.e_shoff.set(LE, shoff);
    header.e_shnum.set(LE, shnum);
    Ok(())
}

/// The load segment whose file image holds `.hip_fatbin`, at an offset
/// congruent with its address.
fn fat_segment(phdrs: &[Phdr], fat: &FatElf<'_>) -> Result<usize, ElfError> {
    let fatbin = fat.fatbin;
    let (f0, f1) = (fatbin.address, fatbin.address + fatbin.size);
    let index = phdrs
        .iter()
        .position(|p| {
            p.p_type(LE) == PT_LOAD
                && p.p_vaddr(LE) <= f0
                && f1 <= p.p_vaddr(LE).saturating_add(p.p_filesz(LE))
        })
        .ok_or_else(|| {
            ElfError::Malformed(".hip_fatbin is not inside the file image of a load segment".into())
        })?;
    let segment = &phdrs[index];
    if fatbin.offset.checked_sub(segment.p_offset(LE)) != Some(f0 - segment.p_vaddr(LE)) {
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
    let (vaddr, memsz) = (segment.p_vaddr(LE), segment.p_memsz(LE));
    let next_start = shdrs
        .iter()
        .filter(|s| {
            s.sh_flags(LE).contains(SHF_ALLOC)
                && s.sh_addr(LE) >= f1
                && s.sh_addr(LE) < segment.memory_end()
                && s.sh_size(LE) > 0
        })
        .map(|s| s.sh_addr(LE))
        .min();
    let mut new_phdrs: Vec<Phdr> = Vec::with_capacity(phdrs.len() + 2);
    for (index, phdr) in phdrs.iter().enumerate() {
        if index == segment_index {
            let mut head = segment;
            head.p_filesz.set(LE, f0 - vaddr);
            head.p_memsz.set(
                LE,
                match next_start {
                    Some(_) => f1 - vaddr,
                    None => memsz.max(f1 - vaddr),
                },
            );
            new_phdrs.push(head);
            if let Some(start) = next_start {
                let delta = start - vaddr;
                let mut tail = segment;
                tail.p_offset
                    .set(LE, cut.shift(segment.p_offset(LE) + delta));
                tail.p_vaddr.set(LE, start);
                tail.p_paddr.set(LE, segment.p_paddr(LE) + delta);
                tail.p_filesz
                    .set(LE, segment.p_filesz(LE).saturating_sub(delta));
                tail.p_memsz.set(LE, memsz - delta);
                new_phdrs.push(tail);
            }
            continue;
        }
        if cut.removed > 0
            && phdr.p_filesz(LE) > 0
            && phdr.p_offset(LE) < cut.end
            && phdr.file_end() > cut.start
        {
            return Err(ElfError::Malformed(format!(
                "segment {index} overlaps the device code being removed"
            )));
        }
        let mut phdr = *phdr;
        phdr.p_offset.set(LE, cut.shift(phdr.p_offset(LE)));
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
        .find(|p| p.p_type(LE) == PT_LOAD && p.p_offset(LE) <= phoff && phoff < p.file_end())
        .ok_or_else(|| ElfError::Malformed("no load segment maps the program headers".into()))?;
    // Room to grow in place: up to the first byte anything else uses.
    let first_content = shdrs
        .iter()
        .filter(|s| has_file_data(s) && s.sh_size(LE) > 0 && s.sh_offset(LE) > phoff)
        .map(|s| s.sh_offset(LE))
        .chain(
            phdrs
                .iter()
                .filter(|p| p.p_type(LE) != PT_PHDR && p.p_offset(LE) > phoff)
                .map(|p| p.p_offset(LE)),
        )
        .min()
        .unwrap_or(u64::MAX);
    if phoff + table_len <= first_content {
        return Ok((Layout::InPlace, first_load));
    }
    let layout = match Eviction::plan(
        shdrs,
        old_names,
        &dynamic_addresses(data, shdrs)?,
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

/// Where the table goes when it cannot grow where it is (the input's
/// program headers `phdrs`, the output's `new_phdrs` and `shdrs`): beside
/// a load segment, in padding the input holds zeros in (its segment then
/// inserted into `new_phdrs`), or, in a file that is not an executable, at
/// the start of the new segment. An executable with no such padding is
/// refused: anywhere else its table breaks the program header rule, at
/// once or after GNU strip.
fn move_table(
    data: &[u8],
    phdrs: &[Phdr],
    new_phdrs: &mut Vec<Phdr>,
    shdrs: &[Shdr],
    fat: &FatElf<'_>,
    cut: &Cut,
) -> Result<Layout, ElfError> {
    // The table then has an entry for its own segment, and the marker's.
    let len = ((new_phdrs.len() + 2) * size_of::<Phdr>()) as u64;
    let fatbin = (fat.fatbin.offset, fat.fatbin.offset + fat.fatbin.size);
    let free = |start: u64, end: u64| {
        // The same bytes of the input: before the cut, or shifted past it.
        let (start, end) = match (end <= cut.start, start >= cut.start) {
            (true, _) => (start, end),
            (false, true) => (start + cut.removed, end + cut.removed),
            (false, false) => return false,
        };
        (end <= fatbin.0 || start >= fatbin.1)
            && usize::try_from(start)
                .ok()
                .zip(usize::try_from(end).ok())
                .and_then(|(start, end)| data.get(start..end))
                .is_some_and(|bytes| bytes.iter().all(|&byte| byte == 0))
    };
    if let Some(beside) = Beside::find(new_phdrs, shdrs, len, fat.page_size, free) {
        new_phdrs.insert(beside.after + 1, beside.header(len));
        return Ok(Layout::Beside(beside));
    }
    if phdrs.iter().any(|p| p.p_type(LE) == PT_INTERP) {
        return Err(ElfError::NoRoomForProgramHeaders { len });
    }
    Ok(Layout::MoveTable)
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
            if index == fatbin || !has_file_data(section) || section.sh_size(LE) == 0 {
                continue;
            }
            let start = section.sh_offset(LE);
            let end = start.saturating_add(section.sh_size(LE));
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
    for wrapper in &fat.wrappers {
        let at = cut.shift(wrapper.file_offset);
        write_wrapper(
            out,
            shdrs,
            WrapperSite {
                file_offset: at,
                pointer: wrapper.pointer,
            },
            WrapperValue {
                magic: HIPK_MAGIC,
                address: marker_address,
                reserved: wrapper.bundle as u64,
            },
        )?;
    }
    Ok(())
}

/// Writes the new section name table (the old names plus the marker's)
/// at `names_offset` and the section headers, with `marker` last, at
/// `shoff`.
fn append_section_headers(
    out: &mut [u8],
    shdrs: &mut Vec<Shdr>,
    shstrndx: usize,
    old_names: &[u8],
    mut marker: Shdr,
    names_offset: u64,
    shoff: u64,
) -> Result<(), ElfError> {
    let mut names = old_names.to_vec();
    marker.sh_name.set(LE, names.len() as u32);
    names.extend_from_slice(MARKER_SECTION.as_bytes());
    names.push(0);
    if let Some(table) = shdrs.get_mut(shstrndx) {
        table.sh_offset.set(LE, names_offset);
        table.sh_size.set(LE, names.len() as u64);
    }
    put(out, names_offset, &names)?;
    shdrs.push(marker);
    put(out, shoff, pod::bytes_of_slice(shdrs))
}

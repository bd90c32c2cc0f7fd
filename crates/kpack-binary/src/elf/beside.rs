//! Where the program header table goes when it cannot grow where it is:
//! into a load segment of its own, right after the file bytes of a load
//! segment mapped at the first one's load bias, in padding nothing uses.
//!
//! There the table keeps the program header rule old kernels need of
//! executables (its address is its file offset plus the first load
//! segment's bias; `program_headers.rs`), and GNU strip leaves it where it
//! is: strip (binutils 2.40) lays a load segment that holds the table
//! right after the last section of the load segment before it, in the
//! file and in memory, whatever the input said; a table already there
//! stays. Anywhere else strip moves it (a table past the last segment
//! moves down over the symbols strip removes, away from its address) and
//! the executable no longer starts.
//!
//! The new segment shares its first page of memory with the segment it
//! follows: the same page of the file at the same bias, so the same bytes,
//! mapped with the same permissions.

use std::ops::Range;

use object::elf::{PT_LOAD, SHF_ALLOC};
use object::read::elf::{ProgramHeader, SectionHeader};

use super::records::{has_file_data, Phdr, SegmentEnds, Shdr, LE};

/// Alignment of the program header table, in the file and in memory.
const TABLE_ALIGN: u64 = 8;

/// A place for the table after load segment `after` of the output.
#[derive(Debug, Clone, Copy)]
pub(super) struct Beside {
    /// Index of the segment it follows, in the output's program headers
    /// (before the table's own segment is inserted after it).
    pub after: usize,
    /// The segment it follows.
    segment: Phdr,
}

impl Beside {
    /// The first place (after the lowest load segment that has one) for a
    /// table of `len` bytes in the output whose program headers are
    /// `phdrs` and section headers `shdrs`, both with the output's file
    /// offsets, mapped in pages of `page` bytes. `free(start, end)` says
    /// whether those bytes of the output are padding the input holds
    /// zeros in.
    pub fn find(
        phdrs: &[Phdr],
        shdrs: &[Shdr],
        len: u64,
        page: u64,
        free: impl Fn(u64, u64) -> bool,
    ) -> Option<Beside> {
        let loads = || {
            phdrs
                .iter()
                .enumerate()
                .filter(|(_, p)| p.p_type(LE) == PT_LOAD)
        };
        let first_bias = bias(loads().next()?.1);
        loads().find_map(|(index, segment)| {
            let (offset, vaddr) = (segment.file_end(), segment.memory_end());
            let (end, memory_end) = (offset.checked_add(len)?, vaddr.checked_add(len)?);
            let fits = bias(segment) == first_bias
                && segment.p_filesz(LE) > 0
                && segment.p_memsz(LE) == segment.p_filesz(LE)
                && offset % TABLE_ALIGN == 0
                && last_section_end(shdrs, segment) == Some(offset)
                && !file_bytes_used(phdrs, shdrs, offset, end)
                && free(offset, end)
                && !pages_taken(phdrs, index, vaddr..memory_end, page);
            fits.then_some(Beside {
                after: index,
                segment: *segment,
            })
        })
    }

    /// The table's file offset.
    pub fn offset(&self) -> u64 {
        self.segment.file_end()
    }

    /// The table's address.
    pub fn vaddr(&self) -> u64 {
        self.segment.memory_end()
    }

    /// The program header of the table's segment, `len` bytes long: the
    /// segment it follows continued.
    pub fn header(&self, len: u64) -> Phdr {
        let mut header = self.segment;
        let filesz = self.segment.p_filesz(LE);
        header.p_offset.set(LE, self.offset());
        header.p_vaddr.set(LE, self.vaddr());
        header
            .p_paddr
            .set(LE, self.segment.p_paddr(LE).wrapping_add(filesz));
        header.p_filesz.set(LE, len);
        header.p_memsz.set(LE, len);
        header
    }
}

/// A load segment's bias: where it maps file offset 0.
fn bias(segment: &Phdr) -> u64 {
    segment.p_vaddr(LE).wrapping_sub(segment.p_offset(LE))
}

/// Where the last section with file bytes in `segment` ends in the file.
fn last_section_end(shdrs: &[Shdr], segment: &Phdr) -> Option<u64> {
    let (start, end) = (segment.p_offset(LE), segment.file_end());
    shdrs
        .iter()
        .filter(|s| has_file_data(s) && s.sh_flags(LE).contains(SHF_ALLOC) && s.sh_size(LE) > 0)
        .filter(|s| (start..end).contains(&s.sh_offset(LE)))
        .map(|s| s.sh_offset(LE).saturating_add(s.sh_size(LE)))
        .max()
}

/// Whether a section or a segment has file bytes in `[start, end)`.
fn file_bytes_used(phdrs: &[Phdr], shdrs: &[Shdr], start: u64, end: u64) -> bool {
    let overlaps =
        |offset: u64, size: u64| size > 0 && offset < end && start < offset.saturating_add(size);
    shdrs
        .iter()
        .any(|s| has_file_data(s) && overlaps(s.sh_offset(LE), s.sh_size(LE)))
        || phdrs
            .iter()
            .any(|p| overlaps(p.p_offset(LE), p.p_filesz(LE)))
}

/// Whether a load segment other than number `own` has memory on the
/// pages of `span`.
fn pages_taken(phdrs: &[Phdr], own: usize, span: Range<u64>, page: u64) -> bool {
    let Range { start, end } = span;
    let pages = |from: u64, to: u64| (from / page * page, to.div_ceil(page).saturating_mul(page));
    let (first, last) = pages(start, end);
    phdrs
        .iter()
        .enumerate()
        .filter(|&(index, p)| index != own && p.p_type(LE) == PT_LOAD && p.p_memsz(LE) > 0)
        .any(|(_, p)| {
            let (from, to) = pages(p.p_vaddr(LE), p.memory_end());
            from < last && first < to
        })
}

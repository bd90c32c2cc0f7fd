//! The ELF64 little-endian records the surgery rewrites, as `object`'s
//! typed structs: the program and section header tables are read with
//! `object`, edited as copies and written back whole; the file header,
//! `.dynamic` entries, symbols and RELA entries are edited where they lie
//! in the output. Every access is bounds-checked.

use object::elf::{
    Dyn64, FileHeader64, ProgramHeader64, Rela64, SectionHeader64, Sym64, SHT_NOBITS, SHT_NULL,
};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::{pod, LittleEndian, Pod};

use crate::error::ElfError;

/// The byte order of every file the surgery rewrites.
pub(super) const LE: LittleEndian = LittleEndian;

pub(super) type Ehdr = FileHeader64<LittleEndian>;
pub(super) type Phdr = ProgramHeader64<LittleEndian>;
pub(super) type Shdr = SectionHeader64<LittleEndian>;
pub(super) type Dyn = Dyn64<LittleEndian>;
pub(super) type Sym = Sym64<LittleEndian>;
pub(super) type Rela = Rela64<LittleEndian>;

/// A failed read of `object`'s, as a malformed file.
pub(super) fn malformed(error: object::Error) -> ElfError {
    ElfError::Malformed(error.to_string())
}

/// The program and section header tables of the input.
#[derive(Debug)]
pub(super) struct Tables {
    pub phoff: u64,
    pub shstrndx: usize,
    pub phdrs: Vec<Phdr>,
    pub shdrs: Vec<Shdr>,
}

/// Where every segment and section must end, in memory and in the file:
/// no machine maps anything past it, and below it the surgery's sums of
/// addresses, offsets and sizes cannot overflow.
const EXTENT_LIMIT: u64 = 1 << 56;

impl Tables {
    /// Copies the tables out of `data`, to be edited.
    pub fn read(data: &[u8]) -> Result<Tables, ElfError> {
        let header = Ehdr::parse(data).map_err(malformed)?;
        let tables = Tables {
            phoff: header.e_phoff(LE),
            shstrndx: header.shstrndx(LE, data).map_err(malformed)? as usize,
            phdrs: header
                .program_headers(LE, data)
                .map_err(malformed)?
                .to_vec(),
            shdrs: header
                .section_headers(LE, data)
                .map_err(malformed)?
                .to_vec(),
        };
        tables.check_extents()?;
        Ok(tables)
    }

    /// Refuses segments and sections that end past [`EXTENT_LIMIT`].
    fn check_extents(&self) -> Result<(), ElfError> {
        let within = |start: u64, size: u64| {
            start
                .checked_add(size)
                .is_some_and(|end| end <= EXTENT_LIMIT)
        };
        for (index, p) in self.phdrs.iter().enumerate() {
            let memsz = p.p_memsz(LE);
            if !(within(p.p_offset(LE), p.p_filesz(LE))
                && within(p.p_vaddr(LE), memsz)
                && within(p.p_paddr(LE), memsz))
            {
                return Err(ElfError::Malformed(format!(
                    "segment {index} ends past {EXTENT_LIMIT:#x}"
                )));
            }
        }
        for (index, s) in self.shdrs.iter().enumerate() {
            if !(within(s.sh_offset(LE), s.sh_size(LE)) && within(s.sh_addr(LE), s.sh_size(LE))) {
                return Err(ElfError::Malformed(format!(
                    "section {index} ends past {EXTENT_LIMIT:#x}"
                )));
            }
        }
        Ok(())
    }
}

/// Where a segment ends, in the file and in memory.
pub(super) trait SegmentEnds {
    /// End of the file bytes the segment maps.
    fn file_end(&self) -> u64;
    /// End of the segment in memory.
    fn memory_end(&self) -> u64;
}

impl SegmentEnds for Phdr {
    fn file_end(&self) -> u64 {
        self.p_offset(LE).saturating_add(self.p_filesz(LE))
    }

    fn memory_end(&self) -> u64 {
        self.p_vaddr(LE).saturating_add(self.p_memsz(LE))
    }
}

/// Whether a section occupies bytes in the file.
pub(super) fn has_file_data(section: &Shdr) -> bool {
    let kind = section.sh_type(LE);
    kind != SHT_NOBITS && kind != SHT_NULL
}

/// The record of type `T` at file offset `at` of `out`, to edit in place.
pub(super) fn record_mut<T: Pod>(out: &mut [u8], at: u64) -> Result<&mut T, ElfError> {
    usize::try_from(at)
        .ok()
        .and_then(|at| out.get_mut(at..))
        .and_then(|rest| pod::from_bytes_mut::<T>(rest).ok())
        .map(|(record, _)| record)
        .ok_or_else(|| {
            ElfError::Malformed(format!(
                "record at offset {at} runs past the end of the file"
            ))
        })
}

/// The records of type `T` filling `section` in `out`, to edit in place.
pub(super) fn section_records_mut<'a, T: Pod>(
    out: &'a mut [u8],
    section: &Shdr,
) -> Result<&'a mut [T], ElfError> {
    let (offset, size) = (section.sh_offset(LE), section.sh_size(LE));
    let bytes = usize::try_from(offset)
        .ok()
        .zip(usize::try_from(size).ok())
        .and_then(|(start, size)| out.get_mut(start..start.checked_add(size)?))
        .ok_or_else(|| {
            ElfError::Malformed(format!(
                "section at offset {offset} runs past the end of the file"
            ))
        })?;
    pod::slice_from_all_bytes_mut(bytes).map_err(|()| {
        ElfError::Malformed(format!(
            "section at offset {offset} is not a whole number of {}-byte records",
            size_of::<T>()
        ))
    })
}

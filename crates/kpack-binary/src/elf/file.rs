//! What an ELF file is to the splitter: its machine, its kind, where a
//! section lies, and the `object` reader types it is read with.

use object::read::elf::{ElfFile64, ElfSection64};
use object::Endianness;

pub(super) type ElfFile<'a> = ElfFile64<'a, Endianness>;
pub(super) type ElfSection<'a, 'file> = ElfSection64<'a, 'file, Endianness>;

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

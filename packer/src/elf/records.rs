//! The ELF64 little-endian records the surgery rewrites: file header
//! fields, program headers, section headers and RELA entries. `object`
//! reads files; these are the writable copies, decoded and encoded at
//! their fixed offsets.

use crate::error::ElfError;

pub(super) const PT_LOAD: u32 = 1;
pub(super) const PT_PHDR: u32 = 6;
pub(super) const PF_R: u32 = 4;
pub(super) const SHT_NULL: u32 = 0;
pub(super) const SHT_PROGBITS: u32 = 1;
pub(super) const SHT_NOBITS: u32 = 8;
pub(super) const SHF_ALLOC: u64 = 2;

pub(super) const EHDR_SIZE: usize = 64;
pub(super) const PHDR_SIZE: usize = 56;
pub(super) const SHDR_SIZE: usize = 64;
pub(super) const RELA_SIZE: usize = 24;

// File header field offsets.
pub(super) const E_PHOFF: usize = 32;
pub(super) const E_SHOFF: usize = 40;
pub(super) const E_PHENTSIZE: usize = 54;
pub(super) const E_PHNUM: usize = 56;
pub(super) const E_SHENTSIZE: usize = 58;
pub(super) const E_SHNUM: usize = 60;
pub(super) const E_SHSTRNDX: usize = 62;

pub(super) fn read_u16(data: &[u8], at: usize) -> Result<u16, ElfError> {
    field(data, at).map(u16::from_le_bytes)
}

pub(super) fn read_u32(data: &[u8], at: usize) -> Result<u32, ElfError> {
    field(data, at).map(u32::from_le_bytes)
}

pub(super) fn read_u64(data: &[u8], at: usize) -> Result<u64, ElfError> {
    field(data, at).map(u64::from_le_bytes)
}

fn field<const N: usize>(data: &[u8], at: usize) -> Result<[u8; N], ElfError> {
    at.checked_add(N)
        .and_then(|end| data.get(at..end))
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| {
            ElfError::Malformed(format!(
                "record at offset {at} runs past the end of the file"
            ))
        })
}

pub(super) fn write_u16(data: &mut [u8], at: usize, value: u16) {
    data[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

pub(super) fn write_u32(data: &mut [u8], at: usize, value: u32) {
    data[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

pub(super) fn write_u64(data: &mut [u8], at: usize, value: u64) {
    data[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// A program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Phdr {
    pub p_type: u32,
    pub p_flags: u32,
    pub p_offset: u64,
    pub p_vaddr: u64,
    pub p_paddr: u64,
    pub p_filesz: u64,
    pub p_memsz: u64,
    pub p_align: u64,
}

impl Phdr {
    pub fn read(data: &[u8], at: usize) -> Result<Phdr, ElfError> {
        Ok(Phdr {
            p_type: read_u32(data, at)?,
            p_flags: read_u32(data, at + 4)?,
            p_offset: read_u64(data, at + 8)?,
            p_vaddr: read_u64(data, at + 16)?,
            p_paddr: read_u64(data, at + 24)?,
            p_filesz: read_u64(data, at + 32)?,
            p_memsz: read_u64(data, at + 40)?,
            p_align: read_u64(data, at + 48)?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.p_type.to_le_bytes());
        out.extend_from_slice(&self.p_flags.to_le_bytes());
        for value in [
            self.p_offset,
            self.p_vaddr,
            self.p_paddr,
            self.p_filesz,
            self.p_memsz,
            self.p_align,
        ] {
            out.extend_from_slice(&value.to_le_bytes());
        }
    }

    /// End of the file bytes the segment maps.
    pub fn file_end(&self) -> u64 {
        self.p_offset + self.p_filesz
    }

    /// End of the segment in memory.
    pub fn memory_end(&self) -> u64 {
        self.p_vaddr + self.p_memsz
    }
}

/// A section header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shdr {
    pub sh_name: u32,
    pub sh_type: u32,
    pub sh_flags: u64,
    pub sh_addr: u64,
    pub sh_offset: u64,
    pub sh_size: u64,
    pub sh_link: u32,
    pub sh_info: u32,
    pub sh_addralign: u64,
    pub sh_entsize: u64,
}

impl Shdr {
    pub fn read(data: &[u8], at: usize) -> Result<Shdr, ElfError> {
        Ok(Shdr {
            sh_name: read_u32(data, at)?,
            sh_type: read_u32(data, at + 4)?,
            sh_flags: read_u64(data, at + 8)?,
            sh_addr: read_u64(data, at + 16)?,
            sh_offset: read_u64(data, at + 24)?,
            sh_size: read_u64(data, at + 32)?,
            sh_link: read_u32(data, at + 40)?,
            sh_info: read_u32(data, at + 44)?,
            sh_addralign: read_u64(data, at + 48)?,
            sh_entsize: read_u64(data, at + 56)?,
        })
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.sh_name.to_le_bytes());
        out.extend_from_slice(&self.sh_type.to_le_bytes());
        for value in [self.sh_flags, self.sh_addr, self.sh_offset, self.sh_size] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        out.extend_from_slice(&self.sh_link.to_le_bytes());
        out.extend_from_slice(&self.sh_info.to_le_bytes());
        out.extend_from_slice(&self.sh_addralign.to_le_bytes());
        out.extend_from_slice(&self.sh_entsize.to_le_bytes());
    }

    /// Whether the section occupies bytes in the file.
    pub fn has_file_data(&self) -> bool {
        self.sh_type != SHT_NOBITS && self.sh_type != SHT_NULL
    }
}

//! The program header rule of executables on RHEL/Rocky 8 (rocm-systems#7937,
//! TheRock#5430).
//!
//! Linux 4.18 tells the dynamic loader where the program header table is
//! (`AT_PHDR`) as the load base plus `e_phoff`, the base being where the
//! first `PT_LOAD` maps file offset 0; it does not look for the segment
//! that really maps the table, as later kernels do. ld.so then takes the
//! load bias as `AT_PHDR` minus `PT_PHDR`'s address. An executable (a file
//! with `PT_INTERP`, which the kernel starts) whose table is loaded
//! anywhere else than its file offset plus the first load segment's bias
//! crashes in ld.so before `main` there, and runs on newer kernels. Shared
//! libraries are mapped by ld.so, which finds their table correctly.
//!
//! [`check_program_headers`] is the one check of the rule: the surgery
//! runs it on every file it writes, `kpack-pack verify` on every split
//! binary it meets.

use object::elf::{PT_INTERP, PT_LOAD, PT_PHDR};
use object::read::elf::{FileHeader, ProgramHeader};
use object::{elf, Endianness, FileKind};

use crate::error::ProgramHeaderError;

/// What [`check_program_headers`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgramHeaderRule {
    /// An executable whose program header table is where old kernels
    /// say it is.
    Holds,
    /// Not an ELF executable (no `PT_INTERP`): the rule does not apply.
    NotAnExecutable,
}

/// Checks the rule on the ELF file `data`: when it has a `PT_INTERP`
/// segment, its `PT_PHDR` (if any) must describe the table at `e_phoff`
/// and sit at that offset plus the bias of the first `PT_LOAD` (its
/// `p_vaddr - p_offset`), and a load segment with that bias must map the
/// whole table. Files that are not ELF are not executables; a malformed
/// ELF file is an error, never a panic.
pub fn check_program_headers(data: &[u8]) -> Result<ProgramHeaderRule, ProgramHeaderError> {
    match FileKind::parse(data) {
        Ok(FileKind::Elf64) => check::<elf::FileHeader64<Endianness>>(data),
        Ok(FileKind::Elf32) => check::<elf::FileHeader32<Endianness>>(data),
        _ => Ok(ProgramHeaderRule::NotAnExecutable),
    }
}

/// [`check_program_headers`] for one ELF class.
fn check<H: FileHeader<Endian = Endianness>>(
    data: &[u8],
) -> Result<ProgramHeaderRule, ProgramHeaderError> {
    let malformed = |error: object::Error| ProgramHeaderError::Malformed(error.to_string());
    let header = H::parse(data).map_err(malformed)?;
    let endian = header.endian().map_err(malformed)?;
    let phdrs = header.program_headers(endian, data).map_err(malformed)?;
    if !phdrs.iter().any(|p| p.p_type(endian) == PT_INTERP) {
        return Ok(ProgramHeaderRule::NotAnExecutable);
    }
    // Addresses wrap at the class's width, as the loader computes them.
    let width = if header.is_type_64() {
        u64::MAX
    } else {
        u64::from(u32::MAX)
    };
    let bias_of = |p: &H::ProgramHeader| {
        p.p_vaddr(endian)
            .into()
            .wrapping_sub(p.p_offset(endian).into())
            & width
    };
    let first = phdrs
        .iter()
        .find(|p| p.p_type(endian) == PT_LOAD)
        .ok_or(ProgramHeaderError::NoLoadSegment)?;
    let bias = bias_of(first);
    let phoff: u64 = header.e_phoff(endian).into();
    if let Some(phdr) = phdrs.iter().find(|p| p.p_type(endian) == PT_PHDR) {
        let (offset, vaddr) = (phdr.p_offset(endian).into(), phdr.p_vaddr(endian).into());
        if offset != phoff {
            return Err(ProgramHeaderError::NotTheTable { offset, phoff });
        }
        if bias_of(phdr) != bias {
            return Err(ProgramHeaderError::Misplaced {
                vaddr,
                offset,
                bias,
            });
        }
    }
    let len = size_of_val(phdrs) as u64;
    let loaded = phdrs.iter().any(|p| {
        let (start, size) = (p.p_offset(endian).into(), p.p_filesz(endian).into());
        p.p_type(endian) == PT_LOAD
            && bias_of(p) == bias
            && start <= phoff
            && phoff.checked_add(len) <= start.checked_add(size)
    });
    if !loaded {
        return Err(ProgramHeaderError::NotLoaded { phoff, len, bias });
    }
    Ok(ProgramHeaderRule::Holds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::elf::{
        FileFlags, FileHeader64, FileType, ProgramHeader64, ProgramType, ELFCLASS64, ELFDATA2LSB,
        ELFOSABI_NONE, EM_X86_64, ET_DYN, ET_EXEC, EV_CURRENT, PF_R, SHN_UNDEF,
    };
    use object::{pod, LittleEndian as LE, U16, U32, U64};

    type Phdr = ProgramHeader64<LE>;

    fn phdr(kind: ProgramType, offset: u64, vaddr: u64, size: u64) -> Phdr {
        Phdr {
            p_type: U32::new(LE, kind),
            p_flags: U32::new(LE, PF_R),
            p_offset: U64::new(LE, offset),
            p_vaddr: U64::new(LE, vaddr),
            p_paddr: U64::new(LE, vaddr),
            p_filesz: U64::new(LE, size),
            p_memsz: U64::new(LE, size),
            p_align: U64::new(LE, if kind == PT_LOAD { 0x1000 } else { 8 }),
        }
    }

    /// An ELF64 file of type `kind`: the header, then `phdrs` at offset
    /// 64, padded to 0x2000 bytes.
    fn file(kind: FileType, phdrs: &[Phdr]) -> Vec<u8> {
        let header = FileHeader64::<LE> {
            e_ident: elf::Ident {
                magic: elf::ELFMAG,
                class: ELFCLASS64,
                data: ELFDATA2LSB,
                version: EV_CURRENT,
                os_abi: ELFOSABI_NONE,
                abi_version: 0,
                padding: [0; 7],
            },
            e_type: U16::new(LE, kind),
            e_machine: U16::new(LE, EM_X86_64),
            e_version: U32::new(LE, 1),
            e_entry: U64::new(LE, 0),
            e_phoff: U64::new(LE, 64),
            e_shoff: U64::new(LE, 0),
            e_flags: U32::new(LE, FileFlags(0)),
            e_ehsize: U16::new(LE, 64),
            e_phentsize: U16::new(LE, 56),
            e_phnum: U16::new(LE, phdrs.len() as u16),
            e_shentsize: U16::new(LE, 64),
            e_shnum: U16::new(LE, 0),
            e_shstrndx: U16::new(LE, SHN_UNDEF),
        };
        let mut data = pod::bytes_of(&header).to_vec();
        data.extend_from_slice(pod::bytes_of_slice(phdrs));
        data.resize(0x2000, 0);
        data
    }

    /// A PIE's headers as GNU ld writes them: the table at 64, loaded at 64.
    fn pie() -> Vec<Phdr> {
        vec![
            phdr(PT_PHDR, 64, 64, 4 * 56),
            phdr(PT_INTERP, 0x318, 0x318, 0x1c),
            phdr(PT_LOAD, 0, 0, 0x640),
            phdr(PT_LOAD, 0x1000, 0x1000, 0x100),
        ]
    }

    #[test]
    fn a_table_where_the_linker_puts_it_holds() {
        assert_eq!(
            check_program_headers(&file(ET_DYN, &pie())),
            Ok(ProgramHeaderRule::Holds)
        );
        // A non-PIE executable: every address biased by its base.
        let base = 0x40_0000;
        let mut phdrs = pie();
        for p in &mut phdrs {
            p.p_vaddr.set(LE, p.p_vaddr.get(LE) + base);
        }
        assert_eq!(
            check_program_headers(&file(ET_EXEC, &phdrs)),
            Ok(ProgramHeaderRule::Holds)
        );
    }

    #[test]
    fn a_table_loaded_away_from_its_offset_breaks_the_rule() {
        // The table at 64 in the file, claimed at 0x1040 in memory.
        let mut phdrs = pie();
        phdrs[0] = phdr(PT_PHDR, 64, 0x1040, 4 * 56);
        let error = check_program_headers(&file(ET_DYN, &phdrs)).unwrap_err();
        assert_eq!(
            error,
            ProgramHeaderError::Misplaced {
                vaddr: 0x1040,
                offset: 64,
                bias: 0
            }
        );
        assert_eq!(
            error.to_string(),
            "program headers: PT_PHDR at vaddr 0x1040 is not at its file offset 0x40 + load \
             bias 0x0 (RHEL 8 kernels compute AT_PHDR as load base + e_phoff; rocm-systems#7937)"
        );
    }

    #[test]
    fn a_table_no_segment_loads_at_its_bias_breaks_the_rule() {
        // PT_PHDR agrees, but the only segment mapping the table has
        // another bias than the first load segment.
        let mut phdrs = pie();
        phdrs[2] = phdr(PT_LOAD, 0x1000, 0x1000, 0x100);
        phdrs[3] = phdr(PT_LOAD, 0, 0x3000, 0x640);
        assert_eq!(
            check_program_headers(&file(ET_DYN, &phdrs)),
            Err(ProgramHeaderError::NotLoaded {
                phoff: 64,
                len: 4 * 56,
                bias: 0
            })
        );
        // PT_PHDR describing other bytes than the table.
        let mut phdrs = pie();
        phdrs[0] = phdr(PT_PHDR, 0x100, 0x100, 4 * 56);
        assert_eq!(
            check_program_headers(&file(ET_DYN, &phdrs)),
            Err(ProgramHeaderError::NotTheTable {
                offset: 0x100,
                phoff: 64
            })
        );
    }

    #[test]
    fn files_without_an_interpreter_are_not_checked() {
        let mut phdrs = pie();
        phdrs.remove(1);
        phdrs[0] = phdr(PT_PHDR, 64, 0x1040, 3 * 56);
        assert_eq!(
            check_program_headers(&file(ET_DYN, &phdrs)),
            Ok(ProgramHeaderRule::NotAnExecutable)
        );
        assert_eq!(
            check_program_headers(b"#!/bin/sh\n"),
            Ok(ProgramHeaderRule::NotAnExecutable)
        );
    }

    #[test]
    fn malformed_files_are_errors_not_panics() {
        let data = file(ET_DYN, &pie());
        // Every truncation of the header and the table.
        for len in 0..64 + 4 * 56 {
            let result = check_program_headers(&data[..len]);
            assert!(
                matches!(
                    result,
                    Err(ProgramHeaderError::Malformed(_)) | Ok(ProgramHeaderRule::NotAnExecutable)
                ),
                "{len}: {result:?}"
            );
        }
        // An executable without a load segment.
        let phdrs = [phdr(PT_PHDR, 64, 64, 2 * 56), phdr(PT_INTERP, 0, 0, 1)];
        assert_eq!(
            check_program_headers(&file(ET_DYN, &phdrs)),
            Err(ProgramHeaderError::NoLoadSegment)
        );
        // A load segment whose end overflows maps nothing.
        let mut phdrs = pie();
        phdrs[2] = phdr(PT_LOAD, 0x10, 0x10, u64::MAX);
        phdrs.pop();
        assert_eq!(
            check_program_headers(&file(ET_DYN, &phdrs)),
            Err(ProgramHeaderError::NotLoaded {
                phoff: 64,
                len: 3 * 56,
                bias: 0
            })
        );
    }
}

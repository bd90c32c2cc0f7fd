//! AMDGPU code objects found by what they are, not by their names: a file
//! (or bytes inside a host binary) that is an ELF image for `EM_AMDGPU`
//! with the AMDHSA OS ABI, code object version 4 to 6, is device code for
//! the target its `e_flags` name (03-packer.md, "Code objects found by
//! content").

use std::collections::BTreeSet;

use kpack_gpu::Target;
use object::read::elf::{FileHeader, SectionHeader};
use object::{elf, Endianness};

/// `e_machine` of AMDGPU code objects.
const EM_AMDGPU: u16 = 224;
/// `EI_OSABI` of code objects for the HSA runtime.
const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `EI_CLASS` of 64-bit ELF files.
const ELFCLASS64: u8 = 2;
/// `EI_DATA` of little-endian ELF files.
const ELFDATA2LSB: u8 = 1;
/// The bytes of an ELF64 header: what must be at hand to read one.
pub const HEADER_SIZE: usize = 64;

/// What a code object's header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeObject {
    /// The target its code is for, with the features it requires.
    pub target: Target,
    /// The code object version (4, 5 or 6).
    pub version: u8,
}

/// Reads the code object header at the start of `bytes` (at least
/// [`HEADER_SIZE`] of them): `None` unless it is a little-endian ELF64
/// AMDGPU code object of version 4 to 6 for a machine the GPU facts know.
pub fn read_header(bytes: &[u8]) -> Option<CodeObject> {
    let head = bytes.get(..HEADER_SIZE)?;
    if &head[..4] != b"\x7fELF" || head[4] != ELFCLASS64 || head[5] != ELFDATA2LSB {
        return None;
    }
    if head[7] != ELFOSABI_AMDGPU_HSA {
        return None;
    }
    let version = match head[8] {
        2 => 4,
        3 => 5,
        4 => 6,
        _ => return None,
    };
    if u16::from_le_bytes([head[18], head[19]]) != EM_AMDGPU {
        return None;
    }
    let flags = u32::from_le_bytes([head[48], head[49], head[50], head[51]]);
    Some(CodeObject {
        target: Target::of_flags(flags)?,
        version,
    })
}

/// Reads the code object header of the file at `path`: `None` for a file
/// that is not a code object (or too short to be one).
pub fn read_file_header(path: &std::path::Path) -> std::io::Result<Option<CodeObject>> {
    use std::io::Read;
    let mut head = Vec::with_capacity(HEADER_SIZE);
    fs_err::File::open(path)?
        .take(HEADER_SIZE as u64)
        .read_to_end(&mut head)?;
    Ok(read_header(&head))
}

/// How many bytes the ELF image at the start of `bytes` spans: to the end
/// of its furthest section or header table, as far as `bytes` reaches.
/// `None` when its headers cannot be read.
pub fn extent(bytes: &[u8]) -> Option<u64> {
    let header = elf::FileHeader64::<Endianness>::parse(bytes).ok()?;
    let endian = header.endian().ok()?;
    let mut end = u64::from(header.e_ehsize.get(endian));
    let sections = header.section_headers(endian, bytes).ok()?;
    let table = header.e_shoff.get(endian)
        + u64::from(header.e_shentsize.get(endian)) * sections.len() as u64;
    end = end.max(table);
    let phoff = header.e_phoff.get(endian);
    let phnum = u64::from(header.e_phnum.get(endian));
    end = end.max(phoff + phnum * u64::from(header.e_phentsize.get(endian)));
    for section in sections {
        if section.sh_type(endian) != elf::SHT_NOBITS {
            end = end.max(section.sh_offset(endian) + section.sh_size(endian));
        }
    }
    Some(end.min(bytes.len() as u64))
}

/// Code objects embedded in one section of a host binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Embedded {
    /// The section holding them (`.rodata`).
    pub section: String,
    /// The targets they are for, sorted.
    pub targets: Vec<Target>,
    pub count: usize,
    /// The bytes they span.
    pub bytes: u64,
}

/// The code objects a host binary (ELF or PE) embeds outside its offload
/// bundles, by section: device code it loads by its own means, which no
/// marker can redirect. Empty for a file the `object` crate cannot read.
pub fn embedded_in(binary: &[u8]) -> Vec<Embedded> {
    use object::{Object, ObjectSection, SectionKind};
    let Ok(file) = object::File::parse(binary) else {
        return Vec::new();
    };
    let bundles = [
        crate::elf::FATBIN_SECTION,
        crate::pe::FATBIN_SECTION,
        crate::elf::WRAPPER_SECTION,
        crate::pe::WRAPPER_SECTION,
    ];
    let mut found = Vec::new();
    for section in file.sections() {
        let name = section.name().unwrap_or_default();
        if bundles.contains(&name) || section.kind() == SectionKind::UninitializedData {
            continue;
        }
        let Ok(data) = section.data() else { continue };
        let (targets, count, bytes) = find_in(data);
        if count > 0 {
            found.push(Embedded {
                section: name.to_owned(),
                targets: targets.into_iter().collect(),
                count,
                bytes,
            });
        }
    }
    found
}

/// Finds the code objects embedded in `data`, a section's contents: each
/// complete code object header, then its extent, is skipped past.
pub fn find_in(data: &[u8]) -> (BTreeSet<Target>, usize, u64) {
    let mut targets = BTreeSet::new();
    let (mut count, mut bytes) = (0usize, 0u64);
    let mut at = 0usize;
    while let Some(found) = find_magic(&data[at..]) {
        let start = at + found;
        let rest = &data[start..];
        match read_header(rest) {
            Some(code_object) => {
                let size = extent(rest).unwrap_or(HEADER_SIZE as u64).max(4);
                targets.insert(code_object.target);
                count += 1;
                bytes += size;
                at = start + usize::try_from(size).unwrap_or(rest.len()).min(rest.len());
            }
            None => at = start + 4,
        }
    }
    (targets, count, bytes)
}

/// Where `\x7fELF` first starts in `data`.
fn find_magic(data: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = data[from..].iter().position(|&b| b == 0x7f) {
        let start = from + at;
        if data[start..].starts_with(b"\x7fELF") {
            return Some(start);
        }
        from = start + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A code object header: ELF64, little-endian, AMDHSA, the given ABI
    /// version byte and e_flags.
    pub(crate) fn header(abi_version: u8, flags: u32) -> Vec<u8> {
        let mut head = vec![0u8; HEADER_SIZE];
        head[..4].copy_from_slice(b"\x7fELF");
        head[4] = ELFCLASS64;
        head[5] = ELFDATA2LSB;
        head[6] = 1;
        head[7] = ELFOSABI_AMDGPU_HSA;
        head[8] = abi_version;
        head[16] = 3; // ET_DYN
        head[18..20].copy_from_slice(&EM_AMDGPU.to_le_bytes());
        head[48..52].copy_from_slice(&flags.to_le_bytes());
        head[52..54].copy_from_slice(&64u16.to_le_bytes());
        head
    }

    #[test]
    fn code_objects_of_version_4_to_6_name_their_target() {
        let object = read_header(&header(2, 0x4c | 0x200)).unwrap();
        assert_eq!(object.target.to_string(), "gfx942:xnack-");
        assert_eq!(object.version, 4);
        assert_eq!(read_header(&header(3, 0x4f)).unwrap().version, 5);
        let generic = read_header(&header(4, 0x0100_0062)).unwrap();
        assert_eq!(generic.target.to_string(), "gfx11-7-generic");
        assert_eq!(
            read_header(&header(4, 0xeb)).unwrap().target.to_string(),
            "gfx1250-strict"
        );
    }

    #[test]
    fn other_elf_files_and_old_versions_are_not_code_objects() {
        assert_eq!(read_header(&header(1, 0x4c)), None, "code object v3");
        assert_eq!(read_header(&header(2, 0x00)), None, "no machine");
        let mut x86 = header(2, 0x4c);
        x86[18..20].copy_from_slice(&62u16.to_le_bytes());
        assert_eq!(read_header(&x86), None);
        let mut linux = header(2, 0x4c);
        linux[7] = 0;
        assert_eq!(read_header(&linux), None);
        assert_eq!(read_header(&header(2, 0x4c)[..63]), None);
    }

    #[test]
    fn embedded_code_objects_are_counted_once_each() {
        let mut data = b"padding\x7fEL".to_vec();
        data.extend(header(2, 0x4c));
        data.extend(b"\x7fELF not a code object");
        data.extend(header(3, 0x4f));
        let (targets, count, bytes) = find_in(&data);
        assert_eq!(count, 2);
        assert_eq!(bytes, 128);
        let names: Vec<String> = targets.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["gfx942", "gfx950"]);
    }
}

//! What the search and the classification read from an ELF shared library:
//! its `DT_NEEDED`, `DT_RUNPATH` and `DT_RPATH` entries, the dynamic
//! symbols it imports, and whether its read-only data holds given strings.
//!
//! Only the headers, the dynamic section and the dynamic symbols are read
//! (through `object`'s read cache); read-only data is streamed in chunks,
//! so a runtime of hundreds of megabytes costs little memory.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use object::elf::{self, FileHeader64};
use object::read::elf::{FileHeader, SectionHeader, SectionTable, Sym as _};
use object::read::{ReadCache, StringTable};
use object::{Endianness, SectionIndex};

use super::HipRuntimeError;

/// The bytes read at a time when searching read-only data.
const CHUNK: usize = 1 << 20;
/// The largest dynamic string table read.
const MAX_DYNAMIC_STRINGS: u64 = 64 << 20;

/// A shared library's dynamic entries and imports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DynamicInfo {
    /// `DT_NEEDED`, in order.
    pub needed: Vec<String>,
    /// `DT_RUNPATH`, as written (`$ORIGIN/../lib64:/opt/x`).
    pub runpath: Option<String>,
    /// `DT_RPATH`, as written.
    pub rpath: Option<String>,
    /// `DT_SONAME` (`libamdhip64.so.7`).
    pub soname: Option<String>,
    /// The names of undefined dynamic symbols.
    pub imports: Vec<String>,
    /// File ranges (offset, size) of the loaded, read-only, non-executable
    /// sections that hold data (`.rodata` and the like).
    pub read_only: Vec<(u64, u64)>,
}

/// Reads the dynamic entries of a 64-bit x86-64 ELF file; any other file
/// is an error.
pub(crate) fn read_dynamic(path: &Path) -> Result<DynamicInfo, HipRuntimeError> {
    let file = fs_err::File::open(path).map_err(|source| HipRuntimeError::Read {
        path: path.to_owned(),
        source,
    })?;
    let cache = ReadCache::new(file);
    let data = &cache;
    let bad = |source| HipRuntimeError::Elf {
        path: path.to_owned(),
        source,
    };
    let header = FileHeader64::<Endianness>::parse(data).map_err(bad)?;
    let endian = header.endian().map_err(bad)?;
    if header.e_machine(endian) != elf::EM_X86_64 {
        return Err(HipRuntimeError::NotX86_64 {
            path: path.to_owned(),
        });
    }
    let sections = header.sections(endian, data).map_err(bad)?;
    let mut info = DynamicInfo::default();
    let dynamic = sections.dynamic_table(endian, data).map_err(bad)?;
    let strings = dynamic_strings(path, &sections, endian, data)?;
    let strings = StringTable::new(strings, 0, strings.len() as u64);
    for entry in &dynamic {
        let text = || -> Result<String, HipRuntimeError> {
            let bytes = entry.string(&strings).map_err(bad)?;
            Ok(String::from_utf8_lossy(bytes).into_owned())
        };
        match entry.tag {
            elf::DT_NEEDED => info.needed.push(text()?),
            elf::DT_RUNPATH => info.runpath = Some(text()?),
            elf::DT_RPATH => info.rpath = Some(text()?),
            elf::DT_SONAME => info.soname = Some(text()?),
            _ => {}
        }
    }
    let symbols = sections
        .symbols(endian, data, elf::SHT_DYNSYM)
        .map_err(bad)?;
    for symbol in symbols.iter() {
        if symbol.is_undefined(endian) {
            let name = symbol.name(endian, strings).map_err(bad)?;
            if !name.is_empty() {
                info.imports
                    .push(String::from_utf8_lossy(name).into_owned());
            }
        }
    }
    for section in sections.iter() {
        let flags = section.sh_flags(endian);
        if section.sh_type(endian) == elf::SHT_PROGBITS
            && flags.contains(elf::SHF_ALLOC)
            && !flags.contains(elf::SHF_WRITE)
            && !flags.contains(elf::SHF_EXECINSTR)
        {
            info.read_only.extend(section.file_range(endian));
        }
    }
    Ok(info)
}

/// The bytes of the dynamic string table (`.dynstr`, the dynamic
/// section's link), read whole: `object`'s read cache reads at most 4096
/// bytes of a string, and TheRock's libraries carry run paths longer than
/// that (jax's plugin: about 7 KB). A table larger than
/// [`MAX_DYNAMIC_STRINGS`] is refused.
fn dynamic_strings<'data>(
    path: &Path,
    sections: &SectionTable<'data, FileHeader64<Endianness>, &'data ReadCache<fs_err::File>>,
    endian: Endianness,
    data: &'data ReadCache<fs_err::File>,
) -> Result<&'data [u8], HipRuntimeError> {
    let bad = |source| HipRuntimeError::Elf {
        path: path.to_owned(),
        source,
    };
    let Some(dynamic) = sections
        .iter()
        .find(|s| s.sh_type(endian) == elf::SHT_DYNAMIC)
    else {
        return Ok(&[]);
    };
    let table = sections
        .section(SectionIndex(dynamic.sh_link(endian) as usize))
        .map_err(bad)?;
    let size = table.sh_size(endian);
    if size > MAX_DYNAMIC_STRINGS {
        return Err(HipRuntimeError::DynamicStringsTooLarge {
            path: path.to_owned(),
            size,
        });
    }
    table.data(endian, data).map_err(bad)
}

/// Which of `needles` occur in the file's `ranges`, read in chunks that
/// overlap by the longest needle (so one across a boundary is found).
pub(crate) fn ranges_hold(
    path: &Path,
    ranges: &[(u64, u64)],
    needles: &[&[u8]],
) -> Result<Vec<bool>, HipRuntimeError> {
    let finders: Vec<_> = needles.iter().map(memchr::memmem::Finder::new).collect();
    let overlap = needles.iter().map(|n| n.len()).max().unwrap_or(0);
    let mut found = vec![false; needles.len()];
    for_each_chunk(path, ranges, overlap, |chunk| {
        for (finder, hit) in finders.iter().zip(found.iter_mut()) {
            *hit |= finder.find(chunk).is_some();
        }
    })?;
    Ok(found)
}

/// Calls `each` with the file's `ranges`, read in chunks of at most a MiB
/// that overlap by `overlap` bytes (so what spans a boundary is whole in
/// one of them).
pub(crate) fn for_each_chunk(
    path: &Path,
    ranges: &[(u64, u64)],
    overlap: usize,
    mut each: impl FnMut(&[u8]),
) -> Result<(), HipRuntimeError> {
    let read_error = |source| HipRuntimeError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = fs_err::File::open(path).map_err(read_error)?;
    let mut buffer = Vec::with_capacity(CHUNK + overlap);
    for &(offset, size) in ranges {
        file.seek(SeekFrom::Start(offset)).map_err(read_error)?;
        let mut section = (&mut file).take(size);
        buffer.clear();
        loop {
            let read = (&mut section)
                .take(CHUNK as u64)
                .read_to_end(&mut buffer)
                .map_err(read_error)?;
            if read == 0 {
                break;
            }
            each(&buffer);
            // Keep the tail, so what the chunk's end splits is whole in
            // the next one.
            let keep = overlap.saturating_sub(1).min(buffer.len());
            buffer.drain(..buffer.len() - keep);
        }
    }
    Ok(())
}

/// A shared library's path with `$ORIGIN` expanded in a run path entry;
/// `None` for entries the loader would take relative to the working
/// directory or with other tokens (`$LIB`, `$PLATFORM`), not followed.
pub(crate) fn expand_origin(entry: &str, origin: &Path) -> Option<PathBuf> {
    let origin = origin.to_str()?;
    let expanded = entry
        .replace("${ORIGIN}", origin)
        .replace("$ORIGIN", origin);
    if expanded.is_empty() || expanded.contains('$') || !expanded.starts_with('/') {
        return None;
    }
    Some(PathBuf::from(expanded))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_is_expanded_in_both_spellings_and_other_tokens_are_not_followed() {
        let origin = Path::new("/p/lib");
        assert_eq!(
            expand_origin("$ORIGIN/../lib64", origin),
            Some(PathBuf::from("/p/lib/../lib64"))
        );
        assert_eq!(
            expand_origin("${ORIGIN}/x", origin),
            Some(PathBuf::from("/p/lib/x"))
        );
        assert_eq!(
            expand_origin("/opt/rocm/lib", origin),
            Some("/opt/rocm/lib".into())
        );
        assert_eq!(expand_origin("$LIB/x", origin), None);
        assert_eq!(expand_origin("relative", origin), None);
        assert_eq!(expand_origin("", origin), None);
    }

    #[test]
    fn a_string_split_across_chunks_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let needle = b"kpack_search_paths";
        let mut bytes = vec![b'x'; CHUNK - 5];
        bytes.extend_from_slice(needle);
        bytes.extend_from_slice(&[b'y'; 100]);
        fs_err::write(&path, &bytes).unwrap();
        let whole = [(0, bytes.len() as u64)];
        let found = ranges_hold(&path, &whole, &[needle, b"ROCM_KPACK_ENABLED=OFF"]).unwrap();
        assert_eq!(found, [true, false]);
        // Outside the ranges searched, it is not seen.
        let before = [(0, (CHUNK - 5) as u64)];
        assert_eq!(ranges_hold(&path, &before, &[needle]).unwrap(), [false]);
    }

    #[test]
    fn a_file_that_is_not_elf_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libamdhip64.so.5");
        for bytes in [&b""[..], b"\x7fELF\x02\x01\x01", b"not an elf file at all"] {
            fs_err::write(&path, bytes).unwrap();
            assert!(read_dynamic(&path).is_err());
        }
    }
}

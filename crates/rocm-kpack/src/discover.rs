//! Which file is mapped at an address: how a HIP runtime finds the path of
//! the binary whose marker it was handed, to resolve the marker's relative
//! archive paths.
//!
//! On Linux the answer is in `/proc/self/maps`; on Windows the loader
//! knows which module (DLL or EXE) holds an address and the file it was
//! loaded from.

use std::path::PathBuf;

use crate::error::{Error, Result};

/// The file mapped at `address` and the offset `address` corresponds to:
/// on Linux the offset in the file, on Windows the offset from the
/// module's base (its relative virtual address).
pub fn binary_path_of(address: usize) -> Result<(PathBuf, u64)> {
    #[cfg(target_os = "linux")]
    {
        let maps = fs_err::read("/proc/self/maps").map_err(Error::Mappings)?;
        find_in_maps(&maps, address).ok_or(Error::PathDiscovery { address })
    }
    #[cfg(windows)]
    {
        module_of(address).ok_or(Error::PathDiscovery { address })
    }
    #[cfg(not(any(target_os = "linux", windows)))]
    {
        let _ = address;
        Err(Error::Disabled)
    }
}

/// The module (DLL or EXE) holding `address`, the file it was loaded from
/// and `address`'s offset from its base; `None` if no module holds it.
#[cfg(windows)]
fn module_of(address: usize) -> Option<(PathBuf, u64)> {
    use std::os::windows::ffi::OsStringExt;
    use windows_sys::Win32::Foundation::HMODULE;
    use windows_sys::Win32::System::LibraryLoader::{
        GetModuleFileNameW, GetModuleHandleExW, GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS,
        GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
    };

    /// The longest path Windows has (in UTF-16 units), with its NUL.
    const LONGEST_PATH: usize = 32_768;

    let mut module: HMODULE = std::ptr::null_mut();
    // SAFETY: with FROM_ADDRESS the name argument is only compared with
    // the modules' address ranges, never read; `module` is writable.
    // UNCHANGED_REFCOUNT takes no reference, so none is to be released.
    let found = unsafe {
        GetModuleHandleExW(
            GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT,
            address as *const u16,
            &mut module,
        )
    };
    if found == 0 || module.is_null() {
        return None;
    }
    // A module handle is the address the module is loaded at.
    let offset = address.checked_sub(module as usize)? as u64;
    let mut name = vec![0u16; 260];
    loop {
        let size = u32::try_from(name.len()).ok()?;
        // SAFETY: `name` is writable for `size` UTF-16 units.
        let len = unsafe { GetModuleFileNameW(module, name.as_mut_ptr(), size) } as usize;
        if len == 0 {
            return None;
        }
        // A name that fills the buffer was cut short: grow and ask again.
        if len < name.len() {
            name.truncate(len);
            return Some((PathBuf::from(std::ffi::OsString::from_wide(&name)), offset));
        }
        if name.len() >= LONGEST_PATH {
            return None;
        }
        name.resize((name.len() * 2).min(LONGEST_PATH), 0);
    }
}

/// Finds the first mapping in `/proc/<pid>/maps` text that contains
/// `address` and is backed by a file (a path starting with `/`; anonymous,
/// `[heap]`, `[stack]` and similar mappings are skipped).
pub fn find_in_maps(maps: &[u8], address: usize) -> Option<(PathBuf, u64)> {
    maps.split(|&b| b == b'\n').find_map(|line| {
        let mapping = parse_line(line)?;
        (mapping.start <= address && address < mapping.end && mapping.path.first() == Some(&b'/'))
            .then(|| {
                let offset = mapping.offset + (address - mapping.start) as u64;
                (bytes_to_path(mapping.path), offset)
            })
    })
}

struct Mapping<'a> {
    start: usize,
    end: usize,
    offset: u64,
    path: &'a [u8],
}

/// Parses `start-end perms offset dev inode   path`; the path is the rest
/// of the line after the inode and may contain spaces.
fn parse_line(line: &[u8]) -> Option<Mapping<'_>> {
    let mut rest = line;
    let mut field = || -> Option<&[u8]> {
        let trimmed = rest.trim_ascii_start();
        let end = trimmed
            .iter()
            .position(|&b| b == b' ')
            .unwrap_or(trimmed.len());
        let (value, tail) = trimmed.split_at(end);
        rest = tail;
        (!value.is_empty()).then_some(value)
    };
    let range = field()?;
    let _perms = field()?;
    let offset = field()?;
    let _device = field()?;
    let _inode = field()?;
    let path = rest.trim_ascii_start();
    let hex = |bytes: &[u8]| u64::from_str_radix(std::str::from_utf8(bytes).ok()?, 16).ok();
    let dash = range.iter().position(|&b| b == b'-')?;
    Some(Mapping {
        start: usize::try_from(hex(&range[..dash])?).ok()?,
        end: usize::try_from(hex(&range[dash + 1..])?).ok()?,
        offset: hex(offset)?,
        path,
    })
}

#[cfg(unix)]
fn bytes_to_path(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

#[cfg(not(unix))]
fn bytes_to_path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &[u8] = b"\
00400000-00401000 r--p 00000000 fd:01 1234                               /usr/bin/app
00401000-00405000 r-xp 00001000 fd:01 1234                               /usr/bin/app
7f0000000000-7f0000001000 rw-p 00000000 00:00 0 
7f0000001000-7f0000003000 r--p 00002000 fd:01 99                         /opt/my libs/libx.so
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
";

    #[test]
    fn finds_file_and_offset() {
        let (path, offset) = find_in_maps(MAPS, 0x401010).unwrap();
        assert_eq!(path, PathBuf::from("/usr/bin/app"));
        assert_eq!(offset, 0x1010);
    }

    #[test]
    fn keeps_spaces_in_paths() {
        let (path, offset) = find_in_maps(MAPS, 0x7f0000002000).unwrap();
        assert_eq!(path, PathBuf::from("/opt/my libs/libx.so"));
        assert_eq!(offset, 0x3000);
    }

    #[test]
    fn skips_anonymous_and_special_mappings() {
        assert!(find_in_maps(MAPS, 0x7f0000000010).is_none());
        assert!(find_in_maps(MAPS, 0x7ffd00000100).is_none());
        assert!(find_in_maps(MAPS, 0x10).is_none());
        assert!(find_in_maps(b"garbage\n\n1-2\n", 1).is_none());
    }
}

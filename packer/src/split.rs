//! Splitting one file: the host-only binary plus the code objects that go
//! into archives.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rocm_kpack::{BinaryKey, Marker, Target};

use crate::archive::Entry;
use crate::elf::{split_elf, FatElf, SplitLayout};
use crate::error::{ElfError, Result};

/// A fat binary split in memory.
#[derive(Debug)]
pub struct SplitBinary<'a> {
    /// The host-only file.
    pub host: Vec<u8>,
    /// Its code objects, bundle by bundle, in entry order.
    pub entries: Vec<Entry<'a>>,
    pub layout: SplitLayout,
}

/// Splits `data` if it is a fat ELF file (`Ok(None)` otherwise). `key_path`
/// is the binary's path relative to the install root (its TOC key without
/// `#N`); `search_paths` go into its marker, relative to its directory.
pub fn split_binary<'a>(
    data: &'a [u8],
    key_path: &str,
    search_paths: Vec<String>,
) -> Result<Option<SplitBinary<'a>>, ElfError> {
    split_binary_with(data, key_path, |_| search_paths)
}

/// As [`split_binary`], with the marker's paths chosen from the targets
/// the binary has code for (family archives are named per target).
pub fn split_binary_with<'a>(
    data: &'a [u8],
    key_path: &str,
    search_paths: impl FnOnce(&[Target]) -> Vec<String>,
) -> Result<Option<SplitBinary<'a>>, ElfError> {
    let Some(fat) = FatElf::parse(data)? else {
        return Ok(None);
    };
    let mut targets: Vec<Target> = Vec::new();
    for code_object in fat.bundles.iter().flat_map(|b| &b.code_objects) {
        if !targets.contains(&code_object.target) {
            targets.push(code_object.target.clone());
        }
    }
    let marker = Marker {
        search_paths: search_paths(&targets),
        kernel_name: key_path.replace('\\', "/"),
    };
    let (host, layout) = split_elf(data, &fat, &marker.to_bytes())?;
    let mut entries = Vec::new();
    for (index, bundle) in fat.bundles.iter().enumerate() {
        let binary = BinaryKey::new(key_path, index as u32);
        for code_object in &bundle.code_objects {
            entries.push(Entry {
                binary: binary.clone(),
                target: code_object.target.clone(),
                bytes: code_object.bytes.clone(),
                metadata: None,
            });
        }
    }
    Ok(Some(SplitBinary {
        host,
        entries,
        layout,
    }))
}

/// Writes `bytes` to `path` atomically, with the mode of `like` (the input
/// it was made from) under the umask, as `cp` would.
pub fn write_like(path: &Path, bytes: &[u8], like: &Path) -> Result<()> {
    let mode = fs_err::metadata(like)?.permissions().mode();
    kpack_fs::write_atomic_with_mode(path, bytes, mode)?;
    Ok(())
}

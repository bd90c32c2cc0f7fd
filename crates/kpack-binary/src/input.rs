//! Input files read through a memory mapping, so that bundles are parsed
//! and code objects compressed straight from the page cache, and pages
//! already written into archives can be dropped from the process.

use std::path::{Path, PathBuf};

use memmap2::{Mmap, UncheckedAdvice};

use crate::error::{Error, Result};

/// A read-only mapped input file.
#[derive(Debug)]
pub struct MappedFile {
    path: PathBuf,
    file: std::fs::File,
    map: Option<Mmap>,
}

impl MappedFile {
    /// Maps `path` (an empty file maps to no bytes).
    pub fn open(path: &Path) -> Result<MappedFile> {
        let file = fs_err::File::open(path)?;
        let len = file.metadata()?.len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: read-only mapping of an input file the packer never
            // writes; like every mapped reader it relies on the file not
            // being truncated while it runs.
            Some(
                unsafe { Mmap::map(file.file()) }.map_err(|source| Error::Map {
                    path: path.to_owned(),
                    source,
                })?,
            )
        };
        Ok(MappedFile {
            path: path.to_owned(),
            file: file.into_parts().0,
            map,
        })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or_default()
    }

    /// The open file, for copying ranges of it without the mapping.
    pub fn file(&self) -> &std::fs::File {
        &self.file
    }

    /// The path it was mapped from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Drops the pages under `bytes` (a slice of this file) from the
    /// process; they are read again from the page cache if touched later.
    pub fn release(&self, bytes: &[u8]) {
        let Some(map) = &self.map else { return };
        let base = map.as_ptr() as usize;
        let start = bytes.as_ptr() as usize;
        if bytes.is_empty() || start < base || start + bytes.len() > base + map.len() {
            return;
        }
        // SAFETY: the mapping is read-only and file-backed; DONTNEED only
        // unmaps pages, which later reads fault in again with the same
        // bytes. (memmap2 widens the range to whole pages.)
        let _ = unsafe {
            map.unchecked_advise_range(UncheckedAdvice::DontNeed, start - base, bytes.len())
        };
    }
}

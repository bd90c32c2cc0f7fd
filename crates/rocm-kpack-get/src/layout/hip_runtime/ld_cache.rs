//! The dynamic loader's cache (`/etc/ld.so.cache`), read as glibc's loader
//! reads it to find a library by name.
//!
//! The format is glibc's `glibc-ld.so.cache1.1` (elf/dl-cache.h), either
//! alone or after the old `ld.so-1.7.0` table (glibc before 2.32 wrote
//! both). The crates that parse it are single releases with few users, and
//! the part needed here is small, so it is read by hand: every offset is
//! bounds-checked, and a malformed file is an `Err`, never a panic.

use std::path::{Path, PathBuf};

/// The new format's magic and version, at its start.
const MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
/// The old format's magic, before its entry count.
const OLD_MAGIC: &[u8] = b"ld.so-1.7.0";
/// `struct cache_file` (old): magic padded to 12 bytes, then `nlibs`.
const OLD_HEADER_SIZE: usize = 16;
/// `struct file_entry` (old): flags, key, value.
const OLD_ENTRY_SIZE: usize = 12;
/// `struct cache_file_new`: magic and version (20), `nlibs`,
/// `len_strings`, flags and padding (4), `extension_offset`, 3 unused.
const HEADER_SIZE: usize = 48;
/// `struct file_entry_new`: flags, key, value, osversion, hwcap.
const ENTRY_SIZE: usize = 24;
/// `cache_file_new.flags` for a little-endian cache (0 is "unknown",
/// which glibc takes as native).
const LITTLE_ENDIAN: u8 = 2;
/// `FLAG_ELF_LIBC6 | FLAG_X8664_LIB64`: the entries x86-64's loader uses.
const X86_64_LIBC6: i32 = 0x0303;
/// A cache larger than this is not one (real ones are well under 1 MiB).
pub(crate) const MAX_CACHE_SIZE: u64 = 64 << 20;
/// The longest name or path read from the string table.
const MAX_STRING: usize = 4096;

/// Why a cache cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LdCacheError {
    #[error("cannot read the loader's cache {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the loader's cache {path} is larger than {MAX_CACHE_SIZE} bytes")]
    TooLarge { path: PathBuf },
    #[error("{path} is not a loader cache this version reads: {reason}")]
    Format { path: PathBuf, reason: &'static str },
}

/// One library the cache knows: its name (`libamdhip64.so.5`), where it is,
/// and the hardware capabilities it needs (0 for the baseline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    pub name: String,
    pub path: PathBuf,
    pub hwcap: u64,
}

/// The x86-64 entries of a loader cache, in the file's order.
#[derive(Debug, Clone, Default)]
pub struct LdCache {
    entries: Vec<CacheEntry>,
}

impl LdCache {
    /// Reads and parses the cache at `path`.
    pub fn read(path: &Path) -> Result<LdCache, LdCacheError> {
        use std::io::Read;
        let read_error = |source| LdCacheError::Read {
            path: path.to_owned(),
            source,
        };
        let file = fs_err::File::open(path).map_err(read_error)?;
        let mut bytes = Vec::new();
        file.take(MAX_CACHE_SIZE + 1)
            .read_to_end(&mut bytes)
            .map_err(read_error)?;
        if bytes.len() as u64 > MAX_CACHE_SIZE {
            return Err(LdCacheError::TooLarge {
                path: path.to_owned(),
            });
        }
        LdCache::parse(&bytes).map_err(|reason| LdCacheError::Format {
            path: path.to_owned(),
            reason,
        })
    }

    /// Parses a cache's bytes; the error says what is wrong with them.
    pub fn parse(bytes: &[u8]) -> Result<LdCache, &'static str> {
        let start = new_format_start(bytes)?;
        let cache = bytes.get(start..).ok_or("truncated before the header")?;
        if cache.len() < HEADER_SIZE || !cache.starts_with(MAGIC) {
            return Err("no glibc-ld.so.cache1.1 header");
        }
        if !matches!(cache[28], 0 | LITTLE_ENDIAN) {
            return Err("not a little-endian cache");
        }
        let count = u32_at(cache, 20)? as usize;
        let table = count
            .checked_mul(ENTRY_SIZE)
            .and_then(|size| size.checked_add(HEADER_SIZE))
            .filter(|end| *end <= cache.len())
            .ok_or("more entries than the file holds")?;
        let mut entries = Vec::new();
        for offset in (HEADER_SIZE..table).step_by(ENTRY_SIZE) {
            let flags = u32_at(cache, offset)? as i32;
            if flags != X86_64_LIBC6 {
                continue;
            }
            let name = string_at(cache, u32_at(cache, offset + 4)?)?;
            let path = string_at(cache, u32_at(cache, offset + 8)?)?;
            entries.push(CacheEntry {
                name: name.to_owned(),
                path: PathBuf::from(path),
                hwcap: u64_at(cache, offset + 16)?,
            });
        }
        Ok(LdCache { entries })
    }

    /// The x86-64 entries, in the file's order.
    pub fn entries(&self) -> &[CacheEntry] {
        &self.entries
    }

    /// Where the loader finds `name`: the baseline entry (no hardware
    /// capabilities) if there is one, else the first.
    pub fn lookup(&self, name: &str) -> Option<&Path> {
        let mut matching = self.entries.iter().filter(|e| e.name == name);
        let first = matching.clone().next()?;
        let baseline = matching.find(|e| e.hwcap == 0).unwrap_or(first);
        Some(&baseline.path)
    }
}

/// Where the new format starts: at 0, or after the old table.
fn new_format_start(bytes: &[u8]) -> Result<usize, &'static str> {
    if bytes.starts_with(MAGIC) {
        return Ok(0);
    }
    if !bytes.starts_with(OLD_MAGIC) {
        return Err("no glibc-ld.so.cache1.1 or ld.so-1.7.0 header");
    }
    let count = u32_at(bytes, 12)? as usize;
    let end = count
        .checked_mul(OLD_ENTRY_SIZE)
        .and_then(|size| size.checked_add(OLD_HEADER_SIZE))
        .ok_or("more old entries than the file holds")?;
    // The new header is aligned as `struct cache_file_new` (8 bytes).
    end.checked_next_multiple_of(8)
        .ok_or("more old entries than the file holds")
}

fn u32_at(bytes: &[u8], offset: usize) -> Result<u32, &'static str> {
    offset
        .checked_add(4)
        .and_then(|end| bytes.get(offset..end))
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or("truncated entry")
}

fn u64_at(bytes: &[u8], offset: usize) -> Result<u64, &'static str> {
    offset
        .checked_add(8)
        .and_then(|end| bytes.get(offset..end))
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or("truncated entry")
}

/// The NUL-terminated UTF-8 string at `offset` from the new header.
fn string_at(bytes: &[u8], offset: u32) -> Result<&str, &'static str> {
    let rest = bytes
        .get(offset as usize..)
        .ok_or("a string offset past the end")?;
    let rest = &rest[..rest.len().min(MAX_STRING)];
    let end = rest
        .iter()
        .position(|b| *b == 0)
        .ok_or("an unterminated or overlong string")?;
    std::str::from_utf8(&rest[..end]).map_err(|_| "a string that is not UTF-8")
}

/// Writes a cache in the new format (tests of the parser and the search).
#[cfg(test)]
pub(crate) fn build(entries: &[(i32, &str, &str, u64)]) -> Vec<u8> {
    let mut strings = Vec::new();
    let table_end = HEADER_SIZE + entries.len() * ENTRY_SIZE;
    let mut table = Vec::new();
    for (flags, name, path, hwcap) in entries {
        let key = table_end + strings.len();
        strings.extend_from_slice(name.as_bytes());
        strings.push(0);
        let value = table_end + strings.len();
        strings.extend_from_slice(path.as_bytes());
        strings.push(0);
        table.extend_from_slice(&flags.to_le_bytes());
        table.extend_from_slice(&(key as u32).to_le_bytes());
        table.extend_from_slice(&(value as u32).to_le_bytes());
        table.extend_from_slice(&0u32.to_le_bytes());
        table.extend_from_slice(&hwcap.to_le_bytes());
    }
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&(strings.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&[LITTLE_ENDIAN, 0, 0, 0]);
    bytes.extend_from_slice(&[0; 16]);
    bytes.extend_from_slice(&table);
    bytes.extend_from_slice(&strings);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_x86_64_entry_and_prefers_the_baseline_one() {
        let bytes = build(&[
            (
                0x0003,
                "libamdhip64.so.5",
                "/usr/lib/i386/libamdhip64.so.5",
                0,
            ),
            (
                X86_64_LIBC6,
                "libamdhip64.so.5",
                "/usr/lib/glibc-hwcaps/x86-64-v3/libamdhip64.so.5",
                1 << 62,
            ),
            (X86_64_LIBC6, "libamdhip64.so.5", "/lib/libamdhip64.so.5", 0),
            (X86_64_LIBC6, "libc.so.6", "/lib/libc.so.6", 0),
        ]);
        let cache = LdCache::parse(&bytes).unwrap();
        assert_eq!(cache.entries().len(), 3);
        assert_eq!(
            cache.lookup("libamdhip64.so.5"),
            Some(Path::new("/lib/libamdhip64.so.5"))
        );
        assert_eq!(cache.lookup("libamdhip64.so.6"), None);
    }

    #[test]
    fn reads_the_new_table_after_an_old_one() {
        let new = build(&[(X86_64_LIBC6, "libz.so.1", "/lib/libz.so.1", 0)]);
        let mut bytes = OLD_MAGIC.to_vec();
        bytes.push(0);
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&[0; OLD_ENTRY_SIZE]);
        bytes.extend_from_slice(&[0; 4]); // to the 8-byte alignment
        bytes.extend_from_slice(&new);
        let cache = LdCache::parse(&bytes).unwrap();
        assert_eq!(cache.lookup("libz.so.1"), Some(Path::new("/lib/libz.so.1")));
    }

    #[test]
    fn malformed_caches_are_errors_not_panics() {
        let good = build(&[(X86_64_LIBC6, "libz.so.1", "/lib/libz.so.1", 0)]);
        // Every truncation, and every byte of the header and table set to
        // extremes, parses or fails cleanly.
        for len in 0..good.len() {
            let _ = LdCache::parse(&good[..len]);
        }
        for index in 0..HEADER_SIZE + ENTRY_SIZE {
            for value in [0x00, 0x7f, 0xff] {
                let mut bytes = good.clone();
                bytes[index] = value;
                let _ = LdCache::parse(&bytes);
            }
        }
        assert!(LdCache::parse(b"").is_err());
        assert!(LdCache::parse(b"ld.so-1.7.0\0\xff\xff\xff\xff").is_err());
        let mut count = good.clone();
        count[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(LdCache::parse(&count).is_err());
        let mut big = good;
        big[28] = 3;
        assert_eq!(
            LdCache::parse(&big).unwrap_err(),
            "not a little-endian cache"
        );
    }
}

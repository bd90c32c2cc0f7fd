//! Clang offload bundles:
//!
//! ```text
//! 0   24  "__CLANG_OFFLOAD_BUNDLE__"
//! 24  8   u64 entry_count
//! 32  ..  entry_count x { u64 offset; u64 size; u64 triple_len; triple }
//!         offsets are relative to the bundle's start
//! ```
//!
//! A bundle ends at the largest `offset + size` of its entries: the magic
//! can occur inside code objects, so the next bundle is never searched for.

use std::borrow::Cow;
use std::io::Write;

use rocm_kpack::Target;

use super::CodeObject;
use crate::error::BundleError;

/// The first bytes of an uncompressed offload bundle.
pub const OFFLOAD_BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";

/// Where everything of an uncompressed offload bundle goes, as clang's HIP
/// toolchain writes one: the `host` entry first (no bytes, at the first
/// boundary, as clang puts it), then the entries (triple, code object
/// size) in the order given, each code object starting `align` bytes
/// aligned from the bundle's start. Planned from sizes alone, so the code
/// objects can be written one at a time.
#[derive(Debug, Clone)]
pub struct OffloadBundleLayout {
    /// The magic and the entry table.
    header: Vec<u8>,
    /// Each entry's offset from the bundle's start and size, in order.
    entries: Vec<(u64, u64)>,
    /// The whole bundle's length.
    len: u64,
}

impl OffloadBundleLayout {
    /// Plans a bundle of the host entry and `entries`.
    pub fn plan<'a>(
        host: &str,
        entries: impl ExactSizeIterator<Item = (&'a str, u64)> + Clone,
        align: u64,
    ) -> OffloadBundleLayout {
        let header_len = OFFLOAD_BUNDLE_MAGIC.len()
            + 8
            + std::iter::once(host.len())
                .chain(entries.clone().map(|(triple, _)| triple.len()))
                .map(|len| 24 + len)
                .sum::<usize>();
        let first = (header_len as u64).div_ceil(align) * align;
        let mut placed = Vec::with_capacity(entries.len());
        let mut at = first;
        let mut len = first;
        for (_, size) in entries.clone() {
            placed.push((at, size));
            len = at + size;
            at = len.div_ceil(align) * align;
        }
        let mut header = OFFLOAD_BUNDLE_MAGIC.to_vec();
        header.extend_from_slice(&(entries.len() as u64 + 1).to_le_bytes());
        let table = std::iter::once((host, first, 0u64)).chain(
            entries
                .zip(&placed)
                .map(|((triple, _), &(offset, size))| (triple, offset, size)),
        );
        for (triple, offset, size) in table {
            header.extend_from_slice(&offset.to_le_bytes());
            header.extend_from_slice(&size.to_le_bytes());
            header.extend_from_slice(&(triple.len() as u64).to_le_bytes());
            header.extend_from_slice(triple.as_bytes());
        }
        OffloadBundleLayout {
            header,
            entries: placed,
            len,
        }
    }

    /// The bundle's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the bundle holds no bytes at all (never: it has a header).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes the bundle to `out`, taking each entry's code object from
    /// `code` (by entry index) when its turn comes; each must be as long
    /// as planned.
    pub fn write<W: Write + ?Sized, E: From<std::io::Error>>(
        &self,
        out: &mut W,
        mut code: impl FnMut(usize, &mut dyn FnMut(&[u8]) -> std::io::Result<()>) -> Result<(), E>,
    ) -> Result<(), E> {
        out.write_all(&self.header)?;
        let mut at = self.header.len() as u64;
        for (index, &(offset, size)) in self.entries.iter().enumerate() {
            write_zeros(out, offset - at)?;
            let mut written = 0;
            code(index, &mut |bytes| {
                written += bytes.len() as u64;
                out.write_all(bytes)
            })?;
            if written != size {
                let message = format!("code object {index} has {written} bytes, not {size}");
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, message).into());
            }
            at = offset + size;
        }
        write_zeros(out, self.len - at)?;
        Ok(())
    }
}

/// Writes `count` zero bytes.
pub(crate) fn write_zeros<W: Write + ?Sized>(out: &mut W, mut count: u64) -> std::io::Result<()> {
    const ZEROS: [u8; 4096] = [0; 4096];
    while count > 0 {
        let n = count.min(ZEROS.len() as u64) as usize;
        out.write_all(&ZEROS[..n])?;
        count -= n as u64;
    }
    Ok(())
}

/// One entry of the bundle header.
#[derive(Debug)]
struct Entry<'a> {
    offset: u64,
    size: u64,
    triple: &'a [u8],
}

/// Reads the header; returns the entries and the bundle's length.
fn entries(bytes: &[u8], offset: usize) -> Result<(Vec<Entry<'_>>, usize), BundleError> {
    let truncated = || BundleError::TruncatedHeader { offset };
    let u64_at = |at: usize| -> Result<u64, BundleError> {
        let field = bytes.get(at..at + 8).ok_or_else(truncated)?;
        Ok(u64::from_le_bytes(
            field.try_into().map_err(|_| truncated())?,
        ))
    };
    let count = u64_at(OFFLOAD_BUNDLE_MAGIC.len())?;
    let mut at = OFFLOAD_BUNDLE_MAGIC.len() + 8;
    // Each entry needs at least 24 header bytes.
    if count > (bytes.len() / 24) as u64 {
        return Err(truncated());
    }
    let mut entries = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let (entry_offset, size, triple_len) = (u64_at(at)?, u64_at(at + 8)?, u64_at(at + 16)?);
        at += 24;
        let triple_end = usize::try_from(triple_len)
            .ok()
            .and_then(|len| at.checked_add(len))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(truncated)?;
        entries.push(Entry {
            offset: entry_offset,
            size,
            triple: &bytes[at..triple_end],
        });
        at = triple_end;
    }
    let header_end = at;
    let mut end = header_end;
    for (index, entry) in entries.iter().enumerate() {
        let entry_end = entry.offset.checked_add(entry.size);
        match entry_end {
            Some(e)
                if e <= bytes.len() as u64
                    && (entry.size == 0 || entry.offset >= header_end as u64) =>
            {
                end = end.max(e as usize)
            }
            _ => {
                return Err(BundleError::EntryOutOfRange {
                    offset,
                    entry: index,
                    start: entry.offset,
                    end: entry_end.unwrap_or(u64::MAX),
                    limit: bytes.len(),
                })
            }
        }
    }
    Ok((entries, end))
}

/// Turns an entry into a code object; `None` for host entries.
fn code_object<'a>(
    bytes: Cow<'a, [u8]>,
    entry: &Entry<'_>,
    index: usize,
    offset: usize,
) -> Result<Option<CodeObject<'a>>, BundleError> {
    let triple = std::str::from_utf8(entry.triple).map_err(|_| BundleError::TripleNotUtf8 {
        offset,
        entry: index,
    })?;
    if triple.starts_with("host-") {
        return Ok(None);
    }
    let target = Target::from_bundle_triple(triple).map_err(|source| BundleError::BadTarget {
        offset,
        entry: index,
        source,
    })?;
    Ok(Some(CodeObject {
        triple: triple.to_owned(),
        target,
        bytes,
    }))
}

/// Parses the bundle at the start of `bytes` (located at `offset` in its
/// section), borrowing code objects; returns them and the bundle length.
pub(super) fn parse_borrowed(
    bytes: &[u8],
    offset: usize,
) -> Result<(Vec<CodeObject<'_>>, usize), BundleError> {
    let (entries, len) = entries(bytes, offset)?;
    let mut code_objects = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let range = entry.offset as usize..(entry.offset + entry.size) as usize;
        if let Some(code_object) = code_object(Cow::Borrowed(&bytes[range]), entry, index, offset)?
        {
            code_objects.push(code_object);
        }
    }
    Ok((code_objects, len))
}

/// Parses the one or more bundles a compressed bundle decompressed to,
/// copying their code objects out.
pub(super) fn parse_all_owned(
    bytes: &[u8],
    offset: usize,
) -> Result<Vec<CodeObject<'static>>, BundleError> {
    let mut code_objects = Vec::new();
    let mut at = 0;
    while let Some(skip) = bytes[at..].iter().position(|&b| b != 0) {
        at += skip;
        if !bytes[at..].starts_with(OFFLOAD_BUNDLE_MAGIC) {
            return Err(BundleError::UnknownData {
                offset,
                found: bytes[at..].iter().take(8).copied().collect(),
            });
        }
        let (entries, len) = entries(&bytes[at..], offset)?;
        for (index, entry) in entries.iter().enumerate() {
            let start = at + entry.offset as usize;
            let data = bytes[start..start + entry.size as usize].to_vec();
            if let Some(code_object) = code_object(Cow::Owned(data), entry, index, offset)? {
                code_objects.push(code_object);
            }
        }
        at += len;
    }
    Ok(code_objects)
}

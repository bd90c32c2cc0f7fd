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

use rocm_kpack::Target;

use super::CodeObject;
use crate::error::BundleError;

/// The first bytes of an uncompressed offload bundle.
pub const OFFLOAD_BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";

/// An uncompressed offload bundle as clang's HIP toolchain writes one:
/// the `host` entry first (no bytes, at the first boundary, as clang puts
/// it), then `entries` (triple, code object) in the order given, each code
/// object starting `align` bytes aligned from the bundle's start.
pub fn write_offload_bundle(host: &str, entries: &[(String, &[u8])], align: u64) -> Vec<u8> {
    let header_len = OFFLOAD_BUNDLE_MAGIC.len()
        + 8
        + std::iter::once(host.len())
            .chain(entries.iter().map(|(triple, _)| triple.len()))
            .map(|len| 24 + len)
            .sum::<usize>();
    let first = (header_len as u64).div_ceil(align) * align;
    let mut offsets = Vec::with_capacity(entries.len());
    let mut at = first;
    for (_, bytes) in entries {
        offsets.push(at);
        at = (at + bytes.len() as u64).div_ceil(align) * align;
    }
    let mut out = OFFLOAD_BUNDLE_MAGIC.to_vec();
    out.extend_from_slice(&(entries.len() as u64 + 1).to_le_bytes());
    let header = std::iter::once((host, first, 0u64)).chain(
        entries
            .iter()
            .zip(&offsets)
            .map(|((triple, bytes), &offset)| (triple.as_str(), offset, bytes.len() as u64)),
    );
    for (triple, offset, size) in header {
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(triple.len() as u64).to_le_bytes());
        out.extend_from_slice(triple.as_bytes());
    }
    for ((_, bytes), &offset) in entries.iter().zip(&offsets) {
        out.resize(offset as usize, 0);
        out.extend_from_slice(bytes);
    }
    if entries.is_empty() {
        out.resize(first as usize, 0);
    }
    out
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

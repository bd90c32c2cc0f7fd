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

use std::io::{Read, Write};

use kpack_gpu::Target;
use object::pod::{bytes_of, bytes_of_mut};
use object::{LittleEndian, Pod, U64};

use super::CodeObjectInfo;
use crate::error::BundleError;
use crate::stream::write_zeros;

/// The first bytes of an uncompressed offload bundle.
pub const OFFLOAD_BUNDLE_MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";

/// The fixed start of an offload bundle: the magic and how many entries
/// follow it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct OffloadBundleHeader {
    pub magic: [u8; 24],
    pub entry_count: U64<LittleEndian>,
}

// SAFETY: a byte array and a field of bytes, no padding, any bit pattern
// valid.
unsafe impl Pod for OffloadBundleHeader {}

impl OffloadBundleHeader {
    /// The header of a bundle of `entry_count` entries.
    pub fn new(entry_count: u64) -> OffloadBundleHeader {
        OffloadBundleHeader {
            magic: *OFFLOAD_BUNDLE_MAGIC,
            entry_count: U64::new(LittleEndian, entry_count),
        }
    }
}

/// One entry's header; the entry's triple, `triple_len` bytes, follows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct OffloadEntryHeader {
    /// Where the entry's code object starts, from the bundle's start.
    pub offset: U64<LittleEndian>,
    pub size: U64<LittleEndian>,
    pub triple_len: U64<LittleEndian>,
}

// SAFETY: three fields of byte arrays, no padding, any bit pattern valid.
unsafe impl Pod for OffloadEntryHeader {}

impl OffloadEntryHeader {
    /// The header of an entry of `size` bytes at `offset` whose triple has
    /// `triple_len` bytes.
    pub fn new(offset: u64, size: u64, triple_len: u64) -> OffloadEntryHeader {
        OffloadEntryHeader {
            offset: U64::new(LittleEndian, offset),
            size: U64::new(LittleEndian, size),
            triple_len: U64::new(LittleEndian, triple_len),
        }
    }
}

/// Size of [`OffloadBundleHeader`].
const BUNDLE_HEADER_SIZE: u64 = std::mem::size_of::<OffloadBundleHeader>() as u64;
/// Size of [`OffloadEntryHeader`].
const ENTRY_HEADER_SIZE: u64 = std::mem::size_of::<OffloadEntryHeader>() as u64;

// The sizes 03-packer.md gives.
const _: () = assert!(BUNDLE_HEADER_SIZE == 32 && ENTRY_HEADER_SIZE == 24);

/// Bytes a bundle's header takes, the fixed start and every entry's header
/// and triple, for entries with these triples.
pub(super) fn header_len<'a>(triples: impl Iterator<Item = &'a str>) -> u64 {
    BUNDLE_HEADER_SIZE
        + triples
            .map(|triple| ENTRY_HEADER_SIZE + triple.len() as u64)
            .sum::<u64>()
}

/// A bundle's header for entries `(triple, offset, size)`, in order: the
/// fixed start, then each entry's header and triple.
pub(super) fn encode_header(entries: &[(&str, u64, u64)]) -> Vec<u8> {
    let triples = entries.iter().map(|&(triple, _, _)| triple);
    let mut header = Vec::with_capacity(header_len(triples) as usize);
    header.extend_from_slice(bytes_of(&OffloadBundleHeader::new(entries.len() as u64)));
    for &(triple, offset, size) in entries {
        let entry = OffloadEntryHeader::new(offset, size, triple.len() as u64);
        header.extend_from_slice(bytes_of(&entry));
        header.extend_from_slice(triple.as_bytes());
    }
    header
}

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
        let header_len =
            header_len(std::iter::once(host).chain(entries.clone().map(|(triple, _)| triple)));
        let first = header_len.div_ceil(align) * align;
        let mut placed = Vec::with_capacity(entries.len());
        let mut at = first;
        let mut len = first;
        for (_, size) in entries.clone() {
            placed.push((at, size));
            len = at + size;
            at = len.div_ceil(align) * align;
        }
        let table: Vec<(&str, u64, u64)> = std::iter::once((host, first, 0u64))
            .chain(
                entries
                    .zip(&placed)
                    .map(|((triple, _), &(offset, size))| (triple, offset, size)),
            )
            .collect();
        OffloadBundleLayout {
            header: encode_header(&table),
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

/// The most bytes a triple may have: real ones have a few dozen; a header
/// claiming more is not read into memory.
const MAX_TRIPLE: u64 = 4096;

/// Reads the header of the bundle at the start of `reader` (at `offset` in
/// the section), whose data may span `limit` bytes; returns its device
/// code objects (offsets relative to the bundle's start, host entries
/// left out) and the bundle's length: the largest end of its entries.
pub(super) fn read_header(
    reader: &mut dyn Read,
    offset: usize,
    limit: u64,
) -> Result<(Vec<CodeObjectInfo>, u64), BundleError> {
    let truncated = |error: std::io::Error| match error.kind() {
        std::io::ErrorKind::UnexpectedEof => BundleError::TruncatedHeader { offset },
        _ => super::ccob::bundle_error(error, offset),
    };
    // The magic is checked before the count is read, so data that is not
    // a bundle is told apart from a truncated one.
    let mut header = OffloadBundleHeader::default();
    reader.read_exact(&mut header.magic).map_err(truncated)?;
    if header.magic != *OFFLOAD_BUNDLE_MAGIC {
        return Err(BundleError::UnknownData {
            offset,
            found: header.magic[..8].to_vec(),
        });
    }
    reader
        .read_exact(bytes_of_mut(&mut header.entry_count))
        .map_err(truncated)?;
    let count = header.entry_count.get(LittleEndian);
    // Each entry needs at least its header's bytes.
    if count > limit / ENTRY_HEADER_SIZE {
        return Err(BundleError::TruncatedHeader { offset });
    }
    let mut header_end = BUNDLE_HEADER_SIZE;
    let mut raw = Vec::with_capacity(count as usize);
    for index in 0..count as usize {
        let mut entry = OffloadEntryHeader::default();
        reader
            .read_exact(bytes_of_mut(&mut entry))
            .map_err(truncated)?;
        let (entry_offset, size, triple_len) = (
            entry.offset.get(LittleEndian),
            entry.size.get(LittleEndian),
            entry.triple_len.get(LittleEndian),
        );
        if triple_len > MAX_TRIPLE || header_end + ENTRY_HEADER_SIZE + triple_len > limit {
            return Err(BundleError::TruncatedHeader { offset });
        }
        let mut triple = vec![0u8; triple_len as usize];
        reader.read_exact(&mut triple).map_err(truncated)?;
        header_end += ENTRY_HEADER_SIZE + triple_len;
        raw.push((index, entry_offset, size, triple));
    }
    let mut end = header_end;
    let mut code_objects = Vec::with_capacity(raw.len());
    for (index, entry_offset, size, triple) in raw {
        let entry_end = entry_offset.checked_add(size);
        match entry_end {
            Some(e) if e <= limit && (size == 0 || entry_offset >= header_end) => {
                end = end.max(e);
            }
            _ => {
                return Err(BundleError::EntryOutOfRange {
                    offset,
                    entry: index,
                    start: entry_offset,
                    end: entry_end.unwrap_or(u64::MAX),
                    limit: usize::try_from(limit).unwrap_or(usize::MAX),
                })
            }
        }
        if let Some(info) = code_object(&triple, entry_offset, size, index, offset)? {
            code_objects.push(info);
        }
    }
    Ok((code_objects, end))
}

/// Describes an entry; `None` for host entries.
fn code_object(
    triple: &[u8],
    entry_offset: u64,
    size: u64,
    index: usize,
    offset: usize,
) -> Result<Option<CodeObjectInfo>, BundleError> {
    let triple = std::str::from_utf8(triple).map_err(|_| BundleError::TripleNotUtf8 {
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
    Ok(Some(CodeObjectInfo {
        triple: triple.to_owned(),
        target,
        offset: entry_offset,
        size,
    }))
}

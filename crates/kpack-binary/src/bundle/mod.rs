//! Offload bundles in a `.hip_fatbin` section: one per translation unit,
//! back to back with zero padding between them, each either a clang
//! offload bundle or a compressed bundle (CCOB) holding one.

#[cfg(feature = "test-fixtures")]
pub mod build;
mod ccob;
mod compress;
mod offload;

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::{BufRead, Read};

use kpack_gpu::Target;
use kpack_hash::CountingReader;

use crate::error::BundleError;

pub use ccob::bundle_error as decode_error;
pub use ccob::{
    ccob_hash, CcobHeader, CcobHeaderV1, CcobHeaderV2, CcobHeaderV3, CcobMethod, CcobPrefix,
};
pub use compress::{write_ccob, CLANG_ZSTD_LEVEL};
pub use offload::{
    OffloadBundleHeader, OffloadBundleLayout, OffloadEntryHeader, OFFLOAD_BUNDLE_MAGIC,
};

/// One device code object out of a bundle.
#[derive(Debug, Clone)]
pub struct CodeObject<'a> {
    /// The bundle entry's triple (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`).
    pub triple: String,
    /// The target it was compiled for.
    pub target: Target,
    /// Its bytes: borrowed from the section, or owned when decompressed.
    pub bytes: Cow<'a, [u8]>,
}

/// Where one device code object of a bundle is, read from the bundle's
/// header without reading the code object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeObjectInfo {
    /// The bundle entry's triple (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`).
    pub triple: String,
    /// The target it was compiled for.
    pub target: Target,
    /// Its offset in the bundle (in what a compressed bundle decompresses
    /// to, which may hold several bundles back to back).
    pub offset: u64,
    pub size: u64,
}

/// How a bundle is stored in the section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleKind {
    /// A clang offload bundle.
    Uncompressed,
    /// A compressed bundle (`CCOB`) of this header version and method.
    Compressed { version: u16, method: CcobMethod },
}

/// One bundle of a `.hip_fatbin` section, parsed from its header alone: a
/// compressed bundle is decompressed only as far as the headers of the
/// bundles it holds, its code objects read later, one stream at a time
/// ([`Bundle::for_each_code_object`]).
#[derive(Debug, Clone)]
pub struct Bundle<'a> {
    /// Offset of the bundle's first byte in the section; wrappers point here.
    pub offset: usize,
    /// Bytes the bundle occupies in the section (padding excluded).
    pub len: usize,
    pub kind: BundleKind,
    /// Its device code objects, host entries left out, in entry order.
    pub entries: Vec<CodeObjectInfo>,
    /// The bundle's bytes in the section.
    bytes: &'a [u8],
}

/// A code object's bytes as [`Bundle::for_each_code_object`] hands them
/// out: in place in the section, or a stream of exactly its size.
pub enum CodeBytes<'r, 'a> {
    Slice(&'a [u8]),
    Reader(&'r mut dyn Read),
}

impl std::fmt::Debug for CodeBytes<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CodeBytes::Slice(slice) => write!(f, "Slice({} bytes)", slice.len()),
            CodeBytes::Reader(_) => f.write_str("Reader"),
        }
    }
}

impl<'a> Bundle<'a> {
    /// The bundle's bytes in the section.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The code object `info` (one of [`Bundle::entries`]) of an
    /// uncompressed bundle, in place; `None` for a compressed one.
    pub fn slice(&self, info: &CodeObjectInfo) -> Option<&'a [u8]> {
        match self.kind {
            BundleKind::Uncompressed => {
                let start = usize::try_from(info.offset).ok()?;
                self.bytes
                    .get(start..start.checked_add(usize::try_from(info.size).ok()?)?)
            }
            BundleKind::Compressed { .. } => None,
        }
    }

    /// Calls `each` with every code object in entry order. A compressed
    /// bundle is decompressed once, as a stream, each code object handed
    /// out as a reader of exactly its bytes; its size and hash are checked
    /// at the end, so an error may come after every `each` call.
    pub fn for_each_code_object<E: From<BundleError>>(
        &self,
        mut each: impl FnMut(&CodeObjectInfo, CodeBytes<'_, 'a>) -> Result<(), E>,
    ) -> Result<(), E> {
        if let BundleKind::Uncompressed = self.kind {
            for info in &self.entries {
                let slice = self.slice(info).ok_or(BundleError::EntryOutOfRange {
                    offset: self.offset,
                    entry: 0,
                    start: info.offset,
                    end: info.offset.saturating_add(info.size),
                    limit: self.bytes.len(),
                })?;
                each(info, CodeBytes::Slice(slice))?;
            }
            return Ok(());
        }
        let located = ccob::Located::find(self.bytes, self.offset)?;
        let mut decoded = located.decode(self.offset)?;
        // Refused when parsed; checked again so no bundle is read whole.
        check_stream_order(&self.entries, self.offset)?;
        for info in &self.entries {
            let gap = info.offset - decoded.position();
            skip(&mut decoded, gap, self.offset)?;
            let mut code = (&mut decoded).take(info.size);
            each(info, CodeBytes::Reader(&mut code))?;
            // Whatever `each` left unread.
            std::io::copy(&mut code, &mut std::io::sink())
                .map_err(|e| ccob::bundle_error(e, self.offset))?;
        }
        decoded.finish()?;
        Ok(())
    }

    /// Writes the plain offload bundle into `out`: the bytes of an
    /// uncompressed one, the decompressed (and checked) payload of a
    /// compressed one, as a stream.
    pub fn write_plain(&self, out: &mut dyn std::io::Write) -> Result<u64, BundleError> {
        let io_error = |e| ccob::bundle_error(e, self.offset);
        if let BundleKind::Uncompressed = self.kind {
            out.write_all(self.bytes).map_err(io_error)?;
            return Ok(self.bytes.len() as u64);
        }
        let located = ccob::Located::find(self.bytes, self.offset)?;
        let mut decoded = located.decode(self.offset)?;
        let written = std::io::copy(&mut decoded, out).map_err(io_error)?;
        decoded.finish()?;
        Ok(written)
    }

    /// Every code object, read whole (a compressed bundle decompressed and
    /// checked): for small bundles, tests and inspection.
    pub fn code_objects(&self) -> Result<Vec<CodeObject<'a>>, BundleError> {
        let mut code_objects = Vec::with_capacity(self.entries.len());
        self.for_each_code_object(|info, bytes| {
            let bytes = match bytes {
                CodeBytes::Slice(slice) => Cow::Borrowed(slice),
                CodeBytes::Reader(reader) => {
                    let mut owned = Vec::new();
                    reader
                        .read_to_end(&mut owned)
                        .map_err(|e| ccob::bundle_error(e, self.offset))?;
                    Cow::Owned(owned)
                }
            };
            code_objects.push(CodeObject {
                triple: info.triple.clone(),
                target: info.target.clone(),
                bytes,
            });
            Ok::<(), BundleError>(())
        })?;
        Ok(code_objects)
    }
}

/// Checks that the code objects of a compressed bundle lie one after
/// another in entry order, so one pass over its stream reads them all and
/// none is held whole. Clang never writes them otherwise.
fn check_stream_order(entries: &[CodeObjectInfo], offset: usize) -> Result<(), BundleError> {
    let mut at = 0;
    for (entry, info) in entries.iter().enumerate() {
        if info.offset < at {
            return Err(BundleError::CcobEntriesOutOfOrder {
                offset,
                entry,
                start: info.offset,
                previous_end: at,
            });
        }
        at = info.offset.saturating_add(info.size);
    }
    Ok(())
}

/// Reads and drops `count` bytes.
fn skip(reader: &mut dyn Read, count: u64, offset: usize) -> Result<(), BundleError> {
    let skipped = std::io::copy(&mut reader.take(count), &mut std::io::sink())
        .map_err(|e| ccob::bundle_error(e, offset))?;
    if skipped != count {
        return Err(BundleError::CcobDecompress {
            offset,
            reason: "ends before its code objects do".into(),
        });
    }
    Ok(())
}

/// Splits a `.hip_fatbin` section into its bundles, in section order (the
/// order that numbers them for `#N` TOC keys), reading their headers only.
pub fn parse_fatbin(section: &[u8]) -> Result<Vec<Bundle<'_>>, BundleError> {
    let mut bundles = Vec::new();
    let mut at = 0;
    // Zero padding aligns each bundle; it is not part of either.
    while let Some(skip) = section[at..].iter().position(|&b| b != 0) {
        at += skip;
        let rest = &section[at..];
        let bundle = if rest.starts_with(OFFLOAD_BUNDLE_MAGIC) {
            let (entries, len) = offload::read_header(&mut &rest[..], at, rest.len() as u64)?;
            let len = len as usize;
            Bundle {
                offset: at,
                len,
                kind: BundleKind::Uncompressed,
                entries,
                bytes: &rest[..len],
            }
        } else if rest.starts_with(ccob::CCOB_MAGIC) {
            let located = ccob::Located::find(rest, at)?;
            let entries = inner_entries(&located, at)?;
            check_stream_order(&entries, at)?;
            Bundle {
                offset: at,
                len: located.len(),
                kind: BundleKind::Compressed {
                    version: located.header.version,
                    method: located.header.method,
                },
                entries,
                bytes: &rest[..located.len()],
            }
        } else {
            return Err(BundleError::UnknownData {
                offset: at,
                found: rest.iter().take(8).copied().collect(),
            });
        };
        check_unique_targets(&bundle)?;
        at += bundle.len;
        bundles.push(bundle);
    }
    Ok(bundles)
}

/// The code objects of the bundles a compressed bundle holds, from their
/// headers: decompressed only as far as the last header, which for the
/// usual single bundle is its first few kilobytes.
fn inner_entries(
    located: &ccob::Located<'_>,
    offset: usize,
) -> Result<Vec<CodeObjectInfo>, BundleError> {
    let total = located.header.uncompressed_size;
    let mut reader = std::io::BufReader::new(located.decode(offset)?);
    let mut entries = Vec::new();
    let mut at = 0u64;
    loop {
        // Zero padding between bundles.
        let zeros = skip_zeros(&mut reader, offset)?;
        at += zeros;
        if at >= total
            || reader
                .fill_buf()
                .map_err(|e| ccob::bundle_error(e, offset))?
                .is_empty()
        {
            break;
        }
        let mut counted = CountingReader::new(&mut reader);
        let (found, len) = offload::read_header(&mut counted, offset, total - at)?;
        let header_len = counted.count();
        entries.extend(found.into_iter().map(|info| CodeObjectInfo {
            offset: at + info.offset,
            ..info
        }));
        if at + len >= total {
            break;
        }
        skip(&mut reader, len - header_len, offset)?;
        at += len;
    }
    Ok(entries)
}

/// Reads past zero bytes; returns how many.
fn skip_zeros(reader: &mut impl BufRead, offset: usize) -> Result<u64, BundleError> {
    let mut count = 0u64;
    loop {
        let buffer = reader
            .fill_buf()
            .map_err(|e| ccob::bundle_error(e, offset))?;
        let zeros = buffer.iter().take_while(|&&b| b == 0).count();
        let end = zeros < buffer.len() || buffer.is_empty();
        reader.consume(zeros);
        count += zeros as u64;
        if end {
            return Ok(count);
        }
    }
}

/// A wrapper selects a bundle and the runtime a target within it, so one
/// bundle cannot hold two code objects for the same target. Checked with a
/// set: one look per entry, however many a bundle has.
fn check_unique_targets(bundle: &Bundle<'_>) -> Result<(), BundleError> {
    let mut seen = HashSet::with_capacity(bundle.entries.len());
    match bundle.entries.iter().find(|c| !seen.insert(&c.target)) {
        Some(code_object) => Err(BundleError::DuplicateTarget {
            offset: bundle.offset,
            target: code_object.target.to_string(),
        }),
        None => Ok(()),
    }
}

/// Index of the bundle starting at `offset` in the section, found by
/// binary search: `bundles` are in section order, so their offsets rise.
pub fn bundle_starting_at(bundles: &[Bundle<'_>], offset: u64) -> Option<usize> {
    bundles
        .binary_search_by_key(&offset, |b| b.offset as u64)
        .ok()
}

/// Where the bundles start, for a message about a wrapper that points
/// elsewhere: the first few, and how many more (a section may hold
/// hundreds of thousands).
pub fn describe_starts(bundles: &[Bundle<'_>], base: u64) -> String {
    const SHOWN: usize = 8;
    let mut text = bundles
        .iter()
        .take(SHOWN)
        .map(|b| format!("{:#x}", base + b.offset as u64))
        .collect::<Vec<_>>()
        .join(", ");
    if bundles.len() > SHOWN {
        text.push_str(&format!(" and {} more", bundles.len() - SHOWN));
    }
    text
}

#[cfg(test)]
pub(crate) mod tests;

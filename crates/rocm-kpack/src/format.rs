//! The on-disk layout of a kpack archive (version 1), defined once for the
//! reader and the writer.
//!
//! ```text
//! 0           "KPAK"
//! 4           u32 version (1)
//! 8           u64 toc_offset
//! 16          48 zero bytes
//! 64          blob region (layout depends on the compression scheme)
//! toc_offset  one MessagePack map, up to the end of the file
//! ```
//!
//! The blob region of scheme `zstd-per-kernel`:
//!
//! ```text
//! u32 frame_count
//! frame_count times: u32 frame_size, then frame_size bytes (one zstd frame)
//! ```
//!
//! Each record is a `#[repr(C)]` struct of little-endian fields held as
//! bytes ([`U32Le`], [`U64Le`]), so its size is its size on disk; its
//! `to_bytes` and `from_bytes` are the only places it meets raw bytes.

use std::fmt;

/// The four bytes every archive starts with.
pub const MAGIC: [u8; 4] = *b"KPAK";
/// The only header version this crate reads and writes.
pub const VERSION: u32 = 1;
/// Size of the fixed header; the blob region starts right after it.
pub const HEADER_SIZE: usize = 64;
/// Bytes a reader needs to see magic, version and `toc_offset`: a
/// [`RawHeader`].
pub const MIN_HEADER_BYTES: usize = std::mem::size_of::<RawHeader>();
/// Absolute offset of the blob region.
pub const BLOB_REGION_OFFSET: u64 = HEADER_SIZE as u64;
/// The `format_version` value stored in the TOC.
pub const TOC_FORMAT_VERSION: u64 = 1;
/// The only entry `type` defined: an AMDGPU code object.
pub const ENTRY_TYPE_HSACO: &str = "hsaco";
/// zstd level the reference tooling uses.
pub const DEFAULT_ZSTD_LEVEL: i32 = 3;

/// The directory holding the archives: beside a split binary, at a split
/// tree's or an install prefix's root, in a wheel's top-level package.
pub const KPACK_DIR: &str = ".kpack";
/// The extension of an archive's file name (`<group>_<target>.kpack`).
pub const ARCHIVE_EXTENSION: &str = "kpack";
/// The section of a split ELF file holding its marker, which its `HIPK`
/// wrappers point at.
pub const ELF_MARKER_SECTION: &str = ".rocm_kpack_ref";
/// The section of a split PE image holding its marker (section names in
/// an image are 8 bytes at most).
pub const PE_MARKER_SECTION: &str = ".kpackrf";

/// The most distinct targets an archive may name, in `gfx_arches` or as
/// TOC target keys: far more than every GPU target and feature variant
/// there is, few enough that no archive makes a reader do quadratic work.
pub const MAX_TARGETS: usize = 4096;

/// TOC keys, in the order the writer emits them.
pub mod key {
    pub const FORMAT_VERSION: &str = "format_version";
    pub const GROUP_NAME: &str = "group_name";
    pub const GFX_ARCH_FAMILY: &str = "gfx_arch_family";
    pub const GFX_ARCHES: &str = "gfx_arches";
    pub const TOC: &str = "toc";
    pub const COMPRESSION_SCHEME: &str = "compression_scheme";
    pub const BLOBS: &str = "blobs";
    pub const ZSTD_OFFSET: &str = "zstd_offset";
    pub const ZSTD_SIZE: &str = "zstd_size";
    // Entry keys.
    pub const TYPE: &str = "type";
    pub const ORDINAL: &str = "ordinal";
    pub const ORIGINAL_SIZE: &str = "original_size";
    pub const METADATA: &str = "metadata";
    // Blob keys (scheme `none`).
    pub const OFFSET: &str = "offset";
    pub const SIZE: &str = "size";
    // Entry metadata keys written by the reference tooling.
    pub const META_TARGET: &str = "target";
    pub const META_SOURCE_PREFIX: &str = "source_prefix";
    // Entry metadata keys of kernel database files stored in an archive:
    // the library the file belongs to and its path relative to the
    // install root.
    pub const META_LIBRARY: &str = "library";
    pub const META_PATH: &str = "path";
}

/// An entry's optional `metadata` map as this crate writes and reads it:
/// string keys and string values, in order. Readers ignore keys they do not
/// know, so new keys extend the format without breaking anyone; values of
/// other types, which other writers may store, are skipped when reading.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata {
    fields: Vec<(String, String)>,
}

impl Metadata {
    /// An empty map.
    pub fn new() -> Metadata {
        Metadata::default()
    }

    /// The map with `key` set to `value` (replacing an earlier value, so a
    /// key is never written twice).
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Metadata {
        let (key, value) = (key.into(), value.into());
        match self.fields.iter_mut().find(|(k, _)| *k == key) {
            Some((_, slot)) => *slot = value,
            None => self.fields.push((key, value)),
        }
        self
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The fields in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.fields.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there are no fields.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// How the blob region stores code objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// Code objects back to back, located by the TOC's `blobs` array.
    None,
    /// `u32 frame_count`, then per code object `u32 size` and one zstd frame.
    ZstdPerKernel,
}

impl Scheme {
    /// The `compression_scheme` string stored in the TOC.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::None => "none",
            Scheme::ZstdPerKernel => "zstd-per-kernel",
        }
    }

    /// Parses a `compression_scheme` string; unknown schemes are `None`.
    pub fn from_name(name: &str) -> Option<Scheme> {
        match name {
            "none" => Some(Scheme::None),
            "zstd-per-kernel" => Some(Scheme::ZstdPerKernel),
            _ => None,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A little-endian `u32` as the archive stores it: the one place such
/// fields are turned into bytes and back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct U32Le([u8; 4]);

impl U32Le {
    pub const fn new(value: u32) -> U32Le {
        U32Le(value.to_le_bytes())
    }

    pub const fn get(self) -> u32 {
        u32::from_le_bytes(self.0)
    }
}

/// A little-endian `u64` as the archive stores it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct U64Le([u8; 8]);

impl U64Le {
    pub const fn new(value: u64) -> U64Le {
        U64Le(value.to_le_bytes())
    }

    pub const fn get(self) -> u64 {
        u64::from_le_bytes(self.0)
    }
}

/// The header fields a reader needs, the first [`MIN_HEADER_BYTES`] of the
/// fixed header; zero bytes pad it to [`HEADER_SIZE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct RawHeader {
    pub magic: [u8; 4],
    pub version: U32Le,
    pub toc_offset: U64Le,
}

impl RawHeader {
    /// The header of this crate's version for a TOC at `toc_offset`.
    pub fn new(toc_offset: u64) -> RawHeader {
        RawHeader {
            magic: MAGIC,
            version: U32Le::new(VERSION),
            toc_offset: U64Le::new(toc_offset),
        }
    }

    /// The record's bytes, its fields in order.
    pub fn to_bytes(self) -> [u8; MIN_HEADER_BYTES] {
        let fields = self
            .magic
            .into_iter()
            .chain(self.version.0)
            .chain(self.toc_offset.0);
        let mut bytes = [0; MIN_HEADER_BYTES];
        for (byte, field) in bytes.iter_mut().zip(fields) {
            *byte = field;
        }
        bytes
    }

    /// The record at the start of `bytes`, without any validation; `None`
    /// when they are fewer.
    pub fn from_bytes(bytes: &[u8]) -> Option<RawHeader> {
        let (magic, rest) = bytes.split_first_chunk()?;
        let (version, rest) = rest.split_first_chunk()?;
        let (toc_offset, _) = rest.split_first_chunk()?;
        Some(RawHeader {
            magic: *magic,
            version: U32Le(*version),
            toc_offset: U64Le(*toc_offset),
        })
    }
}

/// The fixed header of an archive whose TOC starts at `toc_offset`: its
/// fields, then zero bytes.
pub fn encode_header(toc_offset: u64) -> [u8; HEADER_SIZE] {
    let mut header = [0u8; HEADER_SIZE];
    for (byte, field) in header.iter_mut().zip(RawHeader::new(toc_offset).to_bytes()) {
        *byte = field;
    }
    header
}

/// The start of a `zstd-per-kernel` blob region: how many frames follow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct ZstdRegionHeader {
    pub frame_count: U32Le,
}

/// Size of [`ZstdRegionHeader`].
pub const ZSTD_REGION_HEADER_SIZE: u64 = std::mem::size_of::<ZstdRegionHeader>() as u64;

impl ZstdRegionHeader {
    pub fn new(frame_count: u32) -> ZstdRegionHeader {
        ZstdRegionHeader {
            frame_count: U32Le::new(frame_count),
        }
    }

    /// The record's bytes.
    pub fn to_bytes(self) -> [u8; ZSTD_REGION_HEADER_SIZE as usize] {
        self.frame_count.0
    }

    /// The record at the start of `bytes`; `None` when they are fewer.
    pub fn from_bytes(bytes: &[u8]) -> Option<ZstdRegionHeader> {
        let (frame_count, _) = bytes.split_first_chunk()?;
        Some(ZstdRegionHeader {
            frame_count: U32Le(*frame_count),
        })
    }
}

/// What comes before each zstd frame of the region: the frame's size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct FramePrefix {
    pub frame_size: U32Le,
}

/// Size of [`FramePrefix`].
pub const FRAME_PREFIX_SIZE: u64 = std::mem::size_of::<FramePrefix>() as u64;

impl FramePrefix {
    pub fn new(frame_size: u32) -> FramePrefix {
        FramePrefix {
            frame_size: U32Le::new(frame_size),
        }
    }

    /// The record's bytes.
    pub fn to_bytes(self) -> [u8; FRAME_PREFIX_SIZE as usize] {
        self.frame_size.0
    }

    /// The record at the start of `bytes`; `None` when they are fewer.
    pub fn from_bytes(bytes: &[u8]) -> Option<FramePrefix> {
        let (frame_size, _) = bytes.split_first_chunk()?;
        Some(FramePrefix {
            frame_size: U32Le(*frame_size),
        })
    }
}

// The sizes 01-archive-format.md gives.
const _: () = assert!(
    MIN_HEADER_BYTES == 16
        && MIN_HEADER_BYTES <= HEADER_SIZE
        && ZSTD_REGION_HEADER_SIZE == 4
        && FRAME_PREFIX_SIZE == 4
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let header = encode_header(570);
        let raw = RawHeader::from_bytes(&header).unwrap();
        assert_eq!(raw.magic, MAGIC);
        assert_eq!(raw.version.get(), 1);
        assert_eq!(raw.toc_offset.get(), 570);
        assert_eq!(header[..16], *b"KPAK\x01\0\0\0\x3a\x02\0\0\0\0\0\0");
        assert!(header[16..].iter().all(|&b| b == 0));
        assert_eq!(RawHeader::from_bytes(&header[..15]), None);
    }

    #[test]
    fn reference_headers_read_and_write_through_the_record_unchanged() {
        for (name, toc_offset) in [("test_noop.kpack", 570), ("test_zstd.kpack", 198)] {
            let path = kpack_test_support::fixtures().join("reference").join(name);
            let bytes = fs_err::read(path).unwrap();
            let header = RawHeader::from_bytes(&bytes).unwrap();
            assert_eq!(header, RawHeader::new(toc_offset), "{name}");
            assert_eq!(encode_header(toc_offset), bytes[..HEADER_SIZE], "{name}");
        }
    }

    #[test]
    fn zstd_framing_records_are_little_endian_u32s() {
        let header = ZstdRegionHeader::new(0x0403_0201);
        assert_eq!(header.to_bytes(), [1, 2, 3, 4]);
        assert_eq!(ZstdRegionHeader::from_bytes(&[1, 2, 3, 4, 9]), Some(header));
        assert_eq!(ZstdRegionHeader::from_bytes(&[1, 2, 3]), None);
        let prefix = FramePrefix::new(0x0807_0605);
        assert_eq!(prefix.to_bytes(), [5, 6, 7, 8]);
        assert_eq!(FramePrefix::from_bytes(&[5, 6, 7, 8]), Some(prefix));
        assert_eq!(FramePrefix::from_bytes(&[]), None);
    }

    #[test]
    fn the_reference_zstd_archive_is_framed_as_the_records_say() {
        let path = kpack_test_support::fixtures().join("reference/test_zstd.kpack");
        let bytes = fs_err::read(path).unwrap();
        let toc_offset = RawHeader::from_bytes(&bytes).unwrap().toc_offset.get();
        let region = &bytes[HEADER_SIZE..];
        let header = ZstdRegionHeader::from_bytes(region).unwrap();
        assert_eq!(header.frame_count.get(), 3);
        assert_eq!(header.to_bytes(), region[..4]);
        let mut at = HEADER_SIZE + ZSTD_REGION_HEADER_SIZE as usize;
        for _ in 0..header.frame_count.get() {
            let prefix = FramePrefix::from_bytes(&bytes[at..]).unwrap();
            assert_eq!(prefix.to_bytes(), bytes[at..at + 4]);
            at += FRAME_PREFIX_SIZE as usize;
            // A zstd frame's magic number.
            assert_eq!(bytes[at..at + 4], [0x28, 0xb5, 0x2f, 0xfd]);
            at += prefix.frame_size.get() as usize;
        }
        assert_eq!(at as u64, toc_offset);
    }

    #[test]
    fn metadata_keeps_order_and_replaces_a_key_set_twice() {
        let metadata = Metadata::new()
            .with("library", "rocblas")
            .with("path", "a")
            .with("path", "b");
        let fields: Vec<_> = metadata.iter().collect();
        assert_eq!(fields, [("library", "rocblas"), ("path", "b")]);
        assert_eq!(metadata.get("path"), Some("b"));
        assert_eq!(metadata.get("target"), None);
    }

    #[test]
    fn scheme_names_round_trip() {
        for scheme in [Scheme::None, Scheme::ZstdPerKernel] {
            assert_eq!(Scheme::from_name(scheme.name()), Some(scheme));
        }
        assert_eq!(Scheme::from_name("lz4"), None);
    }
}

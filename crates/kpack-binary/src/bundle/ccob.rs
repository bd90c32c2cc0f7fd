//! Compressed offload bundles (`CCOB`), as clang writes them:
//!
//! ```text
//! 0  4  "CCOB"
//! 4  2  u16 version (1, 2 or 3)
//! 6  2  u16 method: 0 zlib, 1 zstd
//! v1: u32 uncompressed_size, u64 hash                  (header 20 bytes)
//! v2: u32 total_size, u32 uncompressed_size, u64 hash  (header 24 bytes)
//! v3: u64 total_size, u64 uncompressed_size, u64 hash  (header 32 bytes)
//! ```
//!
//! `total_size` includes the header. Version 1 has none: its payload is one
//! compressed stream, and the bundle ends where the stream ends. `hash` is
//! the low 64 bits (first 8 bytes, little-endian) of the MD5 of the
//! uncompressed bytes.

use std::io::{Read, Write};

use md5::{Digest, Md5};
use object::pod::{bytes_of, from_bytes};
use object::{LittleEndian, Pod, U16, U32, U64};

use crate::error::BundleError;

/// The first bytes of a compressed bundle.
pub(super) const CCOB_MAGIC: &[u8; 4] = b"CCOB";

/// The payload's compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CcobMethod {
    Zlib,
    Zstd,
}

impl CcobMethod {
    /// The method a header's `method` field names; `None` for unknown ones.
    pub fn from_id(id: u16) -> Option<CcobMethod> {
        match id {
            0 => Some(CcobMethod::Zlib),
            1 => Some(CcobMethod::Zstd),
            _ => None,
        }
    }

    /// The header's `method` field for this method.
    pub fn id(self) -> u16 {
        match self {
            CcobMethod::Zlib => 0,
            CcobMethod::Zstd => 1,
        }
    }
}

/// The start every compressed bundle header shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct CcobPrefix {
    pub magic: [u8; 4],
    pub version: U16<LittleEndian>,
    pub method: U16<LittleEndian>,
}

// SAFETY: a byte array and two fields of bytes, no padding, any bit
// pattern valid.
unsafe impl Pod for CcobPrefix {}

impl CcobPrefix {
    /// The prefix of a header of `version` whose payload `method` compresses.
    pub fn new(version: u16, method: CcobMethod) -> CcobPrefix {
        CcobPrefix {
            magic: *CCOB_MAGIC,
            version: U16::new(LittleEndian, version),
            method: U16::new(LittleEndian, method.id()),
        }
    }
}

/// A version 1 header: no total size, the payload is one compressed
/// stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct CcobHeaderV1 {
    pub prefix: CcobPrefix,
    pub uncompressed_size: U32<LittleEndian>,
    pub hash: U64<LittleEndian>,
}

/// A version 2 header: 32-bit sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct CcobHeaderV2 {
    pub prefix: CcobPrefix,
    pub total_size: U32<LittleEndian>,
    pub uncompressed_size: U32<LittleEndian>,
    pub hash: U64<LittleEndian>,
}

/// A version 3 header: 64-bit sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct CcobHeaderV3 {
    pub prefix: CcobPrefix,
    pub total_size: U64<LittleEndian>,
    pub uncompressed_size: U64<LittleEndian>,
    pub hash: U64<LittleEndian>,
}

// SAFETY: the prefix and fields of byte arrays, all of alignment 1, so no
// padding; any bit pattern valid.
unsafe impl Pod for CcobHeaderV1 {}
// SAFETY: as for `CcobHeaderV1`.
unsafe impl Pod for CcobHeaderV2 {}
// SAFETY: as for `CcobHeaderV1`.
unsafe impl Pod for CcobHeaderV3 {}

// The sizes 03-packer.md gives.
const _: () = assert!(
    std::mem::size_of::<CcobPrefix>() == 8
        && std::mem::size_of::<CcobHeaderV1>() == 20
        && std::mem::size_of::<CcobHeaderV2>() == 24
        && std::mem::size_of::<CcobHeaderV3>() == 32
);

/// A parsed CCOB header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CcobHeader {
    pub version: u16,
    pub method: CcobMethod,
    /// Header plus payload, when the version records it (2 and 3).
    pub total_size: Option<u64>,
    pub uncompressed_size: u64,
    pub hash: u64,
}

impl CcobHeader {
    /// The header of a bundle of `version` whose `payload_len` bytes
    /// `method` compresses from `uncompressed_size` bytes hashing to
    /// `hash`; versions 2 and 3 record the total size.
    pub fn new(
        version: u16,
        method: CcobMethod,
        uncompressed_size: u64,
        hash: u64,
        payload_len: u64,
    ) -> CcobHeader {
        let mut header = CcobHeader {
            version,
            method,
            total_size: None,
            uncompressed_size,
            hash,
        };
        if version != 1 {
            header.total_size = Some((header.header_len() as u64).saturating_add(payload_len));
        }
        header
    }

    /// Size of the header in bytes.
    pub fn header_len(&self) -> usize {
        match self.version {
            1 => std::mem::size_of::<CcobHeaderV1>(),
            2 => std::mem::size_of::<CcobHeaderV2>(),
            _ => std::mem::size_of::<CcobHeaderV3>(),
        }
    }

    /// Parses the header at the start of `bytes` (at `offset` in the section).
    pub fn parse(bytes: &[u8], offset: usize) -> Result<CcobHeader, BundleError> {
        let truncated = || BundleError::TruncatedHeader { offset };
        let (prefix, _) = from_bytes::<CcobPrefix>(bytes).map_err(|()| truncated())?;
        let version = prefix.version.get(LittleEndian);
        let method = prefix.method.get(LittleEndian);
        let method =
            CcobMethod::from_id(method).ok_or(BundleError::UnknownCcobMethod { offset, method })?;
        let (total_size, uncompressed_size, hash) = match version {
            1 => {
                let (v1, _) = from_bytes::<CcobHeaderV1>(bytes).map_err(|()| truncated())?;
                (
                    None,
                    u64::from(v1.uncompressed_size.get(LittleEndian)),
                    v1.hash.get(LittleEndian),
                )
            }
            2 => {
                let (v2, _) = from_bytes::<CcobHeaderV2>(bytes).map_err(|()| truncated())?;
                (
                    Some(u64::from(v2.total_size.get(LittleEndian))),
                    u64::from(v2.uncompressed_size.get(LittleEndian)),
                    v2.hash.get(LittleEndian),
                )
            }
            3 => {
                let (v3, _) = from_bytes::<CcobHeaderV3>(bytes).map_err(|()| truncated())?;
                (
                    Some(v3.total_size.get(LittleEndian)),
                    v3.uncompressed_size.get(LittleEndian),
                    v3.hash.get(LittleEndian),
                )
            }
            version => return Err(BundleError::UnsupportedCcobVersion { offset, version }),
        };
        Ok(CcobHeader {
            version,
            method,
            total_size,
            uncompressed_size,
            hash,
        })
    }

    /// Writes the header as its version's record: what [`CcobHeader::parse`]
    /// reads back. An `InvalidInput` error when the version is not 1, 2 or
    /// 3, or the header does not fit it: a total size in version 1, none in
    /// 2 or 3, or a size over 32 bits in 1 or 2.
    pub fn write<W: Write + ?Sized>(&self, out: &mut W) -> std::io::Result<()> {
        let prefix = CcobPrefix::new(self.version, self.method);
        let hash = U64::new(LittleEndian, self.hash);
        let unfit = |what: &str| {
            let version = self.version;
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("a version {version} compressed bundle header cannot hold {what}"),
            )
        };
        let u32_field = |value: u64, what: &str| {
            u32::try_from(value)
                .map(|value| U32::new(LittleEndian, value))
                .map_err(|_| unfit(&format!("{what} {value}")))
        };
        let uncompressed_size = self.uncompressed_size;
        match (self.version, self.total_size) {
            (1, None) => out.write_all(bytes_of(&CcobHeaderV1 {
                prefix,
                uncompressed_size: u32_field(uncompressed_size, "uncompressed size")?,
                hash,
            })),
            (2, Some(total_size)) => out.write_all(bytes_of(&CcobHeaderV2 {
                prefix,
                total_size: u32_field(total_size, "total size")?,
                uncompressed_size: u32_field(uncompressed_size, "uncompressed size")?,
                hash,
            })),
            (3, Some(total_size)) => out.write_all(bytes_of(&CcobHeaderV3 {
                prefix,
                total_size: U64::new(LittleEndian, total_size),
                uncompressed_size: U64::new(LittleEndian, uncompressed_size),
                hash,
            })),
            (1, Some(_)) => Err(unfit("a total size")),
            (2 | 3, None) => Err(unfit("no total size")),
            (version, _) => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("compressed bundle version {version} is not supported (1, 2 and 3 are)"),
            )),
        }
    }
}

/// The low 64 bits (first 8 bytes, little-endian) of an MD5 digest, as
/// clang stores them.
pub(super) fn low_64(digest: &[u8; 16]) -> u64 {
    let mut low = [0u8; 8];
    low.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(low)
}

/// The low 64 bits of the MD5 of `data`, as clang stores them.
pub fn ccob_hash(data: &[u8]) -> u64 {
    low_64(&Md5::digest(data).into())
}

/// A compressed bundle located: its header and payload.
#[derive(Debug, Clone, Copy)]
pub(super) struct Located<'a> {
    pub header: CcobHeader,
    pub payload: &'a [u8],
}

impl<'a> Located<'a> {
    /// Finds the header and the payload of the compressed bundle at the
    /// start of `bytes` (at `offset` in the section). Versions 2 and 3 say
    /// where it ends; version 1's zstd frame is measured by its block
    /// headers, and its zlib stream by inflating it (to nowhere).
    pub fn find(bytes: &'a [u8], offset: usize) -> Result<Located<'a>, BundleError> {
        let header = CcobHeader::parse(bytes, offset)?;
        let start = header.header_len();
        let failed = |reason: String| BundleError::CcobDecompress { offset, reason };
        let rest = bytes
            .get(start..)
            .ok_or(BundleError::TruncatedHeader { offset })?;
        let payload_len = match (header.total_size, header.method) {
            (Some(total), _) => usize::try_from(total)
                .ok()
                .filter(|&end| end >= start && end <= bytes.len())
                .ok_or(BundleError::CcobTruncated {
                    offset,
                    total,
                    available: bytes.len(),
                })?
                .saturating_sub(start),
            (None, CcobMethod::Zstd) => zstd::zstd_safe::find_frame_compressed_size(rest)
                .map_err(|code| failed(zstd::zstd_safe::get_error_name(code).to_owned()))?,
            (None, CcobMethod::Zlib) => {
                let mut decoder = flate2::read::ZlibDecoder::new(rest);
                std::io::copy(
                    &mut (&mut decoder).take(header.uncompressed_size.saturating_add(1)),
                    &mut std::io::sink(),
                )
                .map_err(|e| failed(e.to_string()))?;
                usize::try_from(decoder.total_in())
                    .unwrap_or(usize::MAX)
                    .min(rest.len())
            }
        };
        Ok(Located {
            header,
            payload: &rest[..payload_len],
        })
    }

    /// The bundle's length in the section.
    pub fn len(&self) -> usize {
        self.header.header_len() + self.payload.len()
    }

    /// A reader of the decompressed bytes.
    pub fn decode(&self, offset: usize) -> Result<Decoded<'a>, BundleError> {
        let reader: Box<dyn Read + Send + 'a> = match self.header.method {
            CcobMethod::Zstd => Box::new(
                zstd::stream::read::Decoder::with_buffer(self.payload).map_err(|e| {
                    BundleError::CcobDecompress {
                        offset,
                        reason: e.to_string(),
                    }
                })?,
            ),
            CcobMethod::Zlib => Box::new(flate2::read::ZlibDecoder::new(self.payload)),
        };
        Ok(Decoded {
            reader,
            md5: Md5::new(),
            count: 0,
            header: self.header,
            offset,
        })
    }
}

/// The decompressed bytes of a compressed bundle as a stream: counted and
/// hashed as they pass, and refused past the size the header gives, so no
/// header can make the reader allocate or run on. [`Decoded::finish`]
/// checks the size and the hash once everything is read.
pub(super) struct Decoded<'a> {
    reader: Box<dyn Read + Send + 'a>,
    md5: Md5,
    count: u64,
    header: CcobHeader,
    offset: usize,
}

impl std::fmt::Debug for Decoded<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoded")
            .field("count", &self.count)
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

impl Read for Decoded<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.reader.read(buf).map_err(|e| {
            let reason = e.to_string();
            std::io::Error::other(BundleError::CcobDecompress {
                offset: self.offset,
                reason,
            })
        })?;
        self.count += n as u64;
        if self.count > self.header.uncompressed_size {
            return Err(std::io::Error::other(BundleError::CcobSize {
                offset: self.offset,
                expected: self.header.uncompressed_size,
                actual: self.count,
            }));
        }
        self.md5.update(&buf[..n]);
        Ok(n)
    }
}

impl Decoded<'_> {
    /// Bytes read so far.
    pub fn position(&self) -> u64 {
        self.count
    }

    /// Reads what is left and checks the size and the hash.
    pub fn finish(mut self) -> Result<(), BundleError> {
        std::io::copy(&mut self, &mut std::io::sink()).map_err(|e| bundle_error(e, self.offset))?;
        if self.count != self.header.uncompressed_size {
            return Err(BundleError::CcobSize {
                offset: self.offset,
                expected: self.header.uncompressed_size,
                actual: self.count,
            });
        }
        let actual = low_64(&self.md5.finalize().into());
        if actual != self.header.hash {
            return Err(BundleError::CcobHash {
                offset: self.offset,
                expected: self.header.hash,
                actual,
            });
        }
        Ok(())
    }
}

/// The bundle error an I/O error of a [`Decoded`] reader carries, or one
/// that describes it.
pub fn bundle_error(error: std::io::Error, offset: usize) -> BundleError {
    match error.downcast::<BundleError>() {
        Ok(error) => error,
        Err(error) => BundleError::CcobDecompress {
            offset,
            reason: error.to_string(),
        },
    }
}

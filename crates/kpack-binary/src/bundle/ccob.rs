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

use std::io::Read;

use md5::{Digest, Md5};

use crate::error::BundleError;

/// The first bytes of a compressed bundle.
pub(super) const CCOB_MAGIC: &[u8] = b"CCOB";

/// The payload's compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CcobMethod {
    Zlib,
    Zstd,
}

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
    /// Size of the header in bytes.
    pub fn header_len(&self) -> usize {
        match self.version {
            1 => 20,
            2 => 24,
            _ => 32,
        }
    }

    /// Parses the header at the start of `bytes` (at `offset` in the section).
    pub fn parse(bytes: &[u8], offset: usize) -> Result<CcobHeader, BundleError> {
        let truncated = || BundleError::TruncatedHeader { offset };
        let field = |at: usize, len: usize| -> Result<u64, BundleError> {
            let slice = bytes.get(at..at + len).ok_or_else(truncated)?;
            Ok(slice
                .iter()
                .rev()
                .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
        };
        let version = field(4, 2)? as u16;
        let method = match field(6, 2)? as u16 {
            0 => CcobMethod::Zlib,
            1 => CcobMethod::Zstd,
            method => return Err(BundleError::UnknownCcobMethod { offset, method }),
        };
        let (total_size, uncompressed_size, hash) = match version {
            1 => (None, field(8, 4)?, field(12, 8)?),
            2 => (Some(field(8, 4)?), field(12, 4)?, field(16, 8)?),
            3 => (Some(field(8, 8)?), field(16, 8)?, field(24, 8)?),
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
}

/// The low 64 bits of the MD5 of `data`, as clang stores them.
pub fn ccob_hash(data: &[u8]) -> u64 {
    let digest = Md5::digest(data);
    let mut low = [0u8; 8];
    low.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(low)
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
        let digest = self.md5.finalize();
        let mut low = [0u8; 8];
        low.copy_from_slice(&digest[..8]);
        let actual = u64::from_le_bytes(low);
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

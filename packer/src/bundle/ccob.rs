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

/// Decompresses the compressed bundle at the start of `bytes` and checks
/// its size and hash; returns the header, the payload's length in the
/// section and the uncompressed bytes.
pub(super) fn decompress(
    bytes: &[u8],
    offset: usize,
) -> Result<(CcobHeader, usize, Vec<u8>), BundleError> {
    let header = CcobHeader::parse(bytes, offset)?;
    let start = header.header_len();
    let failed = |reason: String| BundleError::CcobDecompress { offset, reason };
    let payload = match header.total_size {
        Some(total) => {
            let end = usize::try_from(total)
                .ok()
                .filter(|&end| end >= start && end <= bytes.len())
                .ok_or(BundleError::CcobTruncated {
                    offset,
                    total,
                    available: bytes.len(),
                })?;
            &bytes[start..end]
        }
        None => &bytes[start..],
    };
    // The output grows as it is produced (bounded by the header's size plus
    // one byte to detect overruns), never allocated up front from an
    // untrusted header.
    let limit = header.uncompressed_size.saturating_add(1);
    let mut out = Vec::new();
    let consumed = match header.method {
        CcobMethod::Zstd => {
            let frame_len = if header.total_size.is_none() {
                zstd::zstd_safe::find_frame_compressed_size(payload)
                    .map_err(|code| failed(zstd::zstd_safe::get_error_name(code).to_owned()))?
            } else {
                payload.len()
            };
            let decoder = zstd::stream::read::Decoder::with_buffer(&payload[..frame_len])
                .map_err(|e| failed(e.to_string()))?;
            decoder
                .take(limit)
                .read_to_end(&mut out)
                .map_err(|e| failed(e.to_string()))?;
            frame_len
        }
        CcobMethod::Zlib => {
            let mut decoder = flate2::read::ZlibDecoder::new(payload);
            (&mut decoder)
                .take(limit)
                .read_to_end(&mut out)
                .map_err(|e| failed(e.to_string()))?;
            if header.total_size.is_some() {
                payload.len()
            } else {
                decoder.total_in() as usize
            }
        }
    };
    if out.len() as u64 != header.uncompressed_size {
        return Err(BundleError::CcobSize {
            offset,
            expected: header.uncompressed_size,
            actual: out.len() as u64,
        });
    }
    let actual = ccob_hash(&out);
    if actual != header.hash {
        return Err(BundleError::CcobHash {
            offset,
            expected: header.hash,
            actual,
        });
    }
    Ok((header, consumed, out))
}

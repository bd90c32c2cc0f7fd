//! Writing offload bundles and compressed bundles, as clang does: for
//! tests and tools that need fat binaries without a GPU compiler.
#![allow(clippy::expect_used)]

use super::ccob::ccob_hash;
use super::{CcobMethod, OFFLOAD_BUNDLE_MAGIC};

/// An uncompressed bundle of `(triple, bytes)` entries, with a host entry
/// first as clang writes it.
pub fn offload_bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let host = "host-x86_64-unknown-linux-gnu-";
    let all: Vec<(&str, &[u8])> = std::iter::once((host, &[][..]))
        .chain(entries.iter().copied())
        .collect();
    let header_len: usize = 32 + all.iter().map(|(t, _)| 24 + t.len()).sum::<usize>();
    let mut out = OFFLOAD_BUNDLE_MAGIC.to_vec();
    out.extend_from_slice(&(all.len() as u64).to_le_bytes());
    let mut data_at = header_len;
    for (triple, bytes) in &all {
        let offset = if bytes.is_empty() { 0 } else { data_at };
        out.extend_from_slice(&(offset as u64).to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(&(triple.len() as u64).to_le_bytes());
        out.extend_from_slice(triple.as_bytes());
        data_at += bytes.len();
    }
    for (_, bytes) in &all {
        out.extend_from_slice(bytes);
    }
    out
}

/// A compressed bundle of `inner` with the given header version and method.
pub fn ccob(inner: &[u8], version: u16, method: CcobMethod) -> Vec<u8> {
    let payload = match method {
        CcobMethod::Zstd => zstd::bulk::compress(inner, 3).expect("zstd compresses any input"),
        CcobMethod::Zlib => {
            use std::io::Write;
            let mut encoder =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(inner).expect("writing to a Vec");
            encoder.finish().expect("writing to a Vec")
        }
    };
    let method_id: u16 = match method {
        CcobMethod::Zlib => 0,
        CcobMethod::Zstd => 1,
    };
    let hash = ccob_hash(inner);
    let mut out = b"CCOB".to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&method_id.to_le_bytes());
    match version {
        1 => {
            out.extend_from_slice(&(inner.len() as u32).to_le_bytes());
        }
        2 => {
            out.extend_from_slice(&((24 + payload.len()) as u32).to_le_bytes());
            out.extend_from_slice(&(inner.len() as u32).to_le_bytes());
        }
        _ => {
            out.extend_from_slice(&((32 + payload.len()) as u64).to_le_bytes());
            out.extend_from_slice(&(inner.len() as u64).to_le_bytes());
        }
    }
    out.extend_from_slice(&hash.to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

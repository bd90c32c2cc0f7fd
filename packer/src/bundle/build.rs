//! Writing offload bundles and compressed bundles, as clang does: for
//! tests and tools that need fat binaries without a GPU compiler.
#![allow(clippy::expect_used)]

use std::io::Write;

use md5::{Digest, Md5};

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
    ccob_streamed(version, method, inner.len() as u64, |out| {
        out.write_all(inner)
    })
}

/// A compressed bundle of `inner_len` bytes that `write_inner` writes a
/// piece at a time: compressed and hashed as they come, never held whole,
/// so a test can make gigabytes of device code in a few megabytes.
pub fn ccob_streamed(
    version: u16,
    method: CcobMethod,
    inner_len: u64,
    write_inner: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Vec<u8> {
    let mut tee = Tee {
        md5: Md5::new(),
        encoder: match method {
            CcobMethod::Zstd => Encoder::Zstd(
                zstd::stream::write::Encoder::new(Vec::new(), 3).expect("a zstd encoder"),
            ),
            CcobMethod::Zlib => Encoder::Zlib(flate2::write::ZlibEncoder::new(
                Vec::new(),
                flate2::Compression::default(),
            )),
        },
    };
    write_inner(&mut tee).expect("writing to a Vec");
    let digest = tee.md5.finalize();
    let hash = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"));
    let payload = match tee.encoder {
        Encoder::Zstd(encoder) => encoder.finish(),
        Encoder::Zlib(encoder) => encoder.finish(),
    }
    .expect("writing to a Vec");
    let method_id: u16 = match method {
        CcobMethod::Zlib => 0,
        CcobMethod::Zstd => 1,
    };
    let mut out = b"CCOB".to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&method_id.to_le_bytes());
    match version {
        1 => {
            out.extend_from_slice(&(inner_len as u32).to_le_bytes());
        }
        2 => {
            out.extend_from_slice(&((24 + payload.len()) as u32).to_le_bytes());
            out.extend_from_slice(&(inner_len as u32).to_le_bytes());
        }
        _ => {
            out.extend_from_slice(&((32 + payload.len()) as u64).to_le_bytes());
            out.extend_from_slice(&inner_len.to_le_bytes());
        }
    }
    out.extend_from_slice(&hash.to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

/// The compressor a compressed bundle's payload is written through.
enum Encoder {
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
    Zlib(flate2::write::ZlibEncoder<Vec<u8>>),
}

/// Hashes what it compresses.
struct Tee {
    md5: Md5,
    encoder: Encoder,
}

impl Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = match &mut self.encoder {
            Encoder::Zstd(encoder) => encoder.write(buf)?,
            Encoder::Zlib(encoder) => encoder.write(buf)?,
        };
        self.md5.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

//! Writing compressed bundles (CCOB) as clang's `--offload-compress` does:
//! version 3, zstd at level 3 with long-distance matching, the frame
//! recording its content size and no checksum, the header carrying the
//! total and uncompressed sizes and the low 64 bits of the MD5 of the
//! plain bundle inside. The plain bundle streams in; the compressed one
//! streams out, its header written last, so neither is held whole.

use std::io::{self, Seek, SeekFrom, Write};

use md5::{Digest, Md5};

use super::ccob::{low_64, CcobHeader, CcobMethod};

/// The zstd level clang's offload bundler compresses at.
pub const CLANG_ZSTD_LEVEL: i32 = 3;

/// The CCOB version written.
const VERSION: u16 = 3;

/// Writes into `out` (at its position) the compressed bundle of the
/// `inner_len`-byte plain bundle `write_inner` writes; returns its length.
/// The plain bundle must be exactly `inner_len` bytes.
pub fn write_ccob<W: Write + Seek>(
    out: &mut W,
    inner_len: u64,
    write_inner: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<u64> {
    let start = out.stream_position()?;
    let placeholder = CcobHeader::new(VERSION, CcobMethod::Zstd, inner_len, 0, 0);
    let header_len = placeholder.header_len() as u64;
    out.write_all(&vec![0; header_len as usize])?;

    let mut encoder = zstd::stream::write::Encoder::new(&mut *out, CLANG_ZSTD_LEVEL)?;
    encoder.long_distance_matching(true)?;
    encoder.include_contentsize(true)?;
    encoder.include_checksum(false)?;
    encoder.set_pledged_src_size(Some(inner_len))?;
    let mut hashing = Hashing {
        md5: Md5::new(),
        inner: encoder,
        written: 0,
    };
    write_inner(&mut hashing)?;
    if hashing.written != inner_len {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the plain bundle has {} bytes, not the {inner_len} planned",
                hashing.written
            ),
        ));
    }
    let hash = low_64(&hashing.md5.finalize().into());
    hashing.inner.finish()?;
    let end = out.stream_position()?;
    let header = CcobHeader::new(
        VERSION,
        CcobMethod::Zstd,
        inner_len,
        hash,
        end - start - header_len,
    );
    out.seek(SeekFrom::Start(start))?;
    header.write(out)?;
    out.seek(SeekFrom::Start(end))?;
    Ok(end - start)
}

/// Hashes and counts what it passes on.
struct Hashing<W> {
    md5: Md5,
    inner: W,
    written: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.md5.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::parse_fatbin;

    #[test]
    fn a_written_ccob_reads_back_as_the_plain_bundle_it_holds() {
        let plain = crate::bundle::build::offload_bundle(&[
            ("hipv4-amdgcn-amd-amdhsa--gfx90a", &[7u8; 10_000][..]),
            ("hipv4-amdgcn-amd-amdhsa--gfx1100", &[9u8; 20_000][..]),
        ]);
        let mut out = io::Cursor::new(Vec::new());
        let len = write_ccob(&mut out, plain.len() as u64, |w| w.write_all(&plain)).unwrap();
        let bytes = out.into_inner();
        assert_eq!(len as usize, bytes.len());
        let bundles = parse_fatbin(&bytes).unwrap();
        assert_eq!(bundles.len(), 1);
        let code = bundles[0].code_objects().unwrap();
        assert_eq!(code.len(), 2);
        assert_eq!(&code[0].bytes[..], &[7u8; 10_000][..]);
        let header = CcobHeader::parse(&bytes, 0).unwrap();
        assert_eq!(header.uncompressed_size, plain.len() as u64);
        assert_eq!(header.total_size, Some(len));
        assert_eq!(header.hash, super::super::ccob::ccob_hash(&plain));
    }

    #[test]
    fn a_plain_bundle_of_another_length_than_planned_is_an_error() {
        let mut out = io::Cursor::new(Vec::new());
        let error = write_ccob(&mut out, 100, |w| w.write_all(&[0; 99])).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }
}

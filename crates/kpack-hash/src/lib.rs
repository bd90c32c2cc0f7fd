//! SHA-256 digests, and the reader and writer that hash what passes
//! through them, so a copy (a download, an upload, a file written into a
//! wheel) and its check are one pass; and the reader and writer that count
//! what passes through them, within a limit (`counting`). Shared by the
//! packer, the repository tools, kpack-get and the runtime.
#![forbid(unsafe_code)]

mod counting;

use std::fmt;

pub use counting::{CountingReader, CountingWriter};
use std::str::FromStr;

/// Text that is not a SHA-256 digest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?}: a sha256 is 64 lowercase hex digits")]
pub struct InvalidSha256 {
    pub value: String,
}

/// A SHA-256 digest, written as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256([u8; 32]);

impl Sha256 {
    /// The digest of `data`.
    pub fn of(data: &[u8]) -> Sha256 {
        use sha2::Digest;
        Sha256(sha2::Sha256::digest(data).into())
    }

    /// The digest and size of the file at `path`, read once in blocks.
    /// Errors name the path.
    pub fn of_file(path: &std::path::Path) -> std::io::Result<(Sha256, u64)> {
        Sha256::of_reader(fs_err::File::open(path)?)
    }

    /// The digest and size of everything `reader` yields.
    pub fn of_reader(reader: impl std::io::Read) -> std::io::Result<(Sha256, u64)> {
        let mut hashing = HashingReader::new(reader);
        std::io::copy(&mut hashing, &mut std::io::sink())?;
        Ok(hashing.finish())
    }

    pub fn from_bytes(bytes: [u8; 32]) -> Sha256 {
        Sha256(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl FromStr for Sha256 {
    type Err = InvalidSha256;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let digit = |b: u8| match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            _ => None,
        };
        let bytes = s.as_bytes();
        if bytes.len() != 64 {
            return Err(InvalidSha256 {
                value: s.to_owned(),
            });
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            match (digit(pair[0]), digit(pair[1])) {
                (Some(high), Some(low)) => out[i] = high << 4 | low,
                _ => {
                    return Err(InvalidSha256 {
                        value: s.to_owned(),
                    })
                }
            }
        }
        Ok(Sha256(out))
    }
}

impl fmt::Display for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256({self})")
    }
}

impl serde::Serialize for Sha256 {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Sha256 {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A reader that hashes and counts the bytes that pass through it, so a
/// copy and its check are one read.
#[derive(Debug)]
pub struct HashingReader<R> {
    inner: R,
    hasher: sha2::Sha256,
    size: u64,
}

impl<R> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        use sha2::Digest;
        HashingReader {
            inner,
            hasher: sha2::Sha256::new(),
            size: 0,
        }
    }

    /// The digest and size of what was read.
    pub fn finish(self) -> (Sha256, u64) {
        use sha2::Digest;
        (Sha256(self.hasher.finalize().into()), self.size)
    }
}

impl<R: std::io::Read> std::io::Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use sha2::Digest;
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }
}

/// A writer that hashes and counts the bytes written through it, so a
/// download is written and checked in one pass.
#[derive(Debug)]
pub struct HashingWriter<W> {
    inner: W,
    hasher: sha2::Sha256,
    size: u64,
}

impl<W> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        use sha2::Digest;
        HashingWriter {
            inner,
            hasher: sha2::Sha256::new(),
            size: 0,
        }
    }

    /// Continues a file whose first bytes are already in place (a resumed
    /// download): what `existing` yields is hashed and counted, not written.
    pub fn resume(inner: W, existing: impl std::io::Read) -> std::io::Result<Self> {
        let mut reader = HashingReader::new(existing);
        std::io::copy(&mut reader, &mut std::io::sink())?;
        Ok(HashingWriter {
            inner,
            hasher: reader.hasher,
            size: reader.size,
        })
    }

    /// The bytes hashed so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The digest and size of what was written, and the writer.
    pub fn finish(self) -> (Sha256, u64, W) {
        use sha2::Digest;
        (Sha256(self.hasher.finalize().into()), self.size, self.inner)
    }
}

impl<W: std::io::Write> std::io::Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use sha2::Digest;
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

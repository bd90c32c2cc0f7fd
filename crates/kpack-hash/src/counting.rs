//! A reader and a writer that count the bytes passing through them and can
//! refuse to pass more than a limit: the one way the tools measure a
//! stream, or stop one at its declared size.

use std::io::{self, Read, Write};

/// A writer that counts the bytes passing through it to `inner`, and
/// refuses (with an error, counting what it was offered) to pass more than
/// its limit.
#[derive(Debug)]
pub struct CountingWriter<W> {
    inner: W,
    count: u64,
    limit: u64,
}

impl<W> CountingWriter<W> {
    /// Counts without a limit.
    pub fn new(inner: W) -> Self {
        CountingWriter::with_limit(inner, u64::MAX)
    }

    /// Counts, refusing to pass more than `limit` bytes.
    pub fn with_limit(inner: W, limit: u64) -> Self {
        CountingWriter {
            inner,
            count: 0,
            limit,
        }
    }

    /// The bytes written, or offered when that went past the limit.
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn into_inner(self) -> W {
        self.inner
    }
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let offered = self.count.saturating_add(buf.len() as u64);
        if offered > self.limit {
            self.count = offered;
            return Err(io::Error::other(format!("more than {} bytes", self.limit)));
        }
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that counts the bytes read through it from `inner`, and fails
/// once more than its limit have passed.
#[derive(Debug)]
pub struct CountingReader<R> {
    inner: R,
    count: u64,
    limit: u64,
}

impl<R> CountingReader<R> {
    /// Counts without a limit.
    pub fn new(inner: R) -> Self {
        CountingReader::with_limit(inner, u64::MAX)
    }

    /// Counts, failing once more than `limit` bytes have been read.
    pub fn with_limit(inner: R, limit: u64) -> Self {
        CountingReader {
            inner,
            count: 0,
            limit,
        }
    }

    /// The bytes read.
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count = self.count.saturating_add(n as u64);
        if self.count > self.limit {
            return Err(io::Error::other(format!("more than {} bytes", self.limit)));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writer_counts_and_refuses_past_its_limit() {
        let mut writer = CountingWriter::with_limit(Vec::new(), 10);
        writer.write_all(b"0123456789").unwrap();
        assert!(writer.write_all(b"x").is_err());
        assert_eq!(writer.count(), 11);
        assert_eq!(writer.into_inner(), b"0123456789");
    }

    #[test]
    fn a_reader_counts_and_fails_past_its_limit() {
        let mut reader = CountingReader::new(&b"0123456789"[..]);
        io::copy(&mut reader, &mut io::sink()).unwrap();
        assert_eq!(reader.count(), 10);
        let mut bounded = CountingReader::with_limit(&b"0123456789"[..], 4);
        assert!(io::copy(&mut bounded, &mut io::sink()).is_err());
    }
}

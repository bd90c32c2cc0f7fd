//! Writing a wheel: a deterministic zip (fixed timestamps, normalised
//! modes, members in the order given) written to a temporary file beside
//! its destination, with RECORD made from what was written. Large members
//! are deflated in blocks on every core ([`super::deflate`]).

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use kpack_fs::AtomicFile;
use kpack_hash::HashingWriter;
use zip::read::ZipFile;
use zip::result::ZipError;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

use super::deflate::{deflate_blocks, LEVEL};
use super::error::WheelError;
use super::record::RecordWriter;

/// The zip timestamp for `SOURCE_DATE_EPOCH` seconds, in UTC and clamped
/// to what zip can hold (1980 to 2107); without one, 1980-01-01 00:00:00.
pub fn zip_time(source_date_epoch: Option<i64>) -> DateTime {
    let earliest = DateTime::default();
    let Some(seconds) = source_date_epoch else {
        return earliest;
    };
    let Ok(timestamp) = jiff::Timestamp::from_second(seconds) else {
        return earliest;
    };
    let civil = jiff::tz::Offset::UTC.to_datetime(timestamp);
    let Ok(year) = u16::try_from(civil.year()) else {
        return earliest;
    };
    let time = DateTime::from_date_and_time(
        year,
        civil.month() as u8,
        civil.day() as u8,
        civil.hour() as u8,
        civil.minute() as u8,
        civil.second() as u8,
    );
    match time {
        Ok(time) => time,
        Err(_) if year < 1980 => earliest,
        Err(_) => DateTime::from_date_and_time(2107, 12, 31, 23, 59, 58).unwrap_or(earliest),
    }
}

/// Bytes written to the file at a time.
const IO_BUFFER: usize = 1024 * 1024;

/// A wheel being written; it appears at its path only when the caller
/// commits what [`WheelWriter::finish`] returns.
#[derive(Debug)]
pub struct WheelWriter {
    path: PathBuf,
    zip: ZipWriter<BufWriter<AtomicFile>>,
    record: RecordWriter,
    time: DateTime,
    /// Members deflated of at least this many bytes are deflated in
    /// blocks on every core.
    parallel_deflate: u64,
}

impl WheelWriter {
    /// Starts writing the wheel at `path` with every timestamp `time`,
    /// members of at least `parallel_deflate` bytes deflated on every core.
    pub fn create(
        path: &Path,
        time: DateTime,
        parallel_deflate: u64,
    ) -> Result<WheelWriter, WheelError> {
        let file = AtomicFile::create(path).map_err(std::io::Error::from)?;
        Ok(WheelWriter {
            path: path.to_owned(),
            zip: ZipWriter::new(BufWriter::with_capacity(IO_BUFFER, file)),
            record: RecordWriter::default(),
            time,
            parallel_deflate,
        })
    }

    fn failed(&self) -> impl FnOnce(ZipError) -> WheelError + '_ {
        move |source| WheelError::Write {
            path: self.path.clone(),
            source,
        }
    }

    fn options(&self, mode: u32, method: CompressionMethod, size: u64) -> SimpleFileOptions {
        let deflated = method == CompressionMethod::Deflated;
        let level = deflated.then_some(i64::from(LEVEL));
        // Deflate grows what does not compress by a little: zip64 sizes
        // wherever the deflated member could pass 4 GiB.
        let bound = match deflated {
            true => size.saturating_add(size / 1024 + 1024),
            false => size,
        };
        SimpleFileOptions::default()
            .compression_method(method)
            .compression_level(level)
            .last_modified_time(self.time)
            .unix_permissions(mode)
            .large_file(bound >= u64::from(u32::MAX))
    }

    /// Copies `file` from the input as stored (no recompression) under the
    /// same name, with this wheel's timestamp and `mode`; `digest` and
    /// `size` are its content's, for RECORD.
    pub fn copy_raw<R: Read>(
        &mut self,
        file: ZipFile<'_, R>,
        name: &str,
        mode: u32,
        digest: &[u8; 32],
        size: u64,
    ) -> Result<(), WheelError> {
        let result = self.zip.raw_copy_file_touch(file, self.time, Some(mode));
        result.map_err(self.failed())?;
        self.record.add(name, digest, size);
        Ok(())
    }

    /// Writes `name` from `reader` (`size` bytes, compressed with
    /// `method`), hashing it for RECORD.
    pub fn write_from(
        &mut self,
        name: &str,
        mut reader: impl Read + Send,
        mode: u32,
        method: CompressionMethod,
        size: u64,
    ) -> Result<(), WheelError> {
        if method == CompressionMethod::Deflated && size >= self.parallel_deflate {
            return self.write_in_blocks(name, reader, mode, size);
        }
        let options = self.options(mode, method, size);
        let started = self.zip.start_file(name, options);
        started.map_err(self.failed())?;
        let mut hashing = HashingWriter::new(&mut self.zip);
        let copied = std::io::copy(&mut reader, &mut hashing);
        let (digest, written, _) = hashing.finish();
        copied.map_err(ZipError::Io).map_err(self.failed())?;
        self.record.add(name, digest.as_bytes(), written);
        Ok(())
    }

    /// Writes `name` from `reader` (`size` bytes), deflated in blocks on
    /// every core, hashing it for RECORD. The blocks go straight into the
    /// zip after the entry's header; the entry's own deflater, given no
    /// input, ends the stream with its final block when the entry is
    /// finished, and the CRC and size are the blocks' input's.
    fn write_in_blocks(
        &mut self,
        name: &str,
        reader: impl Read + Send,
        mode: u32,
        size: u64,
    ) -> Result<(), WheelError> {
        let options = self.options(mode, CompressionMethod::Deflated, size);
        let started = self.zip.start_file(name, options);
        started.map_err(self.failed())?;
        let mut hashing = HashingWriter::new(std::io::sink());
        // SAFETY: the blocks are appended at the writer's position, inside
        // the entry just started, and nothing else writes until they are
        // all there: the archive stays whole and the position is where the
        // zip writer left it, plus the entry's data.
        let Some(file) = (unsafe { self.zip.get_mut() }) else {
            return Err(WheelError::Write {
                path: self.path.clone(),
                source: ZipError::Io(std::io::ErrorKind::BrokenPipe.into()),
            });
        };
        let deflated = deflate_blocks(reader, file, |bytes| hashing.write_all(bytes));
        let deflated = deflated.map_err(ZipError::Io).map_err(self.failed())?;
        // SAFETY: the entry started above is being written, and its data
        // are the blocks of `deflated.size` bytes whose CRC-32 this is.
        let sized = unsafe { self.zip.set_file_metadata(deflated.size, deflated.crc32) };
        sized.map_err(self.failed())?;
        let (digest, written, _) = hashing.finish();
        self.record.add(name, digest.as_bytes(), written);
        Ok(())
    }

    /// Writes `name` holding `bytes`, deflated.
    pub fn write_bytes(&mut self, name: &str, bytes: &[u8], mode: u32) -> Result<(), WheelError> {
        let size = bytes.len() as u64;
        self.write_from(name, bytes, mode, CompressionMethod::Deflated, size)
    }

    /// Writes RECORD (at `record_path`) last and finishes the zip; the
    /// caller commits the file to make it appear.
    pub fn finish(mut self, record_path: &str) -> Result<AtomicFile, WheelError> {
        let record = std::mem::take(&mut self.record).finish(record_path);
        let options = self.options(0o644, CompressionMethod::Deflated, 0);
        let started = self.zip.start_file(record_path, options);
        started.map_err(self.failed())?;
        let written = self.zip.write_all(record.as_bytes());
        written.map_err(ZipError::Io).map_err(self.failed())?;
        let path = self.path.clone();
        let failed = |source| WheelError::Write { path, source };
        let buffered = self.zip.finish().map_err(failed)?;
        buffered.into_inner().map_err(|e| WheelError::Write {
            path: self.path,
            source: ZipError::Io(e.into_error()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_date_epoch_gives_the_zip_time() {
        let time = zip_time(Some(1_700_000_000)); // 2023-11-14 22:13:20 UTC
        assert_eq!((time.year(), time.month(), time.day()), (2023, 11, 14));
        assert_eq!((time.hour(), time.minute(), time.second()), (22, 13, 20));
        assert_eq!(zip_time(Some(0)), DateTime::default());
        assert_eq!(zip_time(Some(-5)), DateTime::default());
        assert_eq!(zip_time(Some(5_000_000_000)).year(), 2107);
        assert_eq!(zip_time(None), DateTime::default());
    }
}

//! Writing a wheel: a deterministic zip (fixed timestamps, normalised
//! modes, members in the order given) written to a temporary file beside
//! its destination, with RECORD made from what was written.

use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use kpack_fs::AtomicFile;
use kpack_hash::HashingWriter;
use zip::read::ZipFile;
use zip::result::ZipError;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

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
}

impl WheelWriter {
    /// Starts writing the wheel at `path` with every timestamp `time`.
    pub fn create(path: &Path, time: DateTime) -> Result<WheelWriter, WheelError> {
        let file = AtomicFile::create(path).map_err(std::io::Error::from)?;
        Ok(WheelWriter {
            path: path.to_owned(),
            zip: ZipWriter::new(BufWriter::with_capacity(IO_BUFFER, file)),
            record: RecordWriter::default(),
            time,
        })
    }

    fn failed(&self) -> impl FnOnce(ZipError) -> WheelError + '_ {
        move |source| WheelError::Write {
            path: self.path.clone(),
            source,
        }
    }

    fn options(&self, mode: u32, method: CompressionMethod, size: u64) -> SimpleFileOptions {
        SimpleFileOptions::default()
            .compression_method(method)
            .last_modified_time(self.time)
            .unix_permissions(mode)
            .large_file(size >= u64::from(u32::MAX))
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
        mut reader: impl Read,
        mode: u32,
        method: CompressionMethod,
        size: u64,
    ) -> Result<(), WheelError> {
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

//! Bytes on their way into an archive, prepared on a worker thread and
//! copied in by the writer: kept in memory up to a limit, then in an
//! unnamed file on the output's disk, so a large compressed code object
//! costs disk, not memory.

use std::fs::File;
use std::io::{self, Cursor, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Bytes held in memory before a spool moves to a file.
pub const SPOOL_MEMORY: usize = 8 * 1024 * 1024;

/// A buffer that moves to a file in `dir` once it outgrows [`SPOOL_MEMORY`].
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    memory: Vec<u8>,
    file: Option<io::BufWriter<File>>,
}

impl Spool {
    /// An empty spool whose file, if it needs one, goes into `dir`.
    pub fn new(dir: &Path) -> Spool {
        Spool {
            dir: dir.to_owned(),
            memory: Vec::new(),
            file: None,
        }
    }

    /// A reader of everything written, from the start.
    pub fn into_reader(self) -> io::Result<SpoolReader> {
        match self.file {
            None => Ok(SpoolReader::Memory(Cursor::new(self.memory))),
            Some(file) => {
                let mut file = file.into_inner().map_err(io::IntoInnerError::into_error)?;
                file.seek(SeekFrom::Start(0))?;
                Ok(SpoolReader::File(io::BufReader::new(file)))
            }
        }
    }
}

impl Write for Spool {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.file.is_none() && self.memory.len() + buf.len() > SPOOL_MEMORY {
            let file = tempfile::tempfile_in(&self.dir).map_err(|error| {
                let message = format!("cannot spool into {}: {error}", self.dir.display());
                io::Error::new(error.kind(), message)
            })?;
            let mut file = io::BufWriter::new(file);
            file.write_all(&self.memory)?;
            self.memory = Vec::new();
            self.file = Some(file);
        }
        match &mut self.file {
            Some(file) => file.write(buf),
            None => self.memory.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.file {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

/// Reads a spool back.
#[derive(Debug)]
pub enum SpoolReader {
    Memory(Cursor<Vec<u8>>),
    File(io::BufReader<File>),
}

impl Read for SpoolReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            SpoolReader::Memory(cursor) => cursor.read(buf),
            SpoolReader::File(file) => file.read(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spool_moves_to_a_file_past_its_memory_and_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::new(dir.path());
        let piece: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
        for _ in 0..3 {
            spool.write_all(&piece).unwrap();
        }
        assert!(spool.file.is_none());
        for _ in 0..7 {
            spool.write_all(&piece).unwrap();
        }
        assert!(spool.file.is_some());
        let mut back = Vec::new();
        spool.into_reader().unwrap().read_to_end(&mut back).unwrap();
        assert_eq!(back.len(), 10 << 20);
        assert!(back.chunks(1 << 20).all(|chunk| chunk == piece));
        // The file has no name: nothing is left in the directory.
        assert_eq!(fs_err::read_dir(dir.path()).unwrap().count(), 0);
    }
}

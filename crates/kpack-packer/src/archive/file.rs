//! An archive's file while it is written: buffered while open, closed
//! between code objects when too many archives are under way, and
//! reopened where writing stopped.

use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use kpack_fs::{AtomicFile, ClosedAtomicFile};

use super::processor_archive_name;
use crate::error::Result;

/// Where an archive is written: atomically into place (synced, renamed),
/// or as a scratch file another step copies elsewhere (no sync).
#[derive(Debug)]
enum Sink {
    Atomic(AtomicFile),
    Scratch(fs_err::File),
}

/// A [`Sink`] closed to spare its file handle.
#[derive(Debug)]
enum Closed {
    Atomic(ClosedAtomicFile),
    Scratch(PathBuf),
}

#[derive(Debug)]
enum State {
    Open(BufWriter<Sink>),
    Closed(Closed),
    /// After a close or reopen failed: every later write fails.
    Broken,
}

/// An archive's file, open or closed; writes reopen a closed one.
#[derive(Debug)]
pub(super) struct ArchiveFile {
    state: State,
    /// Where writing stopped when it was closed.
    position: u64,
}

impl ArchiveFile {
    /// The file for the archive of `name` (a processor or family) in `dir`.
    pub fn create(dir: &Path, group: &str, name: &str, scratch: bool) -> Result<(PathBuf, Self)> {
        let path = dir.join(processor_archive_name(group, name));
        let sink = if scratch {
            fs_err::create_dir_all(dir)?;
            Sink::Scratch(fs_err::File::create(&path)?)
        } else {
            Sink::Atomic(AtomicFile::create(&path)?)
        };
        let file = ArchiveFile {
            state: State::Open(BufWriter::new(sink)),
            position: 0,
        };
        Ok((path, file))
    }

    /// Flushes and closes its file, remembering where writing stopped.
    pub fn close(&mut self) -> io::Result<()> {
        let State::Open(buffered) = std::mem::replace(&mut self.state, State::Broken) else {
            return Ok(());
        };
        let mut sink = buffered
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        self.position = sink.stream_position()?;
        self.state = State::Closed(match sink {
            Sink::Atomic(file) => Closed::Atomic(file.close()),
            Sink::Scratch(file) => Closed::Scratch(file.into_parts().1),
        });
        Ok(())
    }

    /// Its file, reopened where writing stopped if it was closed.
    fn open(&mut self) -> io::Result<&mut BufWriter<Sink>> {
        if let State::Closed(_) = self.state {
            let State::Closed(closed) = std::mem::replace(&mut self.state, State::Broken) else {
                return Err(broken());
            };
            let mut sink = match closed {
                Closed::Atomic(file) => Sink::Atomic(file.reopen()?),
                Closed::Scratch(path) => {
                    Sink::Scratch(fs_err::OpenOptions::new().write(true).open(path)?)
                }
            };
            sink.seek(SeekFrom::Start(self.position))?;
            self.state = State::Open(BufWriter::new(sink));
        }
        match &mut self.state {
            State::Open(buffered) => Ok(buffered),
            _ => Err(broken()),
        }
    }

    /// Makes the finished file appear at its path.
    pub fn commit(mut self) -> Result<()> {
        self.open()?;
        let State::Open(buffered) = self.state else {
            return Err(broken().into());
        };
        match buffered
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?
        {
            Sink::Atomic(file) => file.commit()?,
            Sink::Scratch(file) => drop(file),
        }
        Ok(())
    }
}

/// The error of a file left closed by an earlier failure.
fn broken() -> io::Error {
    io::Error::other("the archive's file was closed after an earlier error")
}

impl Write for ArchiveFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.open()?.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.state {
            State::Open(buffered) => buffered.flush(),
            State::Closed(_) => Ok(()),
            State::Broken => Err(broken()),
        }
    }
}

impl Seek for ArchiveFile {
    fn seek(&mut self, position: SeekFrom) -> io::Result<u64> {
        self.open()?.seek(position)
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Atomic(file) => file.write(buf),
            Sink::Scratch(file) => file.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Atomic(file) => file.flush(),
            Sink::Scratch(file) => file.flush(),
        }
    }
}

impl Seek for Sink {
    fn seek(&mut self, position: SeekFrom) -> io::Result<u64> {
        match self {
            Sink::Atomic(file) => file.seek(position),
            Sink::Scratch(file) => file.seek(position),
        }
    }
}

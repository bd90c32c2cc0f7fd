//! The partial file a download writes: hashed as it is written, handed to
//! the disk as it grows, decoded as it grows when transport-encoded, and
//! emptied when the bytes served are refused.

use std::io::{Read, Seek, SeekFrom, Write};

use fs_err::File;

use super::failure::{AttemptError, Failure};
use super::writeback::{start_writeback, WRITEBACK_STEP};
use super::Wanted;
use crate::transport::{DecodeError, Decoder};
use crate::{HashingWriter, Sha256};

/// The partial file being written: hashed as it is written (the bytes kept
/// from an earlier attempt included), handed to the disk as it grows, and
/// for a transport-encoded file, decoded as it grows.
pub(super) struct Sink {
    writer: HashingWriter<std::io::BufWriter<File>>,
    written_back: u64,
    decoder: Option<Decoder<std::io::BufWriter<File>>>,
    /// The partial file and what it decodes to, emptied when the bytes
    /// served are refused.
    file: File,
    decoded: Option<File>,
}

/// Where a transport-encoded download decodes to: its decoder, and the
/// file it writes.
pub(super) struct Decoding {
    pub decoder: Decoder<std::io::BufWriter<File>>,
    pub out: File,
}

/// A sink started, or the bytes kept from before that do not decode.
pub(super) enum Started {
    Sink(Box<Sink>),
    KeptUndecodable(DecodeError),
}

impl Sink {
    /// Continues `file` after its first `have` bytes (hashed and decoded,
    /// not rewritten); anything beyond them is cut.
    pub fn start(
        mut file: File,
        have: u64,
        decoding: Option<Decoding>,
    ) -> Result<Started, Failure> {
        file.set_len(have)?;
        file.seek(SeekFrom::Start(0))?;
        let (mut decoder, decoded) = match decoding {
            Some(Decoding { decoder, out }) => (Some(decoder), Some(out)),
            None => (None, None),
        };
        if let Some(decoder) = &mut decoder {
            let mut kept = file.try_clone()?.take(have);
            if let Err(error) = std::io::copy(&mut kept, decoder) {
                return match decoder.error(error) {
                    DecodeError::Output(error) => Err(error.into()),
                    error => Ok(Started::KeptUndecodable(error)),
                };
            }
            file.seek(SeekFrom::Start(0))?;
        }
        // A clone shares the file's offset: reading the kept bytes through
        // it leaves the writer at `have`.
        let existing = file.try_clone()?.take(have);
        let kept = file.try_clone()?;
        let buffered = std::io::BufWriter::with_capacity(1 << 18, file);
        Ok(Started::Sink(Box::new(Sink {
            writer: HashingWriter::resume(buffered, existing)?,
            written_back: have,
            decoder,
            file: kept,
            decoded,
        })))
    }

    /// Writes (and decodes) `chunk`; on a failure, the caller hands the
    /// sink to [`reject`](Sink::reject).
    pub fn write(&mut self, chunk: &[u8]) -> Result<(), Failure> {
        self.writer.write_all(chunk)?;
        if let Some(decoder) = &mut self.decoder {
            if let Err(error) = decoder.write_all(chunk) {
                return Err(Failure::decode(decoder.error(error)));
            }
        }
        let position = self.writer.size();
        if position - self.written_back >= WRITEBACK_STEP {
            self.writer.flush()?;
            start_writeback(self.writer.get_ref().get_ref(), self.written_back, position);
            self.written_back = position;
        }
        Ok(())
    }

    /// What `failure` leaves: when the bytes served are refused (no retry
    /// on this mirror), none of them is kept, buffered or written, nor
    /// anything they decoded to; other failures keep what was written, for
    /// a resume.
    pub fn reject(self, failure: Failure) -> Failure {
        if !matches!(failure, Failure::NextMirror { .. }) {
            return failure;
        }
        match self.discard() {
            Ok(()) => failure,
            Err(error) => error.into(),
        }
    }

    /// Drops the buffers unwritten and empties the partial file and what
    /// it decoded to.
    fn discard(self) -> std::io::Result<()> {
        let Sink {
            writer,
            decoder,
            file,
            decoded,
            ..
        } = self;
        let (_, _, buffered) = writer.finish();
        drop(buffered.into_parts());
        if let Some(decoder) = decoder {
            drop(decoder.into_inner().into_parts());
        }
        file.set_len(0)?;
        decoded.map_or(Ok(()), |decoded| decoded.set_len(0))
    }

    /// Writes what arrives until the sender is done, then flushes; a
    /// refused chunk discards the sink.
    pub fn drain(
        mut self,
        mut batches: tokio::sync::mpsc::Receiver<Vec<bytes::Bytes>>,
    ) -> Result<Sink, Failure> {
        while let Some(batch) = batches.blocking_recv() {
            for chunk in &batch {
                if let Err(failure) = self.write(chunk) {
                    return Err(self.reject(failure));
                }
            }
        }
        self.writer.flush()?;
        Ok(self)
    }

    /// Where the file ends.
    pub fn written(&self) -> u64 {
        self.writer.size()
    }

    /// Checks the whole file against its pins: its hash, and for a
    /// transport-encoded file, what it decoded to (the end of its stream,
    /// size and hash). A mismatch empties the partial file and what it
    /// decoded to. The caller syncs the file (or what it decoded to) and
    /// hands it to the cache.
    pub fn complete(mut self, item: &Wanted) -> Result<(), Failure> {
        self.writer.flush()?;
        let Sink {
            writer,
            decoder,
            file,
            decoded,
            ..
        } = self;
        let (actual, _, _) = writer.finish();
        let checked = check_pin(actual, item).and_then(|()| match decoder {
            Some(decoder) => Ok(decoder.finish().map_err(Failure::decode)?.flush()?),
            None => Ok(()),
        });
        if let Err(Failure::NextMirror { .. }) = &checked {
            file.set_len(0)?;
            if let Some(decoded) = decoded {
                decoded.set_len(0)?;
            }
        }
        checked
    }
}

/// Checks the completed partial file's hash (the caller empties it on a
/// mismatch).
fn check_pin(actual: Sha256, item: &Wanted) -> Result<(), Failure> {
    if actual != item.sha256 {
        return Err(Failure::integrity(AttemptError::WrongHash {
            actual,
            pinned: item.sha256,
            discarded: true,
        }));
    }
    Ok(())
}

//! Decoding transport-encoded artifacts (04-repo-index.md) as their bytes
//! arrive: one zstd frame, decoded into the file that is installed, no
//! larger than its pin and in bounded memory, and checked against the
//! decoded hash the index pins. Encoding is the publisher's.

use std::io::{self, Write};

use crate::schema::Transport;
use crate::types::{Encoding, HashingWriter, Sha256};

/// The largest zstd window a client accepts, as a base-2 logarithm: it
/// bounds a download's decoding memory (16 MiB, so eight downloads at once
/// take little). Publishers encode within it: on Debian's archives a
/// window of 128 MiB is only half a per cent smaller.
pub const WINDOW_LOG_MAX: u32 = 24;

/// Why what was served does not decode to the artifact pinned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("the transport encoding \"{0}\" is not one this build decodes")]
    Unknown(Encoding),
    #[error("not a valid {encoding} stream")]
    Corrupt {
        encoding: Encoding,
        #[source]
        source: io::Error,
    },
    #[error("decodes to more than the {pinned} bytes pinned")]
    TooLong { pinned: u64 },
    #[error("decodes to {actual} bytes, but the index pins {pinned}")]
    WrongSize { actual: u64, pinned: u64 },
    #[error("decodes to sha256 {actual}, but the index pins {pinned}")]
    WrongHash { actual: Sha256, pinned: Sha256 },
    /// Writing the decoded bytes failed: the output's fault, not the
    /// bytes served.
    #[error("writing the decoded file")]
    Output(#[source] io::Error),
}

impl DecodeError {
    /// Whether the bytes served are at fault (another mirror may serve
    /// good ones), rather than where they are written.
    pub fn is_integrity(&self) -> bool {
        !matches!(self, DecodeError::Output(_))
    }
}

/// A writer that takes the bytes served and writes what they decode to
/// into `W`, hashing it. Errors from `write` are `io::Error`s whose inner
/// error is a [`DecodeError`] ([`Decoder::error`] recovers it).
pub struct Decoder<W: Write> {
    transport: Transport,
    inner: zstd::stream::write::Decoder<'static, Bounded<W>>,
}

impl<W: Write> Decoder<W> {
    /// Starts decoding into `out`; an unknown encoding is refused here.
    pub fn new(transport: &Transport, out: W) -> Result<Decoder<W>, DecodeError> {
        if !transport.encoding.is_known() {
            return Err(DecodeError::Unknown(transport.encoding.clone()));
        }
        let corrupt = |source| DecodeError::Corrupt {
            encoding: transport.encoding.clone(),
            source,
        };
        let mut raw = zstd::stream::raw::Decoder::new().map_err(corrupt)?;
        raw.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(WINDOW_LOG_MAX))
            .map_err(corrupt)?;
        let bounded = Bounded {
            inner: HashingWriter::new(out),
            limit: transport.decoded.size,
            failed: false,
            too_long: false,
        };
        Ok(Decoder {
            transport: transport.clone(),
            inner: zstd::stream::write::Decoder::with_decoder(bounded, raw),
        })
    }

    /// The bytes decoded so far.
    pub fn decoded(&self) -> u64 {
        self.inner.get_ref().inner.size()
    }

    /// Ends the stream and checks what it decoded to against the pin;
    /// returns the output.
    pub fn finish(mut self) -> Result<W, DecodeError> {
        if let Err(error) = self.inner.do_finish() {
            return Err(self.error(error));
        }
        let (actual, size, out) = self.inner.into_inner().inner.finish();
        let pinned = self.transport.decoded;
        if size != pinned.size {
            return Err(DecodeError::WrongSize {
                actual: size,
                pinned: pinned.size,
            });
        }
        if actual != pinned.sha256 {
            return Err(DecodeError::WrongHash {
                actual,
                pinned: pinned.sha256,
            });
        }
        Ok(out)
    }

    /// The output as it is, for a stream given up: neither flushed nor
    /// checked.
    pub fn into_inner(self) -> W {
        let (_, _, out) = self.inner.into_inner().inner.finish();
        out
    }

    /// What an error from `write` or `finish` means: the output failing,
    /// the stream decoding past its pin, or the stream being invalid.
    pub fn error(&self, error: io::Error) -> DecodeError {
        let bounded = self.inner.get_ref();
        if bounded.failed {
            return DecodeError::Output(error);
        }
        if bounded.too_long {
            return DecodeError::TooLong {
                pinned: bounded.limit,
            };
        }
        DecodeError::Corrupt {
            encoding: self.transport.encoding.clone(),
            source: error,
        }
    }
}

impl<W: Write> std::fmt::Debug for Decoder<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("transport", &self.transport)
            .field("decoded", &self.decoded())
            .finish_non_exhaustive()
    }
}

impl<W: Write> Write for Decoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The decoded bytes' writer: hashes them, refuses to go past the pinned
/// size (a decompression bomb stops at its pin, whatever it would
/// expand to), and remembers why it failed.
struct Bounded<W> {
    inner: HashingWriter<W>,
    limit: u64,
    /// The output itself failed.
    failed: bool,
    /// The stream decoded past `limit`.
    too_long: bool,
}

impl<W: Write> Write for Bounded<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.inner.size() + buf.len() as u64 > self.limit {
            self.too_long = true;
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "decodes past its pinned size",
            ));
        }
        self.inner.write(buf).inspect_err(|_| self.failed = true)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().inspect_err(|_| self.failed = true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Pin;

    fn transport_of(decoded: &[u8]) -> Transport {
        Transport {
            encoding: Encoding::Zstd,
            decoded: Pin {
                sha256: Sha256::of(decoded),
                size: decoded.len() as u64,
            },
        }
    }

    /// Feeds `served` in small pieces, as a download arrives.
    fn decode(transport: &Transport, served: &[u8]) -> Result<Vec<u8>, DecodeError> {
        let mut decoder = Decoder::new(transport, Vec::new())?;
        for piece in served.chunks(1000) {
            if let Err(error) = decoder.write_all(piece) {
                return Err(decoder.error(error));
            }
        }
        decoder.finish()
    }

    #[test]
    fn a_stream_decodes_to_its_pin_in_pieces() {
        let archive: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let served = zstd::encode_all(&archive[..], 19).unwrap();
        assert_eq!(decode(&transport_of(&archive), &served).unwrap(), archive);
    }

    #[test]
    fn what_decodes_to_other_bytes_is_refused() {
        let served = zstd::encode_all(&b"kpack archive"[..], 3).unwrap();
        let other = transport_of(b"kpack archivE");
        assert!(matches!(
            decode(&other, &served),
            Err(DecodeError::WrongHash { .. })
        ));
        let cut = decode(&transport_of(b"kpack archive"), &served[..served.len() - 3]);
        assert!(matches!(cut, Err(DecodeError::Corrupt { .. })), "{cut:?}");
        let garbage = decode(&transport_of(b"x"), b"not zstd at all");
        let garbage = garbage.unwrap_err();
        assert!(matches!(garbage, DecodeError::Corrupt { .. }));
        assert!(garbage.is_integrity());
    }

    #[test]
    fn a_bomb_stops_at_its_pinned_size() {
        let huge = vec![0u8; 64 << 20];
        let served = zstd::encode_all(&huge[..], 3).unwrap();
        assert!(served.len() < 64 << 10, "{}", served.len());
        let small = transport_of(&huge[..4096]);
        let mut decoder = Decoder::new(&small, Vec::new()).unwrap();
        let error = decoder.write_all(&served).unwrap_err();
        assert!(decoder.decoded() <= 4096);
        assert!(matches!(
            decoder.error(error),
            DecodeError::TooLong { pinned: 4096 }
        ));
    }

    #[test]
    fn a_window_past_the_bound_is_refused() {
        let data = vec![7u8; 1 << 20];
        let mut encoder = zstd::stream::raw::Encoder::new(3).unwrap();
        encoder
            .set_parameter(zstd::zstd_safe::CParameter::WindowLog(WINDOW_LOG_MAX + 1))
            .unwrap();
        let mut served = Vec::new();
        {
            let mut writer = zstd::stream::write::Encoder::with_encoder(&mut served, encoder);
            writer.write_all(&data).unwrap();
            writer.finish().unwrap();
        }
        let error = decode(&transport_of(&data), &served).unwrap_err();
        assert!(matches!(error, DecodeError::Corrupt { .. }), "{error:?}");
    }

    #[test]
    fn an_unknown_encoding_is_refused_by_name() {
        let mut brotli = transport_of(b"x");
        brotli.encoding = Encoding::Unknown("br".into());
        let error = Decoder::new(&brotli, Vec::new()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the transport encoding \"br\" is not one this build decodes"
        );
    }
}

//! What one attempt at a file on one mirror came to when it failed: the
//! typed cause ([`AttemptError`]) and what it means for the failover
//! ([`Failure`]: retry here, try the next mirror, or stop).

use super::ClientError;
use crate::limits::LimitError;
use crate::transport::DecodeError;
use crate::Sha256;

/// Why one attempt at a file on one mirror failed. Told on one line, as
/// a mirror's entry in a failover's report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttemptError {
    /// The request or the response's body failed; told with its causes,
    /// which hold the useful part ("connection refused").
    #[error("{}", kpack_error::one_line(.0))]
    Request(#[source] reqwest::Error),
    /// A status that brings no file.
    #[error("HTTP {0}")]
    Status(reqwest::StatusCode),
    /// A cap, the minimum rate or a deadline.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// A directory mirror's file cannot be opened or read; the error names
    /// it.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// A resumed stream's range does not start where it was asked to.
    #[error("asked for bytes from {asked}, got {got:?}")]
    StreamRange { asked: u64, got: Option<u64> },
    /// A resumed download's range does not start where it was asked to.
    #[error("asked for bytes from {asked}, got a range starting at {got:?}")]
    DownloadRange { asked: u64, got: Option<u64> },
    /// The body stopped early, after `arrived` bytes (of `size`, when the
    /// index pins it).
    #[error("{}", interrupted(cause, *arrived, *size))]
    Interrupted {
        #[source]
        cause: Box<AttemptError>,
        arrived: u64,
        size: Option<u64>,
    },
    #[error("the connection ended after {written} of {size} bytes")]
    EndedEarly { written: u64, size: u64 },
    #[error("sha256 {actual}, but the index pins {pinned}{}", if *discarded { "; discarded" } else { "" })]
    WrongHash {
        actual: Sha256,
        pinned: Sha256,
        /// The partial file was emptied.
        discarded: bool,
    },
    #[error("{actual} bytes, but the index pins {pinned}")]
    WrongSize { actual: u64, pinned: u64 },
    #[error("longer than the {pinned} bytes the index pins")]
    TooLong { pinned: u64 },
    /// A transport-encoded file that does not decode to what the index
    /// pins.
    #[error("{}", kpack_error::one_line(.0))]
    Decode(#[source] DecodeError),
}

fn interrupted(cause: &AttemptError, arrived: u64, size: Option<u64>) -> String {
    match size {
        Some(size) => format!("{cause} after {arrived} of {size} bytes"),
        None => format!("{cause} after {arrived} bytes"),
    }
}

/// What became of one attempt.
#[derive(Debug)]
pub(super) enum Failure {
    /// Worth trying again on the same mirror (connection, timeout, 5xx).
    Retry(AttemptError),
    /// This mirror cannot serve the file (wrong bytes, refused).
    NextMirror {
        error: AttemptError,
        integrity: bool,
    },
    /// This mirror does not have the file.
    Missing(AttemptError),
    /// Nothing else will help (local disk).
    Fatal(ClientError),
}

impl From<std::io::Error> for Failure {
    /// A local file-system error: no mirror can help with it.
    fn from(error: std::io::Error) -> Failure {
        Failure::Fatal(ClientError::Cache(error))
    }
}

impl Failure {
    /// Bytes that are not the pinned file: no retry will make them so.
    pub fn integrity(error: AttemptError) -> Failure {
        Failure::NextMirror {
            error,
            integrity: true,
        }
    }

    /// What a status that brings no file means: retry a busy or failing
    /// server, go on from a mirror without the file or refusing it.
    pub fn status(status: reqwest::StatusCode) -> Failure {
        let error = AttemptError::Status(status);
        match status.as_u16() {
            404 | 410 => Failure::Missing(error),
            416 | 429 | 500..=599 => Failure::Retry(error),
            _ => Failure::NextMirror {
                error,
                integrity: false,
            },
        }
    }

    /// A directory mirror's file that cannot be read: another mirror may do.
    pub fn unreadable(error: std::io::Error) -> Failure {
        Failure::NextMirror {
            error: AttemptError::Io(error),
            integrity: false,
        }
    }

    /// A read past a cap: wrong bytes when the signed index pinned the
    /// size, else a file too large to accept; no retry helps either way.
    pub fn over_cap(error: LimitError, pinned: bool) -> Failure {
        Failure::NextMirror {
            error: AttemptError::Limit(error),
            integrity: pinned,
        }
    }

    /// A transport-encoded file that does not decode as pinned: the bytes
    /// served are wrong, unless writing the decoded file failed.
    pub fn decode(error: DecodeError) -> Failure {
        match error {
            DecodeError::Output(error) => Failure::Fatal(ClientError::Cache(error)),
            error => Failure::integrity(AttemptError::Decode(error)),
        }
    }

    /// A request that failed: retried, as a connection error or a timeout is.
    pub fn request(error: reqwest::Error) -> Failure {
        Failure::Retry(AttemptError::Request(error))
    }
}

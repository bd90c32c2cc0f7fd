//! Fetching one file through the one failover over mirrors
//! ([`Failover`](super::failover::Failover)): the attempts it runs (a small
//! file into memory in `small`, a file streamed into a writer in `stream`, a
//! pinned file into the cache with resume and a streaming hash in
//! `download`), each saying what its failure means. Here is what they share:
//! the client's HTTP client, options and progress, reading a body no slower
//! than the minimum rate, and a directory mirror's file.

use std::path::Path;

use fs_err::File;

use super::failure::{AttemptError, Failure};
use super::{ClientOptions, Progress};
use crate::limits::{Cap, LimitError, LowSpeed};

/// What every transfer of a client shares: its HTTP client, its options
/// and where retries and progress are told.
#[derive(Clone, Copy)]
pub(super) struct Transfer<'a> {
    pub http: &'a reqwest::Client,
    pub options: &'a ClientOptions,
    pub progress: &'a dyn Progress,
}

/// The next piece of a body; waits no longer than the low-speed window at
/// a time, and fails once a window has brought too few bytes.
pub(super) async fn next_chunk(
    response: &mut reqwest::Response,
    speed: &mut LowSpeed,
) -> Result<Option<bytes::Bytes>, AttemptError> {
    loop {
        let window_end = tokio::time::Instant::from_std(speed.window_end());
        match tokio::time::timeout_at(window_end, response.chunk()).await {
            Ok(Ok(chunk)) => {
                let length = chunk.as_ref().map_or(0, |c| c.len() as u64);
                speed.received(length, std::time::Instant::now())?;
                return Ok(chunk);
            }
            Ok(Err(e)) => return Err(AttemptError::Request(e)),
            Err(_) => speed.received(0, std::time::Instant::now())?,
        }
    }
}

/// A file of a directory mirror, opened; an absent file is missing there.
pub(super) fn open_mirror_file(file: &Path) -> Result<File, Failure> {
    File::open(file).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Failure::Missing(AttemptError::Io(e)),
        _ => Failure::unreadable(e),
    })
}

/// A read past `cap`: wrong bytes when the signed index pinned the size.
pub(super) fn over_cap(error: LimitError, cap: Cap) -> Failure {
    Failure::over_cap(error, cap.is_pinned())
}

/// A transfer given up for time: retried as a timeout is.
pub(super) fn too_slow(error: LimitError) -> Failure {
    Failure::Retry(AttemptError::Limit(error))
}

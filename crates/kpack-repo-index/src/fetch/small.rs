//! A small file (an index, a signature, a page) read into memory, within
//! its cap and deadline; with a pin, only bytes with that hash are taken.

use std::io::Read;
use std::path::Path;

use super::failover::Failover;
use super::failure::{AttemptError, Failure};
use super::transfer::{next_chunk, open_mirror_file, over_cap, too_slow, Transfer};
use super::{ClientError, Mirror, MirrorFile};
use crate::limits::{Cap, LimitError, LowSpeed};
use crate::Sha256;

/// How a small file is read: the digest it must have, its cap, and the
/// media types asked for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Small<'a> {
    pub pin: Option<Sha256>,
    pub cap: Cap,
    pub accept: Option<&'a str>,
}

impl Small<'_> {
    /// Read within `cap`, unpinned, of any media type.
    pub fn capped(cap: Cap) -> Small<'static> {
        Small {
            pin: None,
            cap,
            accept: None,
        }
    }
}

impl Transfer<'_> {
    /// A small file, into memory, from the first mirror that has it, read
    /// up to its cap; with a pin, only bytes with that hash are taken.
    pub async fn small(
        self,
        mirrors: &[Mirror],
        path: &str,
        small: Small<'_>,
    ) -> Result<Vec<u8>, ClientError> {
        let mut failover = Failover::new(self.options, mirrors, path, self.progress);
        while let Some(location) = failover.next().await {
            match self.read_small(&location, small).await {
                Ok(bytes) => return Ok(bytes),
                Err(failure) => failover.failed(failure)?,
            }
        }
        Err(failover.into_error())
    }

    /// One attempt at a small file; with a pin, other bytes are refused.
    async fn read_small(self, location: &MirrorFile, small: Small<'_>) -> Result<Vec<u8>, Failure> {
        let limits = &self.options.limits;
        let bytes = match location {
            MirrorFile::Url(url) => {
                let deadline = tokio::time::Instant::now() + limits.index_timeout;
                let get = self.get_small(url, small);
                tokio::time::timeout_at(deadline, get)
                    .await
                    .unwrap_or_else(|_| Err(too_slow(LimitError::Deadline(limits.index_timeout))))?
            }
            MirrorFile::File(file) => read_file_small(file, small.cap)?,
        };
        match small.pin {
            Some(pin) if Sha256::of(&bytes) != pin => {
                Err(Failure::integrity(AttemptError::WrongHash {
                    actual: Sha256::of(&bytes),
                    pinned: pin,
                    discarded: false,
                }))
            }
            _ => Ok(bytes),
        }
    }

    /// GET of a small file (asking for the media types `small` names),
    /// refused as soon as it is declared or grows past its cap, or arrives
    /// slower than the minimum rate.
    async fn get_small(
        self,
        url: &str,
        Small { cap, accept, .. }: Small<'_>,
    ) -> Result<Vec<u8>, Failure> {
        let mut request = self.http.get(url);
        if let Some(accept) = accept {
            request = request.header(reqwest::header::ACCEPT, accept);
        }
        let mut response = request.send().await.map_err(Failure::request)?;
        let status = response.status();
        if !status.is_success() {
            return Err(Failure::status(status));
        }
        let declared = response.content_length();
        if let Some(declared) = declared.filter(|d| *d > cap.bytes()) {
            return Err(over_cap(
                LimitError::DeclaredTooLarge { declared, cap },
                cap,
            ));
        }
        let mut bytes = Vec::with_capacity(declared.unwrap_or(0) as usize);
        let mut speed = LowSpeed::new(&self.options.limits);
        while let Some(chunk) = next_chunk(&mut response, &mut speed)
            .await
            .map_err(Failure::Retry)?
        {
            cap.check((bytes.len() + chunk.len()) as u64)
                .map_err(|e| over_cap(e, cap))?;
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }
}

/// A small file of a directory mirror, read to one byte past its cap.
fn read_file_small(file: &Path, cap: Cap) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    open_mirror_file(file)?
        .take(cap.bytes() + 1)
        .read_to_end(&mut bytes)
        .map_err(Failure::unreadable)?;
    cap.check(bytes.len() as u64)
        .map_err(|e| over_cap(e, cap))?;
    Ok(bytes)
}

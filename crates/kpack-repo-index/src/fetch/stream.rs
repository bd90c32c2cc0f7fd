//! A file of any size streamed into a writer, which takes each byte once:
//! a retry, or the next mirror, resumes after the bytes it has taken.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::failover::Failover;
use super::failure::{AttemptError, Failure};
use super::resume::content_range;
use super::transfer::{next_chunk, open_mirror_file, over_cap, Transfer};
use super::{ClientError, Mirror, MirrorFile};
use crate::limits::{Cap, LimitError, LowSpeed};

impl Transfer<'_> {
    /// A file streamed into `out` from the first mirror that has it, at
    /// most `cap` bytes and no slower than the minimum rate. A retry, or
    /// the next mirror, resumes after the bytes `out` has taken (asking for
    /// the rest with a range, or skipping what a server sends again).
    /// `false`, with nothing written, when no mirror has it.
    pub async fn stream(
        self,
        mirrors: &[Mirror],
        path: &str,
        cap: Cap,
        out: &mut dyn Write,
    ) -> Result<bool, ClientError> {
        let mut failover = Failover::new(self.options, mirrors, path, self.progress);
        let mut stream = Stream {
            path,
            out,
            cap,
            written: 0,
        };
        while let Some(location) = failover.next().await {
            let attempt = match &location {
                MirrorFile::Url(url) => stream.http(self, url).await,
                MirrorFile::File(file) => stream.file(file),
            };
            match attempt {
                Ok(()) => return Ok(true),
                Err(failure) => failover.failed(failure)?,
            }
        }
        let error = failover.into_error();
        if stream.written == 0 && error.is_missing() {
            return Ok(false);
        }
        Err(error)
    }
}

/// A file being streamed into a writer, which takes each byte once.
struct Stream<'a> {
    path: &'a str,
    out: &'a mut dyn Write,
    cap: Cap,
    /// Bytes `out` has taken.
    written: u64,
}

impl Stream<'_> {
    /// One GET, for the rest of the file when part of it was written.
    async fn http(&mut self, transfer: Transfer<'_>, url: &str) -> Result<(), Failure> {
        let mut request = transfer.http.get(url);
        if self.written > 0 {
            let range = format!("bytes={}-", self.written);
            request = request.header(reqwest::header::RANGE, range);
        }
        let mut response = request.send().await.map_err(Failure::request)?;
        let mut position = match response.status().as_u16() {
            206 if self.written > 0 => {
                let start = content_range(&response).and_then(|(start, _)| start.parse().ok());
                if start != Some(self.written) {
                    return Err(Failure::Retry(AttemptError::StreamRange {
                        asked: self.written,
                        got: start,
                    }));
                }
                self.written
            }
            200 => 0,
            _ => return Err(Failure::status(response.status())),
        };
        if let Some(declared) = response.content_length().map(|length| position + length) {
            if declared > self.cap.bytes() {
                let cap = self.cap;
                return Err(over_cap(
                    LimitError::DeclaredTooLarge { declared, cap },
                    cap,
                ));
            }
        }
        let mut speed = LowSpeed::new(&transfer.options.limits);
        loop {
            let chunk = match next_chunk(&mut response, &mut speed).await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => return Ok(()),
                Err(error) => {
                    return Err(Failure::Retry(AttemptError::Interrupted {
                        cause: Box::new(error),
                        arrived: self.written,
                        size: None,
                    }));
                }
            };
            self.take(position, &chunk)?;
            position += chunk.len() as u64;
        }
    }

    /// A directory mirror's file, from where the writer is.
    fn file(&mut self, file: &Path) -> Result<(), Failure> {
        let mut file = open_mirror_file(file)?;
        file.seek(SeekFrom::Start(self.written))
            .map_err(Failure::unreadable)?;
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            let n = file.read(&mut buffer).map_err(Failure::unreadable)?;
            let Some(chunk) = buffer.get(..n).filter(|chunk| !chunk.is_empty()) else {
                return Ok(());
            };
            self.take(self.written, chunk)?;
        }
    }

    /// Writes the part of `chunk` (which starts at `position` of the file)
    /// that `out` has not taken yet, within the cap.
    fn take(&mut self, position: u64, chunk: &[u8]) -> Result<(), Failure> {
        let end = position + chunk.len() as u64;
        self.cap.check(end).map_err(|e| over_cap(e, self.cap))?;
        let Some(fresh) = usize::try_from(self.written.saturating_sub(position))
            .ok()
            .and_then(|skip| chunk.get(skip..))
            .filter(|fresh| !fresh.is_empty())
        else {
            return Ok(());
        };
        self.out.write_all(fresh).map_err(|source| {
            Failure::Fatal(ClientError::Output {
                path: self.path.to_owned(),
                source,
            })
        })?;
        self.written = end;
        Ok(())
    }
}

//! Pinned files fetched into the cache, several at once: each resumed from
//! what an earlier attempt (or another process) left, hashed (and decoded)
//! as it arrives, and named by its hash once it matches its pin.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use fs_err::File;
use tokio::task::JoinSet;

use super::failover::Failover;
use super::failure::{AttemptError, Failure};
use super::resume::{check_declared_size, record_origin, resume_point, resume_request};
use super::sink::{Decoding, Sink, Started};
use super::transfer::{next_chunk, open_mirror_file, Transfer};
use super::{Cache, ClientError, ClientOptions, MirrorFile, Progress, Wanted};
use crate::limits::LowSpeed;
use crate::transport::Decoder;

/// Every file of `items` into `cache`, at most `concurrency` at once; the
/// first failure stops the rest.
pub(super) async fn fetch_many(
    http: &reqwest::Client,
    options: &ClientOptions,
    cache: &Cache,
    items: Vec<Wanted>,
    progress: Arc<dyn Progress>,
) -> Result<(), ClientError> {
    let permits = Arc::new(tokio::sync::Semaphore::new(options.concurrency.max(1)));
    let mut tasks = JoinSet::new();
    // Downloads start in the plan's order: a permit is taken before each
    // one is spawned (so `--concurrency 1` fetches one file after the
    // other, in order), and a failure seen meanwhile stops the rest.
    for item in items {
        let permit = permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| ClientError::Setup(Box::new(e)))?;
        while let Some(joined) = tasks.try_join_next() {
            finished(joined).inspect_err(|_| tasks.abort_all())?;
        }
        let http = http.clone();
        let options = options.clone();
        let cache = cache.clone();
        let progress = progress.clone();
        tasks.spawn(async move {
            let _permit = permit;
            let transfer = Transfer {
                http: &http,
                options: &options,
                progress: progress.as_ref(),
            };
            let pinned = Pinned {
                transfer,
                cache: &cache,
                item: &item,
            };
            pinned.fetch().await
        });
    }
    while let Some(joined) = tasks.join_next().await {
        finished(joined).inspect_err(|_| tasks.abort_all())?;
    }
    Ok(())
}

/// What a download task came to.
fn finished(
    joined: Result<Result<(), ClientError>, tokio::task::JoinError>,
) -> Result<(), ClientError> {
    joined.unwrap_or_else(|e| Err(ClientError::Task(e)))
}

/// Runs blocking file work (waiting for a lock, flushing) on a thread of
/// its own, so the other downloads keep going.
async fn off_thread<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, ClientError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ClientError::Setup(Box::new(e)))?
        .map_err(ClientError::Cache)
}

/// Batches in flight between receiving and writing.
const SINK_QUEUE: usize = 4;

/// Bytes received before they are handed to the writer.
const SINK_BATCH: usize = 256 << 10;

/// A pinned file being fetched into the cache.
#[derive(Clone, Copy)]
struct Pinned<'a> {
    transfer: Transfer<'a>,
    cache: &'a Cache,
    item: &'a Wanted,
}

impl Pinned<'_> {
    /// One pinned file into the cache, resuming what an earlier attempt (or
    /// another process) left.
    async fn fetch(self) -> Result<(), ClientError> {
        let Pinned {
            transfer,
            cache,
            item,
        } = self;
        let progress = transfer.progress;
        let sha256 = item.sha256;
        let opener = cache.clone();
        // Another process may be fetching the same file: wait for its lock,
        // then take what it left (complete, or partial to resume).
        let mut file = off_thread(move || opener.open_partial(&sha256)).await?;
        let stored = item.stored();
        if cache.get(&stored.sha256, stored.size).is_some() {
            progress.finish(&item.sha256, true);
            return Ok(());
        }
        let mut failover = Failover::new(
            transfer.options,
            &item.mirrors,
            item.path.as_str(),
            progress,
        );
        loop {
            let Some(location) = failover.next().await else {
                // What a failed download decoded is not kept: the next
                // attempt decodes again whatever it resumes after.
                if item.transport.is_some() {
                    let _ = fs_err::remove_file(cache.decoded_partial(&item.sha256));
                }
                return Err(failover.into_error());
            };
            let attempt = match &location {
                MirrorFile::Url(url) => self.attempt_http(url, &mut file).await,
                MirrorFile::File(source) => self.attempt_file(source, &mut file),
            };
            match attempt {
                Ok(()) => break,
                Err(failure) => failover.failed(failure)?,
            }
        }
        // Durable before it is named by its hash; the flush runs on a
        // blocking thread so other downloads keep going.
        match &item.transport {
            None => {
                let synced = file.try_clone().map_err(ClientError::Cache)?;
                off_thread(move || synced.sync_all()).await?;
                cache.commit(&item.sha256)
            }
            Some(transport) => {
                let decoded = cache.decoded_partial(&item.sha256);
                off_thread(move || File::open(decoded)?.sync_all()).await?;
                cache.commit_decoded(&item.sha256, &transport.decoded.sha256)
            }
        }
        .map_err(ClientError::Cache)?;
        progress.finish(&item.sha256, false);
        Ok(())
    }

    /// An HTTP attempt; when it resumed from bytes kept from before (another
    /// mirror's, or damaged on disk) and the result does not match the pin,
    /// the whole file is fetched once more before this mirror is blamed.
    async fn attempt_http(self, url: &str, file: &mut File) -> Result<(), Failure> {
        let resumed = file.metadata().is_ok_and(|m| m.len() > 0);
        match self.download(url, file).await {
            Err(Failure::NextMirror {
                error,
                integrity: true,
            }) if resumed => {
                let note = format!("{url}: {error}; fetching the whole file again");
                self.transfer.progress.note(&note);
                self.download(url, file).await
            }
            result => result,
        }
    }

    /// One GET of `url` into the partial file, resuming from what it holds.
    /// Whatever fails the pins is dropped, the bytes still buffered
    /// included, before the next attempt on any mirror.
    async fn download(self, url: &str, file: &mut File) -> Result<(), Failure> {
        let Pinned { transfer, item, .. } = self;
        let (response, sink, have) = loop {
            let (response, have) = self.request(url, file).await?;
            if let Some(sink) = self.sink(url, file, have)? {
                break (response, sink, have);
            }
        };
        transfer
            .progress
            .start(&item.sha256, item.path.as_str(), item.size, have);
        let (sink, stopped) = self.receive(response, sink, have).await?;
        if let Some(failure) = stopped {
            return Err(sink.reject(failure));
        }
        let written = sink.written();
        if written < item.size {
            return Err(Failure::Retry(AttemptError::EndedEarly {
                written,
                size: item.size,
            }));
        }
        sink.complete(item)
    }

    /// Sends the GET, for the rest of the file when part of it is kept;
    /// returns the response and where its bytes start in the file.
    async fn request(
        self,
        url: &str,
        file: &mut File,
    ) -> Result<(reqwest::Response, u64), Failure> {
        let Pinned {
            transfer,
            cache,
            item,
        } = self;
        let mut have = file.metadata()?.len();
        if have > item.size {
            file.set_len(0)?;
            have = 0;
        }
        let response = resume_request(transfer.http, cache, url, item, have)
            .send()
            .await
            .map_err(Failure::request)?;
        let have = resume_point(&response, have, url, file, transfer.progress)?;
        check_declared_size(&response, have, item)?;
        record_origin(cache, item, url, &response)?;
        Ok((response, have))
    }

    /// The sink continuing the file after its first `have` bytes; `None`
    /// when those kept bytes do not decode: they are dropped, and the same
    /// mirror is asked again from the first byte (no fault of its own).
    fn sink(self, url: &str, file: &File, have: u64) -> Result<Option<Sink>, Failure> {
        match Sink::start(file.try_clone()?, have, self.decoding()?)? {
            Started::Sink(sink) => Ok(Some(*sink)),
            Started::KeptUndecodable(error) => {
                file.set_len(0)?;
                let note = format!(
                    "{url}: the {have} bytes kept from an earlier download do not decode ({}); fetching the whole file",
                    kpack_error::one_line(&error)
                );
                self.transfer.progress.note(&note);
                Ok(None)
            }
        }
    }

    /// Where a transport-encoded download decodes to, emptied for this
    /// attempt (which decodes again whatever it resumes after).
    fn decoding(self) -> Result<Option<Decoding>, Failure> {
        let Some(transport) = &self.item.transport else {
            return Ok(None);
        };
        let out = File::create(self.cache.decoded_partial(&self.item.sha256))?;
        let kept = out.try_clone()?;
        let out = std::io::BufWriter::with_capacity(1 << 18, out);
        Ok(Some(Decoding {
            decoder: Decoder::new(transport, out).map_err(Failure::decode)?,
            out: kept,
        }))
    }

    /// Receives the body into `sink`, after the `have` bytes kept; returns
    /// the sink, and the failure that stopped the transfer early, if one
    /// did. Receiving runs here; writing and hashing run on a thread of
    /// their own, so the two overlap (on two cores, the difference between
    /// keeping up with the network and not).
    async fn receive(
        self,
        mut response: reqwest::Response,
        sink: Sink,
        have: u64,
    ) -> Result<(Sink, Option<Failure>), Failure> {
        let Pinned { transfer, item, .. } = self;
        let progress = transfer.progress;
        let (chunks, batches) = tokio::sync::mpsc::channel::<Vec<bytes::Bytes>>(SINK_QUEUE);
        let writer = tokio::task::spawn_blocking(move || sink.drain(batches));
        let mut arrived = have;
        let mut batch = Vec::new();
        let mut batched = 0usize;
        let mut stopped = None;
        let mut speed = LowSpeed::new(&transfer.options.limits);
        loop {
            let chunk = match next_chunk(&mut response, &mut speed).await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(error) => {
                    // What arrived stays for the next attempt to resume from.
                    stopped = Some(Failure::Retry(AttemptError::Interrupted {
                        cause: Box::new(error),
                        arrived,
                        size: Some(item.size),
                    }));
                    break;
                }
            };
            if let Err(failure) = item.check_length(arrived + chunk.len() as u64) {
                stopped = Some(failure);
                break;
            }
            arrived += chunk.len() as u64;
            progress.advance(&item.sha256, chunk.len() as u64);
            batched += chunk.len();
            batch.push(chunk);
            // Handing over in batches keeps the writer's wake-ups few.
            if batched >= SINK_BATCH {
                batched = 0;
                if chunks.send(std::mem::take(&mut batch)).await.is_err() {
                    // The writer stopped: its error is below.
                    break;
                }
            }
        }
        if !batch.is_empty() {
            let _ = chunks.send(batch).await;
        }
        drop(chunks);
        let sink = writer
            .await
            .map_err(|e| Failure::Fatal(ClientError::Setup(Box::new(e))))??;
        Ok((sink, stopped))
    }

    /// A file from a directory mirror, copied, hashed (and decoded) in one
    /// pass; bytes refused are not kept.
    fn attempt_file(self, source: &Path, file: &mut File) -> Result<(), Failure> {
        let (item, progress) = (self.item, self.transfer.progress);
        let decoding = self.decoding()?;
        let mut source = open_mirror_file(source)?;
        // Nothing is kept from before: a directory mirror's copy is read whole.
        let mut sink = match Sink::start(file.try_clone()?, 0, decoding)? {
            Started::Sink(sink) => *sink,
            Started::KeptUndecodable(error) => return Err(Failure::decode(error)),
        };
        progress.start(&item.sha256, item.path.as_str(), item.size, 0);
        let mut buffer = vec![0u8; 1 << 18];
        let mut have = 0u64;
        loop {
            let n = match source.read(&mut buffer) {
                Ok(n) => n,
                Err(error) => return Err(sink.reject(Failure::unreadable(error))),
            };
            let Some(chunk) = buffer.get(..n).filter(|chunk| !chunk.is_empty()) else {
                break;
            };
            let written = item.check_length(have + n as u64);
            if let Err(failure) = written.and_then(|()| sink.write(chunk)) {
                return Err(sink.reject(failure));
            }
            have += n as u64;
            progress.advance(&item.sha256, n as u64);
        }
        let size = sink.written();
        if size != item.size {
            return Err(sink.reject(Failure::integrity(AttemptError::WrongSize {
                actual: size,
                pinned: item.size,
            })));
        }
        sink.complete(item)
    }
}

impl Wanted {
    /// Whether `length` bytes can still be the pinned file.
    fn check_length(&self, length: u64) -> Result<(), Failure> {
        if length > self.size {
            return Err(Failure::integrity(AttemptError::TooLong {
                pinned: self.size,
            }));
        }
        Ok(())
    }
}

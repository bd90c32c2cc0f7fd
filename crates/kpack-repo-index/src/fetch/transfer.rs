//! Fetching one file through the one failover over mirrors
//! ([`Failover`]): the attempts it runs (a small file into memory, a file
//! streamed into a writer, a pinned file into the cache with resume and a
//! streaming hash), each saying what its failure means.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use fs_err::File;
use tokio::task::JoinSet;

use super::failover::Failover;
use super::failure::{AttemptError, Failure};
use super::{Cache, ClientError, ClientOptions, Mirror, MirrorFile, Progress, Wanted};
use crate::limits::{Cap, LimitError, LowSpeed};
use crate::transport::{DecodeError, Decoder};
use crate::{HashingWriter, Sha256};

/// What every transfer of a client shares: its HTTP client, its options
/// and where retries and progress are told.
#[derive(Clone, Copy)]
pub(super) struct Transfer<'a> {
    pub http: &'a reqwest::Client,
    pub options: &'a ClientOptions,
    pub progress: &'a dyn Progress,
}

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

/// The next piece of a body; waits no longer than the low-speed window at
/// a time, and fails once a window has brought too few bytes.
async fn next_chunk(
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

/// A file of a directory mirror, opened; an absent file is missing there.
fn open_mirror_file(file: &Path) -> Result<File, Failure> {
    File::open(file).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Failure::Missing(AttemptError::Io(e)),
        _ => Failure::unreadable(e),
    })
}

/// A read past `cap`: wrong bytes when the signed index pinned the size.
fn over_cap(error: LimitError, cap: Cap) -> Failure {
    Failure::over_cap(error, cap.is_pinned())
}

/// A transfer given up for time: retried as a timeout is.
fn too_slow(error: LimitError) -> Failure {
    Failure::Retry(AttemptError::Limit(error))
}

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

/// An HTTP attempt; when it resumed from bytes kept from before (another
/// mirror's, or damaged on disk) and the result does not match the pin,
/// the whole file is fetched once more before this mirror is blamed.
impl Pinned<'_> {
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
}

/// The GET, asking for the rest of the file when part of it is here; the
/// validator goes only to the server that gave it (the bytes are pinned by
/// hash either way).
fn resume_request(
    http: &reqwest::Client,
    cache: &Cache,
    url: &str,
    item: &Wanted,
    have: u64,
) -> reqwest::RequestBuilder {
    let request = http.get(url);
    if have == 0 {
        return request;
    }
    let request = request.header(reqwest::header::RANGE, format!("bytes={have}-"));
    match read_origin(cache, item) {
        Some((origin, validator)) if origin == url && !validator.is_empty() => {
            request.header(reqwest::header::IF_RANGE, validator)
        }
        _ => request,
    }
}

/// Where the response's bytes start in the file, from its status; a status
/// that brings no bytes is the attempt's failure.
fn resume_point(
    response: &reqwest::Response,
    have: u64,
    url: &str,
    file: &File,
    progress: &dyn Progress,
) -> Result<u64, Failure> {
    let status = response.status();
    match status.as_u16() {
        206 if have > 0 => {
            let start = content_range(response).and_then(|(start, _)| start.parse::<u64>().ok());
            if start != Some(have) {
                file.set_len(0)?;
                return Err(Failure::Retry(AttemptError::DownloadRange {
                    asked: have,
                    got: start,
                }));
            }
            Ok(have)
        }
        200 | 206 => {
            if have > 0 {
                progress.note(&format!(
                    "{url}: the server sent the whole file instead of resuming at byte {have}"
                ));
            }
            Ok(0)
        }
        416 => {
            file.set_len(0)?;
            Err(Failure::Retry(AttemptError::Status(status)))
        }
        _ => Err(Failure::status(status)),
    }
}

/// The start and the total of a `Content-Range: bytes START-END/TOTAL`.
fn content_range(response: &reqwest::Response) -> Option<(&str, &str)> {
    let value = response
        .headers()
        .get(reqwest::header::CONTENT_RANGE)?
        .to_str()
        .ok()?
        .strip_prefix("bytes ")?;
    let (range, total) = value.split_once('/')?;
    Some((range.split('-').next()?, total))
}

/// The whole file's size as the server declares it: another size is not
/// the pinned file, and no retry will make it so.
fn check_declared_size(
    response: &reqwest::Response,
    have: u64,
    item: &Wanted,
) -> Result<(), Failure> {
    let declared = if have > 0 {
        content_range(response).and_then(|(_, total)| total.parse::<u64>().ok())
    } else {
        response.content_length()
    };
    match declared {
        Some(declared) if declared != item.size => {
            Err(Failure::integrity(AttemptError::WrongSize {
                actual: declared,
                pinned: item.size,
            }))
        }
        _ => Ok(()),
    }
}

/// Keeps the URL and the server's validator (ETag or Last-Modified) beside
/// the partial file, for `If-Range` when it is resumed.
fn record_origin(
    cache: &Cache,
    item: &Wanted,
    url: &str,
    response: &reqwest::Response,
) -> Result<(), Failure> {
    let validator = [reqwest::header::ETAG, reqwest::header::LAST_MODIFIED]
        .iter()
        .find_map(|name| response.headers().get(name))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    fs_err::write(
        cache.partial_origin(&item.sha256),
        format!("{url}\n{validator}\n"),
    )?;
    Ok(())
}

/// Where a partial file came from: the URL and its validator.
fn read_origin(cache: &Cache, item: &Wanted) -> Option<(String, String)> {
    let text = fs_err::read_to_string(cache.partial_origin(&item.sha256)).ok()?;
    let (url, validator) = text.split_once('\n')?;
    Some((url.to_owned(), validator.trim_end().to_owned()))
}

/// Receives the body into `sink`, after the `have` bytes kept; returns the
/// sink, and the failure that stopped the transfer early, if one did. Receiving
/// runs here; writing and hashing run on a thread of their own, so the two
/// overlap (on two cores, the difference between keeping up with the
/// network and not).
impl Pinned<'_> {
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
}

/// Batches in flight between receiving and writing.
const SINK_QUEUE: usize = 4;

/// Bytes received before they are handed to the writer.
const SINK_BATCH: usize = 256 << 10;

/// How often a download asks the kernel to start writing what arrived.
const WRITEBACK_STEP: u64 = 8 << 20;

/// The partial file being written: hashed as it is written (the bytes kept
/// from an earlier attempt included), handed to the disk as it grows, and
/// for a transport-encoded file, decoded as it grows.
struct Sink {
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
struct Decoding {
    decoder: Decoder<std::io::BufWriter<File>>,
    out: File,
}

/// A sink started, or the bytes kept from before that do not decode.
enum Started {
    Sink(Box<Sink>),
    KeptUndecodable(DecodeError),
}

impl Sink {
    /// Continues `file` after its first `have` bytes (hashed and decoded,
    /// not rewritten); anything beyond them is cut.
    fn start(mut file: File, have: u64, decoding: Option<Decoding>) -> Result<Started, Failure> {
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
    fn write(&mut self, chunk: &[u8]) -> Result<(), Failure> {
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
    fn reject(self, failure: Failure) -> Failure {
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
    fn drain(
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
    fn written(&self) -> u64 {
        self.writer.size()
    }

    /// Checks the whole file against its pins: its hash, and for a
    /// transport-encoded file, what it decoded to (the end of its stream,
    /// size and hash). A mismatch empties the partial file and what it
    /// decoded to. The caller syncs the file (or what it decoded to) and
    /// hands it to the cache.
    fn complete(mut self, item: &Wanted) -> Result<(), Failure> {
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

/// Starts writing `from..to` of `file` to disk without waiting, so the
/// final flush finds little left to do and the disk works while the
/// network does (as dpkg does). Advisory: a failure is ignored.
fn start_writeback(file: &File, from: u64, to: u64) {
    use std::os::unix::io::AsRawFd;
    let (Ok(offset), Ok(length)) = (i64::try_from(from), i64::try_from(to - from)) else {
        return;
    };
    // SAFETY: a valid open descriptor and a byte range; no memory is passed.
    unsafe {
        libc::sync_file_range(
            file.file().as_raw_fd(),
            offset,
            length,
            libc::SYNC_FILE_RANGE_WRITE,
        );
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

impl Pinned<'_> {
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

//! One file from one mirror: resume, streaming hash, and how each failure
//! is handled (retry here, try the next mirror, or stop).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Arc;

use sha2::Digest;
use tokio::task::JoinSet;

use super::{
    is_http, mirror_location, ClientError, ClientOptions, MirrorFailure, Progress, Wanted,
};
use crate::cache::Cache;

/// What became of one attempt.
enum Failure {
    /// Worth trying again on the same mirror (connection, timeout, 5xx).
    Retry(String),
    /// This mirror cannot serve the file (missing, wrong bytes).
    NextMirror { error: String, integrity: bool },
    /// Nothing else will help (local disk).
    Fatal(ClientError),
}

fn local(path: PathBuf) -> impl FnOnce(std::io::Error) -> Failure {
    move |source| Failure::Fatal(ClientError::Local { path, source })
}

pub(super) async fn fetch_unpinned(
    http: &reqwest::Client,
    options: &ClientOptions,
    mirrors: &[String],
    path: &str,
) -> Result<(Vec<u8>, String), ClientError> {
    let mut failures = Vec::new();
    for mirror in mirrors {
        let location = mirror_location(mirror, path);
        let mut last = String::new();
        for attempt in 0..options.attempts.max(1) {
            if attempt > 0 {
                tokio::time::sleep(options.backoff * 2u32.pow(attempt - 1)).await;
            }
            let result = if is_http(mirror) {
                get_small(http, &location).await
            } else {
                let file = location.strip_prefix("file://").unwrap_or(&location);
                match std::fs::read(file) {
                    Ok(bytes) => Ok(bytes),
                    Err(e) => Err((e.to_string(), false)),
                }
            };
            match result {
                Ok(bytes) => return Ok((bytes, location)),
                Err((error, retry)) => {
                    last = error;
                    if !retry {
                        break;
                    }
                }
            }
        }
        failures.push(MirrorFailure {
            url: location,
            error: last,
            integrity: false,
        });
    }
    Err(ClientError::AllMirrorsFailed {
        path: path.to_owned(),
        failures,
    })
}

/// GET of a small file; the error says whether a retry may help.
async fn get_small(http: &reqwest::Client, url: &str) -> Result<Vec<u8>, (String, bool)> {
    let response = http
        .get(url)
        .send()
        .await
        .map_err(|e| (describe(&e), true))?;
    let status = response.status();
    if !status.is_success() {
        let retry = status.is_server_error() || status.as_u16() == 429;
        return Err((format!("HTTP {status}"), retry));
    }
    let bytes = response.bytes().await.map_err(|e| (describe(&e), true))?;
    Ok(bytes.to_vec())
}

/// A reqwest error with its causes, which hold the useful part
/// ("connection refused", "operation timed out").
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

pub(super) async fn fetch_many(
    http: &reqwest::Client,
    options: &ClientOptions,
    cache: &Cache,
    items: Vec<(usize, Wanted)>,
    progress: Arc<dyn Progress>,
) -> Result<(), ClientError> {
    let permits = Arc::new(tokio::sync::Semaphore::new(options.concurrency.max(1)));
    let mut tasks = JoinSet::new();
    for (id, item) in items {
        let permits = permits.clone();
        let http = http.clone();
        let options = options.clone();
        let cache = cache.clone();
        let progress = progress.clone();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await;
            fetch_one(&http, &options, &cache, id, &item, progress.as_ref()).await
        });
    }
    while let Some(joined) = tasks.join_next().await {
        let result = joined.unwrap_or_else(|e| {
            Err(ClientError::Setup {
                message: format!("a download task failed: {e}"),
            })
        });
        if let Err(error) = result {
            tasks.abort_all();
            return Err(error);
        }
    }
    Ok(())
}

async fn fetch_one(
    http: &reqwest::Client,
    options: &ClientOptions,
    cache: &Cache,
    id: usize,
    item: &Wanted,
    progress: &dyn Progress,
) -> Result<(), ClientError> {
    let partial_path = cache.partial(&item.sha256);
    let sha256 = item.sha256;
    let opener = cache.clone();
    // Another process may be fetching the same file: wait for its lock,
    // then take what it left (complete, or partial to resume).
    let mut file = off_thread(&partial_path, move || opener.open_partial(&sha256)).await?;
    if cache.get(&item.sha256, item.size).is_some() {
        progress.finish(id, true);
        return Ok(());
    }
    let mut failures = Vec::new();
    for (index, mirror) in item.mirrors.iter().enumerate() {
        let url = mirror_location(mirror, item.path.as_str());
        let mut last = None;
        for attempt in 0..options.attempts.max(1) {
            if attempt > 0 {
                tokio::time::sleep(options.backoff * 2u32.pow(attempt - 1)).await;
            }
            let result = if is_http(mirror) {
                let resumed = file.metadata().is_ok_and(|m| m.len() > 0);
                match attempt_http(http, cache, &url, id, item, &mut file, progress).await {
                    // The bytes kept from before (another mirror's, or
                    // damaged on disk) may be the wrong ones: fetch the
                    // whole file once before blaming this mirror.
                    Err(Failure::NextMirror {
                        error,
                        integrity: true,
                    }) if resumed => {
                        progress.note(&format!("{url}: {error}; fetching the whole file again"));
                        attempt_http(http, cache, &url, id, item, &mut file, progress).await
                    }
                    result => result,
                }
            } else {
                attempt_dir(cache, &url, id, item, &mut file, progress)
            };
            match result {
                Ok(()) => {
                    // Durable before it is named by its hash; the flush runs
                    // on a blocking thread so other downloads keep going.
                    let synced = file.try_clone();
                    off_thread(&partial_path, move || synced.and_then(|f| f.sync_all())).await?;
                    cache
                        .commit(&item.sha256)
                        .map_err(|source| ClientError::Local {
                            path: cache.blob(&item.sha256),
                            source,
                        })?;
                    progress.finish(id, false);
                    return Ok(());
                }
                Err(Failure::Fatal(error)) => return Err(error),
                Err(Failure::Retry(error)) => {
                    if attempt + 1 < options.attempts {
                        progress.note(&format!("{url}: {error}; retrying"));
                    }
                    last = Some((error, false));
                }
                Err(Failure::NextMirror { error, integrity }) => {
                    last = Some((error, integrity));
                    break;
                }
            }
        }
        if let Some((error, integrity)) = last {
            if index + 1 < item.mirrors.len() {
                progress.note(&format!("{url}: {error}; trying the next mirror"));
            }
            failures.push(MirrorFailure {
                url,
                error,
                integrity,
            });
        }
    }
    Err(ClientError::AllMirrorsFailed {
        path: item.path.to_string(),
        failures,
    })
}

/// Runs blocking file work (waiting for a lock, flushing) on a thread of
/// its own, so the other downloads keep going.
async fn off_thread<T: Send + 'static>(
    path: &std::path::Path,
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, ClientError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ClientError::Setup {
            message: e.to_string(),
        })?
        .map_err(|source| ClientError::Local {
            path: path.to_owned(),
            source,
        })
}

/// Where a partial file came from: the URL and the server's validator
/// (ETag or Last-Modified), for `If-Range`.
fn read_origin(cache: &Cache, item: &Wanted) -> Option<(String, String)> {
    let text = std::fs::read_to_string(cache.partial_origin(&item.sha256)).ok()?;
    let (url, validator) = text.split_once('\n')?;
    Some((url.to_owned(), validator.trim_end().to_owned()))
}

/// Hashes the first `length` bytes already in the partial file.
fn hash_prefix(file: &mut File, length: u64) -> std::io::Result<sha2::Sha256> {
    let mut hasher = sha2::Sha256::new();
    file.seek(SeekFrom::Start(0))?;
    let mut reader = Read::by_ref(file).take(length);
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let n = reader.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hasher)
}

async fn attempt_http(
    http: &reqwest::Client,
    cache: &Cache,
    url: &str,
    id: usize,
    item: &Wanted,
    file: &mut File,
    progress: &dyn Progress,
) -> Result<(), Failure> {
    let partial = cache.partial(&item.sha256);
    let mut have = file.metadata().map_err(local(partial.clone()))?.len();
    if have > item.size {
        file.set_len(0).map_err(local(partial.clone()))?;
        have = 0;
    }
    let mut request = http.get(url);
    if have > 0 {
        request = request.header(reqwest::header::RANGE, format!("bytes={have}-"));
        // The validator is only meaningful to the server that gave it; the
        // bytes are pinned by hash either way.
        if let Some((origin, validator)) = read_origin(cache, item) {
            if origin == url && !validator.is_empty() {
                request = request.header(reqwest::header::IF_RANGE, validator);
            }
        }
    }
    let mut response = request
        .send()
        .await
        .map_err(|e| Failure::Retry(describe(&e)))?;
    let status = response.status();
    match status.as_u16() {
        206 if have > 0 => {
            let start = response
                .headers()
                .get(reqwest::header::CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("bytes "))
                .and_then(|v| v.split('-').next())
                .and_then(|v| v.parse::<u64>().ok());
            if start != Some(have) {
                file.set_len(0).map_err(local(partial.clone()))?;
                return Err(Failure::Retry(format!(
                    "asked for bytes from {have}, got a range starting at {start:?}"
                )));
            }
        }
        200 | 206 => {
            if have > 0 {
                progress.note(&format!(
                    "{url}: the server sent the whole file instead of resuming at byte {have}"
                ));
                have = 0;
            }
        }
        404 | 410 => {
            return Err(Failure::NextMirror {
                error: format!("HTTP {status}"),
                integrity: false,
            })
        }
        416 => {
            file.set_len(0).map_err(local(partial.clone()))?;
            return Err(Failure::Retry(format!("HTTP {status}")));
        }
        429 | 500..=599 => return Err(Failure::Retry(format!("HTTP {status}"))),
        _ => {
            return Err(Failure::NextMirror {
                error: format!("HTTP {status}"),
                integrity: false,
            })
        }
    }
    // The whole file's size as the server declares it: another size is
    // not the pinned file, and no retry will make it so.
    let declared = if have > 0 {
        response
            .headers()
            .get(reqwest::header::CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit('/').next())
            .and_then(|v| v.parse::<u64>().ok())
    } else {
        response.content_length()
    };
    if let Some(declared) = declared.filter(|declared| *declared != item.size) {
        return Err(Failure::NextMirror {
            error: format!("{declared} bytes, but the index pins {}", item.size),
            integrity: true,
        });
    }
    let validator = [reqwest::header::ETAG, reqwest::header::LAST_MODIFIED]
        .iter()
        .find_map(|name| response.headers().get(name))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    std::fs::write(
        cache.partial_origin(&item.sha256),
        format!("{url}\n{validator}\n"),
    )
    .map_err(local(cache.partial_origin(&item.sha256)))?;
    file.set_len(have).map_err(local(partial.clone()))?;
    let hasher = hash_prefix(file, have).map_err(local(partial.clone()))?;
    file.seek(SeekFrom::Start(have))
        .map_err(local(partial.clone()))?;
    progress.start(id, item.path.as_str(), item.size, have);
    // Receiving runs here; writing and hashing run on a thread of their
    // own, so the two overlap (on two cores, the difference between
    // keeping up with the network and not).
    let sink_file = file.try_clone().map_err(local(partial.clone()))?;
    let (chunks, received) = tokio::sync::mpsc::channel::<Vec<bytes::Bytes>>(SINK_QUEUE);
    let mut batch = Vec::new();
    let mut batched = 0usize;
    let sink =
        tokio::task::spawn_blocking(move || write_and_hash(sink_file, have, hasher, received));
    let mut arrived = have;
    let mut stopped = None;
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => break,
            Err(e) => {
                // What arrived stays for the next attempt to resume from.
                stopped = Some(Failure::Retry(format!(
                    "{} after {arrived} of {} bytes",
                    describe(&e),
                    item.size
                )));
                break;
            }
        };
        if arrived + chunk.len() as u64 > item.size {
            stopped = Some(Failure::NextMirror {
                error: format!("longer than the {} bytes the index pins", item.size),
                integrity: true,
            });
            break;
        }
        arrived += chunk.len() as u64;
        progress.advance(id, chunk.len() as u64);
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
    let (written, hasher) = sink
        .await
        .map_err(|e| {
            Failure::Fatal(ClientError::Setup {
                message: e.to_string(),
            })
        })?
        .map_err(local(partial.clone()))?;
    if let Some(failure) = stopped {
        if matches!(failure, Failure::NextMirror { .. }) {
            file.set_len(0).map_err(local(partial.clone()))?;
        }
        return Err(failure);
    }
    if written < item.size {
        return Err(Failure::Retry(format!(
            "the connection ended after {written} of {} bytes",
            item.size
        )));
    }
    finish(file, &partial, hasher, item)
}

/// Batches in flight between receiving and writing.
const SINK_QUEUE: usize = 4;

/// Bytes received before they are handed to the writer.
const SINK_BATCH: usize = 256 << 10;

/// Writes and hashes chunks as they come, starting at `position`; returns
/// where the file ends and the hash so far.
fn write_and_hash(
    file: File,
    mut position: u64,
    mut hasher: sha2::Sha256,
    mut batches: tokio::sync::mpsc::Receiver<Vec<bytes::Bytes>>,
) -> std::io::Result<(u64, sha2::Sha256)> {
    let mut writer = std::io::BufWriter::with_capacity(1 << 18, file);
    let mut written_back = position;
    while let Some(batch) = batches.blocking_recv() {
        for chunk in &batch {
            writer.write_all(chunk)?;
            hasher.update(chunk);
            position += chunk.len() as u64;
        }
        if position - written_back >= WRITEBACK_STEP {
            writer.flush()?;
            start_writeback(writer.get_ref(), written_back, position);
            written_back = position;
        }
    }
    writer.flush()?;
    Ok((position, hasher))
}

/// How often a download asks the kernel to start writing what arrived.
const WRITEBACK_STEP: u64 = 8 << 20;

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
            file.as_raw_fd(),
            offset,
            length,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

/// Checks the completed partial file's hash; the caller syncs it and hands
/// it to the cache.
fn finish(
    file: &mut File,
    partial: &std::path::Path,
    hasher: sha2::Sha256,
    item: &Wanted,
) -> Result<(), Failure> {
    let actual = kpack_repo_index::Sha256::from_bytes(hasher.finalize().into());
    if actual != item.sha256 {
        file.set_len(0).map_err(local(partial.to_owned()))?;
        return Err(Failure::NextMirror {
            error: format!(
                "sha256 {actual}, but the index pins {}; discarded",
                item.sha256
            ),
            integrity: true,
        });
    }
    Ok(())
}

/// A file from a directory mirror, copied and hashed in one pass.
fn attempt_dir(
    cache: &Cache,
    location: &str,
    id: usize,
    item: &Wanted,
    file: &mut File,
    progress: &dyn Progress,
) -> Result<(), Failure> {
    let partial = cache.partial(&item.sha256);
    let source_path = location.strip_prefix("file://").unwrap_or(location);
    let mut source = match File::open(source_path) {
        Ok(source) => source,
        Err(e) => {
            return Err(Failure::NextMirror {
                error: e.to_string(),
                integrity: false,
            })
        }
    };
    file.set_len(0).map_err(local(partial.clone()))?;
    file.seek(SeekFrom::Start(0))
        .map_err(local(partial.clone()))?;
    progress.start(id, item.path.as_str(), item.size, 0);
    let mut hasher = sha2::Sha256::new();
    let mut buffer = vec![0u8; 1 << 18];
    let mut have = 0u64;
    let mut written_back = 0u64;
    loop {
        let n = source.read(&mut buffer).map_err(|e| Failure::NextMirror {
            error: e.to_string(),
            integrity: false,
        })?;
        if n == 0 {
            break;
        }
        if have + n as u64 > item.size {
            return Err(Failure::NextMirror {
                error: format!("longer than the {} bytes the index pins", item.size),
                integrity: true,
            });
        }
        file.write_all(&buffer[..n])
            .map_err(local(partial.clone()))?;
        hasher.update(&buffer[..n]);
        have += n as u64;
        progress.advance(id, n as u64);
        if have - written_back >= WRITEBACK_STEP {
            start_writeback(file, written_back, have);
            written_back = have;
        }
    }
    if have != item.size {
        return Err(Failure::NextMirror {
            error: format!("{have} bytes, but the index pins {}", item.size),
            integrity: true,
        });
    }
    finish(file, &partial, hasher, item)
}

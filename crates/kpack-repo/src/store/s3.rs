//! A repository in an S3-compatible bucket, through opendal: create-only
//! writes are `If-None-Match: *` (multipart uploads too, on completion),
//! the swap of the root is `If-Match` on the ETag read.

use std::future::IntoFuture;
use std::io::Read;
use std::path::Path;

use opendal::{ErrorKind, Operator};

use super::{Body, CacheControl, Created, Etag, StoreError, StoredObject, Versioned};
use kpack_repo_index::types::Timestamp;

/// Files above this size go up as multipart uploads, in parts of it.
pub const DEFAULT_PART_SIZE: usize = 8 << 20;

/// Parts of one upload in flight at once (memory: about this many parts).
const PARTS_IN_FLIGHT: usize = 4;

/// How to reach the bucket; credentials and region come from the usual
/// `AWS_*` environment.
#[derive(Debug, Clone)]
pub struct S3Options {
    /// The S3 API's base URL (a local store's). An endpoint means
    /// path-style addressing, as local stores need.
    pub endpoint: Option<String>,
    /// The bucket's region; `us-east-1` when unset.
    pub region: Option<String>,
    /// Multipart part size in bytes (S3's minimum is 5 MiB).
    pub part_size: usize,
}

impl Default for S3Options {
    fn default() -> Self {
        S3Options {
            endpoint: None,
            region: None,
            part_size: DEFAULT_PART_SIZE,
        }
    }
}

/// A bucket and prefix, with the runtime its client's calls run on.
#[derive(Debug)]
pub struct S3Store {
    operator: Operator,
    runtime: tokio::runtime::Runtime,
    bucket: String,
    prefix: String,
    part_size: usize,
}

impl S3Store {
    pub fn open(bucket: &str, prefix: &str, options: &S3Options) -> Result<S3Store, StoreError> {
        let location = format!("s3://{bucket}/{prefix}");
        let failed = |error| StoreError::S3 {
            location: location.clone(),
            error,
        };
        // The ring provider, installed once per process; a second install
        // is refused harmlessly.
        let _ = rustls::crypto::ring::default_provider().install_default();
        opendal_http_transport_reqwest::install_default();
        let endpoint = options.endpoint.clone();
        let region = options.region.as_deref().unwrap_or("us-east-1");
        let mut builder = opendal::services::S3::default()
            .bucket(bucket)
            .root(&format!("/{prefix}"))
            .region(region);
        builder = match &endpoint {
            Some(endpoint) => builder.endpoint(endpoint).disable_ec2_metadata(),
            None => builder.enable_virtual_host_style(),
        };
        let operator = Operator::new(builder).map_err(failed)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(S3Store {
            operator,
            runtime,
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
            part_size: options.part_size.max(5 << 20),
        })
    }

    /// `s3://bucket/prefix/key`, for messages.
    pub fn url(&self, key: &str) -> String {
        match self.prefix.as_str() {
            "" => format!("s3://{}/{key}", self.bucket),
            prefix => format!("s3://{}/{prefix}/{key}", self.bucket),
        }
    }

    /// The last segment of the prefix, or the bucket's name for a bucket's
    /// root.
    pub fn leaf_name(&self) -> &str {
        match self.prefix.trim_end_matches('/').rsplit('/').next() {
            Some(segment) if !segment.is_empty() => segment,
            _ => &self.bucket,
        }
    }

    fn error(&self, key: &str) -> impl FnOnce(opendal::Error) -> StoreError + '_ {
        let location = self.url(key);
        move |error| StoreError::S3 { location, error }
    }

    pub fn read(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        // The ETag of exactly the bytes read: stat, then read only if the
        // object is still that version (a publisher may swap it between).
        for _ in 0..8 {
            let metadata = match self.runtime.block_on(self.operator.stat(key)) {
                Ok(metadata) => metadata,
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(self.error(key)(e)),
            };
            let etag = metadata.etag().unwrap_or_default().to_owned();
            let read = self
                .runtime
                .block_on(self.operator.read_with(key).if_match(&etag).into_future());
            match read {
                Ok(buffer) => {
                    return Ok(Some(Versioned {
                        bytes: buffer.to_vec(),
                        etag: Etag(etag),
                    }))
                }
                Err(e)
                    if matches!(e.kind(), ErrorKind::ConditionNotMatch | ErrorKind::NotFound) =>
                {
                    continue
                }
                Err(e) => return Err(self.error(key)(e)),
            }
        }
        Err(self.error(key)(opendal::Error::new(
            ErrorKind::Unexpected,
            "changed on every read",
        )))
    }

    pub fn etag(&self, key: &str) -> Result<Option<Etag>, StoreError> {
        match self.runtime.block_on(self.operator.stat(key)) {
            Ok(metadata) => Ok(Some(Etag(metadata.etag().unwrap_or_default().to_owned()))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.error(key)(e)),
        }
    }

    pub fn reader(&self, key: &str) -> Result<Option<Box<dyn Read + '_>>, StoreError> {
        let size = match self.runtime.block_on(self.operator.stat(key)) {
            Ok(metadata) => metadata.content_length(),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.error(key)(e)),
        };
        let reader = self
            .runtime
            .block_on(self.operator.reader(key))
            .map_err(self.error(key))?;
        Ok(Some(Box::new(ObjectReader {
            store: self,
            key: key.to_owned(),
            reader,
            offset: 0,
            size,
            chunk: Vec::new(),
            position: 0,
        })))
    }

    pub fn create(
        &self,
        key: &str,
        body: Body<'_>,
        cache: CacheControl,
    ) -> Result<Created, StoreError> {
        let written = match body {
            Body::Bytes(bytes) => self.runtime.block_on(
                self.operator
                    .write_with(key, bytes.to_vec())
                    .if_not_exists(true)
                    .cache_control(cache.header())
                    .into_future(),
            ),
            Body::File(path) => self.upload(key, path, cache),
        };
        match written {
            Ok(_) => Ok(Created::Created),
            Err(e) if e.kind() == ErrorKind::ConditionNotMatch => Ok(Created::Exists),
            Err(e) => Err(self.error(key)(e)),
        }
    }

    /// Streams `path` up create-only: one request when small, else a
    /// multipart upload of `part_size` parts (aborted on failure, so no
    /// parts are left behind), memory bounded by a part or two.
    fn upload(
        &self,
        key: &str,
        path: &Path,
        cache: CacheControl,
    ) -> opendal::Result<opendal::Metadata> {
        let io = |e: std::io::Error| {
            opendal::Error::new(ErrorKind::Unexpected, format!("{}: {e}", path.display()))
        };
        let mut file = fs_err::File::open(path).map_err(io)?;
        self.runtime.block_on(async {
            let mut writer = self
                .operator
                .writer_with(key)
                .if_not_exists(true)
                .cache_control(cache.header())
                .chunk(self.part_size)
                .concurrent(PARTS_IN_FLIGHT)
                .await?;
            let result = async {
                loop {
                    let mut part = vec![0; self.part_size];
                    let filled = read_full(&mut file, &mut part).map_err(io)?;
                    if filled == 0 {
                        break;
                    }
                    part.truncate(filled);
                    writer.write(part).await?;
                }
                writer.close().await
            }
            .await;
            if result.is_err() {
                // Best effort: the failure itself is what to report.
                let _ = writer.abort().await;
            }
            result
        })
    }

    pub fn swap(
        &self,
        key: &str,
        bytes: &[u8],
        expected: Option<&Etag>,
        cache: CacheControl,
    ) -> Result<Option<Etag>, StoreError> {
        let write = self
            .operator
            .write_with(key, bytes.to_vec())
            .cache_control(cache.header());
        let write = match expected {
            Some(etag) => write.if_match(&etag.0),
            None => write.if_not_exists(true),
        };
        match self.runtime.block_on(write.into_future()) {
            Ok(metadata) => match metadata.etag() {
                Some(etag) => Ok(Some(Etag(etag.to_owned()))),
                None => Ok(Some(self.etag(key)?.unwrap_or(Etag(String::new())))),
            },
            // Conflict: another conditional write to the key was under way.
            Err(e) if matches!(e.kind(), ErrorKind::ConditionNotMatch | ErrorKind::Conflict) => {
                Ok(None)
            }
            Err(e) => Err(self.error(key)(e)),
        }
    }

    pub fn put(&self, key: &str, bytes: &[u8], cache: CacheControl) -> Result<(), StoreError> {
        let write = self
            .operator
            .write_with(key, bytes.to_vec())
            .cache_control(cache.header());
        self.runtime
            .block_on(write.into_future())
            .map(drop)
            .map_err(self.error(key))
    }

    /// The objects under `prefix`, at any depth.
    pub fn list(&self, prefix: &str) -> Result<Vec<StoredObject>, StoreError> {
        let listed = self
            .runtime
            .block_on(
                self.operator
                    .list_with(prefix)
                    .recursive(true)
                    .into_future(),
            )
            .map_err(self.error(prefix))?;
        let mut objects = Vec::new();
        for entry in listed {
            let metadata = entry.metadata();
            if !metadata.is_file() {
                continue;
            }
            let modified = metadata
                .last_modified()
                .map_or_else(Timestamp::now, |t| Timestamp(t.into()));
            objects.push(StoredObject {
                key: entry.path().to_owned(),
                size: metadata.content_length(),
                modified,
            });
        }
        Ok(objects)
    }

    pub fn delete(&self, key: &str) -> Result<(), StoreError> {
        match self.runtime.block_on(self.operator.delete(key)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.error(key)(e)),
        }
    }

    /// Writes one fresh probe key twice create-only: the second write must
    /// be refused. The key is removed afterwards.
    pub fn check_conditional_writes(&self) -> Result<(), StoreError> {
        let key = format!(
            ".kpack-probe/{}-{}",
            std::process::id(),
            jiff::Timestamp::now().as_nanosecond()
        );
        let first = self.create(&key, Body::Bytes(b"probe"), CacheControl::NoCache)?;
        let second = self.create(&key, Body::Bytes(b"probe"), CacheControl::NoCache);
        self.delete(&key)?;
        match (first, second?) {
            (Created::Created, Created::Exists) => Ok(()),
            _ => Err(StoreError::NoConditionalWrites {
                location: self.url(""),
            }),
        }
    }
}

/// Fills `buffer` from `file` as far as it goes; the count read.
fn read_full(file: &mut impl Read, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// Reads an object in ranged requests of a few MiB.
struct ObjectReader<'a> {
    store: &'a S3Store,
    key: String,
    reader: opendal::Reader,
    offset: u64,
    size: u64,
    chunk: Vec<u8>,
    position: usize,
}

impl Read for ObjectReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.position == self.chunk.len() {
            if self.offset >= self.size {
                return Ok(0);
            }
            let end = (self.offset + (8 << 20)).min(self.size);
            let range = self.offset..end;
            let buffer = self
                .store
                .runtime
                .block_on(self.reader.read(range))
                .map_err(|e| std::io::Error::other(self.store.error(&self.key)(e)))?;
            self.chunk = buffer.to_vec();
            self.position = 0;
            self.offset = end;
            if self.chunk.is_empty() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("{}: ended early", self.store.url(&self.key)),
                ));
            }
        }
        let n = buf.len().min(self.chunk.len() - self.position);
        buf[..n].copy_from_slice(&self.chunk[self.position..self.position + n]);
        self.position += n;
        Ok(n)
    }
}

impl std::fmt::Debug for ObjectReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectReader")
            .field("key", &self.key)
            .finish()
    }
}

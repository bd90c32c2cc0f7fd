//! The archive writer: streams code objects into the blob region as they
//! come and appends the TOC at the end.
//!
//! Memory stays bounded by the TOC (a few dozen bytes per entry) plus the
//! code objects in flight: nothing already written is kept. Identical code
//! objects are stored once and share an ordinal. The output depends only on
//! the order of `add` calls, never on timing, so callers that compress in
//! parallel (see [`PreparedBlob`]) get the same bytes with any thread count.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Seek, SeekFrom, Write};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::format::{
    encode_header, key, Metadata, Scheme, BLOB_REGION_OFFSET, DEFAULT_ZSTD_LEVEL, ENTRY_TYPE_HSACO,
    HEADER_SIZE, TOC_FORMAT_VERSION,
};
use crate::target::Target;

/// How the writer stores code objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Stored as is (scheme `none`).
    None,
    /// One zstd frame per code object at this level (scheme
    /// `zstd-per-kernel`).
    Zstd { level: i32 },
}

impl Compression {
    /// zstd at the reference's default level 3.
    pub const DEFAULT: Compression = Compression::Zstd {
        level: DEFAULT_ZSTD_LEVEL,
    };

    /// The scheme this writes.
    pub fn scheme(self) -> Scheme {
        match self {
            Compression::None => Scheme::None,
            Compression::Zstd { .. } => Scheme::ZstdPerKernel,
        }
    }
}

impl Default for Compression {
    fn default() -> Self {
        Compression::DEFAULT
    }
}

/// A TOC key. For a binary's code object: where it came from, a path
/// relative to the install root, and the index of the code object for its
/// target in that binary, displayed as `lib/librocrand.so.1.1#0`. For other
/// entries, such as kernel database files, a name used as is
/// (`rocblas/gfx90a/TensileLibrary_gfx90a.co`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BinaryKey {
    path: String,
    index: Option<u32>,
}

impl BinaryKey {
    /// A key for `path` (`\` normalised to `/`) and bundle index `index`.
    pub fn new(path: &str, index: u32) -> BinaryKey {
        BinaryKey {
            path: path.replace('\\', "/"),
            index: Some(index),
        }
    }

    /// A key written as `name` (`\` normalised to `/`), without a `#N`
    /// suffix: for entries that are not a binary's code objects, which
    /// readers look up by that name (`kpack_get_kernel`).
    pub fn named(name: &str) -> BinaryKey {
        BinaryKey {
            path: name.replace('\\', "/"),
            index: None,
        }
    }

    /// The binary's path relative to the install root (a named key's whole
    /// name).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The `#N` index; `None` for a named key.
    pub fn index(&self) -> Option<u32> {
        self.index
    }
}

impl fmt::Display for BinaryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(index) => write!(f, "{}#{index}", self.path),
            None => f.write_str(&self.path),
        }
    }
}

/// Optional per-entry metadata, as the reference tooling writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryMetadata {
    /// The bundle triple the code object came from.
    pub bundle_triple: String,
    /// The install-root prefix the binary key is relative to.
    pub source_prefix: String,
}

impl From<EntryMetadata> for Metadata {
    /// The reference tooling's map: `{target, source_prefix}`.
    fn from(metadata: EntryMetadata) -> Metadata {
        Metadata::new()
            .with(key::META_TARGET, metadata.bundle_triple)
            .with(key::META_SOURCE_PREFIX, metadata.source_prefix)
    }
}

/// Archive-wide fields of the TOC.
#[derive(Debug, Clone)]
pub struct ArchiveOptions {
    /// `group_name`, e.g. `rocm`.
    pub group: String,
    /// `gfx_arch_family`: a family name or a single target.
    pub family: String,
    /// `gfx_arches`. When empty, the targets added, in first-seen order.
    /// When given, every target added for a binary must be one of them;
    /// named entries ([`BinaryKey::named`]) may have others, since readers
    /// ask for them by key and target while the loader chooses a binary's
    /// target by this list.
    pub arches: Vec<Target>,
    pub compression: Compression,
}

/// A code object hashed and, for zstd, compressed: the expensive part of
/// adding, which callers may do on any thread before [`ArchiveWriter::add_prepared`].
#[derive(Debug, Clone)]
pub struct PreparedBlob {
    digest: [u8; 32],
    original_size: u64,
    stored: Vec<u8>,
}

/// How much of a large code object is read before the pages under it are
/// handed back ([`PreparedBlob::new_streamed`]).
const PIECE_BYTES: usize = 8 * 1024 * 1024;

impl PreparedBlob {
    /// Hashes and compresses `code_object` as `compression` says.
    pub fn new(compression: Compression, code_object: &[u8]) -> Result<PreparedBlob> {
        PreparedBlob::with_digest(compression, code_object, digest(code_object))
    }

    /// As [`new`](Self::new), calling `done` with each piece of
    /// `code_object` once it is hashed and compressed, so that a caller
    /// reading a mapped file can drop its pages as it goes: memory stays
    /// bounded by a piece (8 MiB), not by a code object of hundreds of
    /// megabytes (rocBLAS's Tensile libraries). Code objects of one piece
    /// or less are stored exactly as `new` stores them.
    pub fn new_streamed(
        compression: Compression,
        code_object: &[u8],
        done: impl Fn(&[u8]),
    ) -> Result<PreparedBlob> {
        let level = match compression {
            Compression::Zstd { level } if code_object.len() > PIECE_BYTES => level,
            Compression::None if code_object.len() > PIECE_BYTES => {
                return Ok(copy_streamed(code_object, done));
            }
            _ => {
                let blob = PreparedBlob::new(compression, code_object)?;
                done(code_object);
                return Ok(blob);
            }
        };
        let (digest, stored) = compress_frame_streamed(code_object, level, &done)?;
        Ok(PreparedBlob {
            digest,
            original_size: code_object.len() as u64,
            stored,
        })
    }

    fn with_digest(
        compression: Compression,
        code_object: &[u8],
        digest: [u8; 32],
    ) -> Result<PreparedBlob> {
        let stored = match compression {
            Compression::None => code_object.to_vec(),
            Compression::Zstd { level } => compress_frame(code_object, level)?,
        };
        Ok(PreparedBlob {
            digest,
            original_size: code_object.len() as u64,
            stored,
        })
    }

    /// Size of the code object before compression.
    pub fn original_size(&self) -> u64 {
        self.original_size
    }

    /// Size of the bytes the archive stores for it.
    pub fn stored_size(&self) -> u64 {
        self.stored.len() as u64
    }
}

/// A zstd failure while compressing a frame.
fn frame_error(code: usize) -> Error {
    Error::Write {
        what: "a zstd frame",
        source: io::Error::other(zstd::zstd_safe::get_error_name(code)),
    }
}

/// A compression context for frames as the format requires them: the
/// content size in the header, no checksum.
fn frame_context(level: i32) -> Result<zstd::zstd_safe::CCtx<'static>> {
    use zstd::zstd_safe::{CCtx, CParameter};
    let mut context = CCtx::try_create().ok_or(Error::OutOfMemory { size: 0 })?;
    for parameter in [
        CParameter::CompressionLevel(level),
        CParameter::ContentSizeFlag(true),
        CParameter::ChecksumFlag(false),
    ] {
        context.set_parameter(parameter).map_err(frame_error)?;
    }
    Ok(context)
}

/// One zstd frame of `data`.
fn compress_frame(data: &[u8], level: i32) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(data.len()));
    frame_context(level)?
        .compress2(&mut out, data)
        .map_err(frame_error)?;
    Ok(out)
}

/// One zstd frame of `data` (its size pledged, so the header records it),
/// hashed and compressed a piece at a time, `done` called with each piece.
fn compress_frame_streamed(
    data: &[u8],
    level: i32,
    done: &dyn Fn(&[u8]),
) -> Result<([u8; 32], Vec<u8>)> {
    use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective;
    use zstd::zstd_safe::{InBuffer, OutBuffer};
    let mut context = frame_context(level)?;
    context
        .set_pledged_src_size(Some(data.len() as u64))
        .map_err(frame_error)?;
    let mut hasher = Sha256::new();
    let mut out = Vec::new();
    let mut step = |input: &mut InBuffer<'_>, end| -> Result<usize> {
        out.reserve(zstd::zstd_safe::CCtx::out_size());
        let at = out.len();
        let mut output = OutBuffer::around_pos(&mut out, at);
        context
            .compress_stream2(&mut output, input, end)
            .map_err(frame_error)
    };
    for piece in data.chunks(PIECE_BYTES) {
        hasher.update(piece);
        let mut input = InBuffer::around(piece);
        while input.pos() < piece.len() {
            step(&mut input, ZSTD_EndDirective::ZSTD_e_continue)?;
        }
        done(piece);
    }
    while step(&mut InBuffer::around(&[]), ZSTD_EndDirective::ZSTD_e_end)? > 0 {}
    Ok((hasher.finalize().into(), out))
}

/// A code object stored as is, hashed and copied a piece at a time, `done`
/// called with each piece.
fn copy_streamed(data: &[u8], done: impl Fn(&[u8])) -> PreparedBlob {
    let mut hasher = Sha256::new();
    let mut stored = Vec::with_capacity(data.len());
    for piece in data.chunks(PIECE_BYTES) {
        hasher.update(piece);
        stored.extend_from_slice(piece);
        done(piece);
    }
    PreparedBlob {
        digest: hasher.finalize().into(),
        original_size: data.len() as u64,
        stored,
    }
}

fn digest(data: &[u8]) -> [u8; 32] {
    Sha256::digest(data).into()
}

#[derive(Debug)]
struct Entry {
    target: Target,
    ordinal: u32,
    original_size: u64,
    metadata: Option<Metadata>,
}

/// Writes one archive to a seekable sink (usually a temporary file that
/// the caller renames into place).
#[derive(Debug)]
pub struct ArchiveWriter<W: Write + Seek> {
    out: W,
    options: ArchiveOptions,
    derive_arches: bool,
    /// Bytes written so far, header included.
    position: u64,
    binaries: Vec<(String, Vec<Entry>)>,
    binary_index: HashMap<String, usize>,
    /// Content digest -> ordinal, for deduplication.
    stored: HashMap<([u8; 32], u64), u32>,
    /// `(offset, size)` per ordinal, for scheme `none`.
    blob_ranges: Vec<(u64, u64)>,
    frame_count: u32,
}

impl<W: Write + Seek> ArchiveWriter<W> {
    /// Starts an archive: writes the provisional header and, for zstd, the
    /// placeholder frame count.
    pub fn new(mut out: W, options: ArchiveOptions) -> Result<ArchiveWriter<W>> {
        let io = |source| Error::Write {
            what: "the archive header",
            source,
        };
        out.write_all(&encode_header(0)).map_err(io)?;
        let mut position = HEADER_SIZE as u64;
        if options.compression.scheme() == Scheme::ZstdPerKernel {
            out.write_all(&0u32.to_le_bytes()).map_err(io)?;
            position += 4;
        }
        Ok(ArchiveWriter {
            out,
            derive_arches: options.arches.is_empty(),
            options,
            position,
            binaries: Vec::new(),
            binary_index: HashMap::new(),
            stored: HashMap::new(),
            blob_ranges: Vec::new(),
            frame_count: 0,
        })
    }

    /// The compression this writer was created with.
    pub fn compression(&self) -> Compression {
        self.options.compression
    }

    /// Adds a code object, compressing it on this thread.
    pub fn add(&mut self, binary: &BinaryKey, target: &Target, code_object: &[u8]) -> Result<()> {
        self.check_new_entry(binary, target)?;
        let digest = digest(code_object);
        let size = code_object.len() as u64;
        let ordinal = match self.stored.get(&(digest, size)) {
            Some(&ordinal) => ordinal,
            None => {
                let blob =
                    PreparedBlob::with_digest(self.options.compression, code_object, digest)?;
                self.store(&blob)?
            }
        };
        self.add_entry(binary, target, ordinal, size, None);
        Ok(())
    }

    /// Adds a code object prepared (hashed and compressed) elsewhere, with
    /// optional entry metadata as the reference tooling writes it. A blob
    /// identical to one already stored is not written again.
    pub fn add_prepared(
        &mut self,
        binary: &BinaryKey,
        target: &Target,
        blob: PreparedBlob,
        metadata: Option<EntryMetadata>,
    ) -> Result<()> {
        self.add_prepared_with_metadata(binary, target, blob, metadata.map(Metadata::from))
    }

    /// As [`add_prepared`](Self::add_prepared), with any string metadata
    /// (kernel database files record their library and path).
    pub fn add_prepared_with_metadata(
        &mut self,
        binary: &BinaryKey,
        target: &Target,
        blob: PreparedBlob,
        metadata: Option<Metadata>,
    ) -> Result<()> {
        self.check_new_entry(binary, target)?;
        let ordinal = match self.stored.get(&(blob.digest, blob.original_size)) {
            Some(&ordinal) => ordinal,
            None => self.store(&blob)?,
        };
        self.add_entry(binary, target, ordinal, blob.original_size, metadata);
        Ok(())
    }

    /// Whether a code object with these contents is already stored, so a
    /// caller can skip compressing it again.
    pub fn contains(&self, code_object: &[u8]) -> bool {
        self.stored
            .contains_key(&(digest(code_object), code_object.len() as u64))
    }

    fn check_new_entry(&self, binary: &BinaryKey, target: &Target) -> Result<()> {
        let listed = self.derive_arches || self.options.arches.contains(target);
        if !listed && binary.index().is_some() {
            return Err(Error::InvalidInput(format!(
                "{binary}: target {target} is not among the archive's targets"
            )));
        }
        let key = binary.to_string();
        if let Some(&index) = self.binary_index.get(&key) {
            if self.binaries[index].1.iter().any(|e| e.target == *target) {
                return Err(Error::InvalidInput(format!(
                    "{key}: a code object for {target} was already added"
                )));
            }
        }
        Ok(())
    }

    /// Writes a blob not stored yet and records it for deduplication.
    fn store(&mut self, blob: &PreparedBlob) -> Result<u32> {
        let io = |source| Error::Write {
            what: "the blob region",
            source,
        };
        let ordinal = match self.options.compression {
            Compression::None => {
                self.blob_ranges
                    .push((self.position, blob.stored.len() as u64));
                self.blob_ranges.len() - 1
            }
            Compression::Zstd { .. } => {
                let size = u32::try_from(blob.stored.len()).map_err(|_| {
                    Error::InvalidInput("a compressed code object is 4 GiB or larger".into())
                })?;
                self.out.write_all(&size.to_le_bytes()).map_err(io)?;
                self.position += 4;
                self.frame_count += 1;
                self.frame_count as usize - 1
            }
        };
        let ordinal = u32::try_from(ordinal)
            .map_err(|_| Error::InvalidInput("more than 2^32 code objects".into()))?;
        self.out.write_all(&blob.stored).map_err(io)?;
        self.position += blob.stored.len() as u64;
        self.stored
            .insert((blob.digest, blob.original_size), ordinal);
        Ok(ordinal)
    }

    fn add_entry(
        &mut self,
        binary: &BinaryKey,
        target: &Target,
        ordinal: u32,
        original_size: u64,
        metadata: Option<Metadata>,
    ) {
        if self.derive_arches && !self.options.arches.contains(target) {
            self.options.arches.push(target.clone());
        }
        let key = binary.to_string();
        let index = match self.binary_index.get(&key) {
            Some(&index) => index,
            None => {
                self.binaries.push((key.clone(), Vec::new()));
                self.binary_index.insert(key, self.binaries.len() - 1);
                self.binaries.len() - 1
            }
        };
        self.binaries[index].1.push(Entry {
            target: target.clone(),
            ordinal,
            original_size,
            metadata,
        });
    }

    /// Appends the TOC, patches the header and returns the sink.
    pub fn finish(mut self) -> Result<W> {
        let toc = self.encode_toc();
        let io = |what| move |source| Error::Write { what, source };
        self.out
            .write_all(&toc)
            .map_err(io("the table of contents"))?;
        self.out
            .seek(SeekFrom::Start(0))
            .map_err(io("the archive header"))?;
        self.out
            .write_all(&encode_header(self.position))
            .map_err(io("the archive header"))?;
        if self.options.compression.scheme() == Scheme::ZstdPerKernel {
            self.out
                .write_all(&self.frame_count.to_le_bytes())
                .map_err(io("the frame count"))?;
        }
        self.out.seek(SeekFrom::End(0)).map_err(io("the archive"))?;
        self.out.flush().map_err(io("the archive"))?;
        Ok(self.out)
    }

    fn encode_toc(&self) -> Vec<u8> {
        use rmp::encode::{write_array_len, write_map_len, write_str, write_uint};
        // Writing into a Vec cannot fail.
        let mut t = Vec::with_capacity(256 + 64 * self.binaries.len());
        let buf = &mut t;
        let scheme = self.options.compression.scheme();
        let _ = write_map_len(buf, 7 + u32::from(scheme == Scheme::ZstdPerKernel));
        let _ = write_str(buf, key::FORMAT_VERSION);
        let _ = write_uint(buf, TOC_FORMAT_VERSION);
        let _ = write_str(buf, key::GROUP_NAME);
        let _ = write_str(buf, &self.options.group);
        let _ = write_str(buf, key::GFX_ARCH_FAMILY);
        let _ = write_str(buf, &self.options.family);
        let _ = write_str(buf, key::GFX_ARCHES);
        let _ = write_array_len(buf, self.options.arches.len() as u32);
        for arch in &self.options.arches {
            let _ = write_str(buf, &arch.to_string());
        }
        let _ = write_str(buf, key::TOC);
        let _ = write_map_len(buf, self.binaries.len() as u32);
        for (binary, entries) in &self.binaries {
            let _ = write_str(buf, binary);
            let _ = write_map_len(buf, entries.len() as u32);
            for entry in entries {
                let _ = write_str(buf, &entry.target.to_string());
                let _ = write_map_len(buf, 3 + u32::from(entry.metadata.is_some()));
                let _ = write_str(buf, key::TYPE);
                let _ = write_str(buf, ENTRY_TYPE_HSACO);
                let _ = write_str(buf, key::ORDINAL);
                let _ = write_uint(buf, u64::from(entry.ordinal));
                let _ = write_str(buf, key::ORIGINAL_SIZE);
                let _ = write_uint(buf, entry.original_size);
                if let Some(metadata) = &entry.metadata {
                    let _ = write_str(buf, key::METADATA);
                    let _ = write_map_len(buf, metadata.len() as u32);
                    for (name, value) in metadata.iter() {
                        let _ = write_str(buf, name);
                        let _ = write_str(buf, value);
                    }
                }
            }
        }
        let _ = write_str(buf, key::COMPRESSION_SCHEME);
        let _ = write_str(buf, scheme.name());
        match scheme {
            Scheme::None => {
                let _ = write_str(buf, key::BLOBS);
                let _ = write_array_len(buf, self.blob_ranges.len() as u32);
                for &(offset, size) in &self.blob_ranges {
                    let _ = write_map_len(buf, 2);
                    let _ = write_str(buf, key::OFFSET);
                    let _ = write_uint(buf, offset);
                    let _ = write_str(buf, key::SIZE);
                    let _ = write_uint(buf, size);
                }
            }
            Scheme::ZstdPerKernel => {
                let _ = write_str(buf, key::ZSTD_OFFSET);
                let _ = write_uint(buf, BLOB_REGION_OFFSET);
                let _ = write_str(buf, key::ZSTD_SIZE);
                let _ = write_uint(buf, self.position - BLOB_REGION_OFFSET);
            }
        }
        t
    }
}

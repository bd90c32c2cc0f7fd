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
use std::io::{self, Read, Seek, SeekFrom, Write};

use crate::error::{Error, Result};
use crate::format::{
    encode_header, key, FramePrefix, Metadata, Scheme, ZstdRegionHeader, BLOB_REGION_OFFSET,
    DEFAULT_ZSTD_LEVEL, ENTRY_TYPE_HSACO, FRAME_PREFIX_SIZE, HEADER_SIZE, TOC_FORMAT_VERSION,
    ZSTD_REGION_HEADER_SIZE,
};
use kpack_gpu::target::Target;
use kpack_hash::CountingWriter;

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
#[derive(Debug, Clone, PartialEq, Eq)]
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
        let mut stored = Vec::new();
        let blob = StoredBlob::write(
            compression,
            CodeSource::Slice(code_object, &done),
            &mut stored,
        )?;
        Ok(PreparedBlob {
            digest: blob.digest,
            original_size: blob.original_size,
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

/// Where the bytes of a code object being stored come from.
pub enum CodeSource<'a> {
    /// In memory (usually a mapped file); `done` is called with each piece
    /// once it is hashed and compressed, so the caller can drop its pages.
    Slice(&'a [u8], &'a dyn Fn(&[u8])),
    /// A stream of exactly this many bytes (a decompressing reader): read
    /// a piece at a time, never whole.
    Reader(&'a mut dyn io::Read, u64),
}

impl fmt::Debug for CodeSource<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodeSource::Slice(data, _) => write!(f, "Slice({} bytes)", data.len()),
            CodeSource::Reader(_, len) => write!(f, "Reader({len} bytes)"),
        }
    }
}

impl CodeSource<'_> {
    fn len(&self) -> u64 {
        match self {
            CodeSource::Slice(data, _) => data.len() as u64,
            CodeSource::Reader(_, len) => *len,
        }
    }

    /// Calls `each` with the code object a piece ([`PIECE_BYTES`]) at a
    /// time, in order.
    fn for_each_piece(self, each: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        match self {
            CodeSource::Slice(data, done) => {
                for piece in data.chunks(PIECE_BYTES) {
                    each(piece)?;
                    done(piece);
                }
            }
            CodeSource::Reader(reader, len) => {
                let mut buffer = vec![0; len.min(PIECE_BYTES as u64) as usize];
                let mut left = len;
                while left > 0 {
                    let piece = &mut buffer[..left.min(PIECE_BYTES as u64) as usize];
                    reader.read_exact(piece).map_err(Error::CodeObject)?;
                    each(piece)?;
                    left -= piece.len() as u64;
                }
            }
        }
        Ok(())
    }
}

/// A code object hashed and stored (compressed for zstd) into a writer of
/// the caller's, such as a spool file: what [`ArchiveWriter::add_stored`]
/// needs besides those bytes. Memory stays bounded by a piece (8 MiB)
/// whatever the code object's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredBlob {
    digest: [u8; 32],
    original_size: u64,
    stored_size: u64,
}

impl StoredBlob {
    /// Hashes `code` and writes the bytes the archive stores for it to
    /// `stored`: for a code object of one piece or less the same bytes as
    /// [`PreparedBlob::new`], for a larger one the same as
    /// [`PreparedBlob::new_streamed`].
    pub fn write(
        compression: Compression,
        code: CodeSource<'_>,
        stored: &mut dyn Write,
    ) -> Result<StoredBlob> {
        let original_size = code.len();
        let mut counted = CountingWriter::new(stored);
        let digest = match compression {
            Compression::Zstd { level } if original_size > PIECE_BYTES as u64 => {
                compress_frame_streamed(code, level, &mut counted)?
            }
            Compression::None if original_size > PIECE_BYTES as u64 => {
                let mut hasher = blake3::Hasher::new();
                code.for_each_piece(&mut |piece| {
                    hasher.update(piece);
                    counted.write_all(piece).map_err(blob_error)
                })?;
                hasher.finalize().into()
            }
            _ => store_whole(compression, code, &mut counted)?,
        };
        Ok(StoredBlob {
            digest,
            original_size,
            stored_size: counted.count(),
        })
    }

    /// Size of the code object before compression.
    pub fn original_size(&self) -> u64 {
        self.original_size
    }
}

fn blob_error(source: io::Error) -> Error {
    Error::Write {
        what: "a stored code object",
        source,
    }
}

/// A code object of one piece or less, hashed and stored whole, as
/// [`PreparedBlob::new`] stores it.
fn store_whole(
    compression: Compression,
    code: CodeSource<'_>,
    stored: &mut dyn Write,
) -> Result<[u8; 32]> {
    let mut whole = Vec::new();
    let (data, done) = match code {
        CodeSource::Slice(data, done) => (data, Some(done)),
        CodeSource::Reader(reader, len) => {
            whole.resize(len as usize, 0);
            reader.read_exact(&mut whole).map_err(Error::CodeObject)?;
            (&whole[..], None)
        }
    };
    let digest = digest(data);
    match compression {
        Compression::None => stored.write_all(data),
        Compression::Zstd { level } => stored.write_all(&compress_frame(data, level)?),
    }
    .map_err(blob_error)?;
    if let Some(done) = done {
        done(data);
    }
    Ok(digest)
}

/// One zstd frame of `code` (its size pledged, so the header records it),
/// hashed and compressed a piece at a time, the frame written to `out` as
/// it is produced.
fn compress_frame_streamed(
    code: CodeSource<'_>,
    level: i32,
    out: &mut dyn Write,
) -> Result<[u8; 32]> {
    use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective;
    use zstd::zstd_safe::{InBuffer, OutBuffer};
    let mut context = frame_context(level)?;
    context
        .set_pledged_src_size(Some(code.len()))
        .map_err(frame_error)?;
    let mut hasher = blake3::Hasher::new();
    let mut buffer = Vec::with_capacity(zstd::zstd_safe::CCtx::out_size());
    let mut step = |input: &mut InBuffer<'_>, end| -> Result<usize> {
        buffer.clear();
        let mut output = OutBuffer::around(&mut buffer);
        let left = context
            .compress_stream2(&mut output, input, end)
            .map_err(frame_error)?;
        out.write_all(&buffer).map_err(blob_error)?;
        Ok(left)
    };
    code.for_each_piece(&mut |piece| {
        hasher.update(piece);
        let mut input = InBuffer::around(piece);
        while input.pos() < piece.len() {
            step(&mut input, ZSTD_EndDirective::ZSTD_e_continue)?;
        }
        Ok(())
    })?;
    while step(&mut InBuffer::around(&[]), ZSTD_EndDirective::ZSTD_e_end)? > 0 {}
    Ok(hasher.finalize().into())
}

/// The content digest identical code objects are stored once by: BLAKE3,
/// several times faster than SHA-256 on gigabytes of device code, and never
/// written to an archive.
fn digest(data: &[u8]) -> [u8; 32] {
    blake3::hash(data).into()
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
            out.write_all(&ZstdRegionHeader::new(0).to_bytes())
                .map_err(io)?;
            position += ZSTD_REGION_HEADER_SIZE;
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

    /// The sink, for a caller that closes and reopens the file under it
    /// between code objects; what the writer wrote must stay in it, and
    /// writing must go on where it stopped.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
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

    /// Adds a code object whose stored bytes, described by `blob`, are
    /// the next bytes (as many as were stored) of `stored`: copied into
    /// the archive, or skipped when an identical code object is stored
    /// already.
    pub fn add_stored(
        &mut self,
        binary: &BinaryKey,
        target: &Target,
        blob: &StoredBlob,
        stored: &mut dyn io::Read,
        metadata: Option<Metadata>,
    ) -> Result<()> {
        self.check_new_entry(binary, target)?;
        let ordinal = match self.stored.get(&(blob.digest, blob.original_size)) {
            Some(&ordinal) => {
                io::copy(&mut Read::take(stored, blob.stored_size), &mut io::sink())
                    .map_err(Error::CodeObject)?;
                ordinal
            }
            None => self.store_from(blob, stored)?,
        };
        self.add_entry(binary, target, ordinal, blob.original_size, metadata);
        Ok(())
    }

    /// Sets `gfx_arches`, the targets the TOC lists, when they are known
    /// only once every code object is in; each binary's target added so
    /// far must be among them.
    pub fn set_arches(&mut self, arches: Vec<Target>) -> Result<()> {
        for (binary, entries) in &self.binaries {
            if binary.contains('#') {
                if let Some(entry) = entries.iter().find(|e| !arches.contains(&e.target)) {
                    return Err(Error::InvalidInput(format!(
                        "{binary}: target {} is not among the archive's targets",
                        entry.target
                    )));
                }
            }
        }
        self.options.arches = arches;
        self.derive_arches = false;
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
        let ordinal = self.next_ordinal(blob.stored.len() as u64)?;
        self.out
            .write_all(&blob.stored)
            .map_err(|source| Error::Write {
                what: "the blob region",
                source,
            })?;
        self.position += blob.stored.len() as u64;
        self.stored
            .insert((blob.digest, blob.original_size), ordinal);
        Ok(ordinal)
    }

    /// The ordinal of the next blob stored, `stored_size` bytes: its range
    /// recorded (scheme `none`), or its frame's size prefix written (zstd).
    fn next_ordinal(&mut self, stored_size: u64) -> Result<u32> {
        let ordinal = match self.options.compression {
            Compression::None => {
                self.blob_ranges.push((self.position, stored_size));
                self.blob_ranges.len() - 1
            }
            Compression::Zstd { .. } => {
                let size = u32::try_from(stored_size).map_err(|_| {
                    Error::InvalidInput("a compressed code object is 4 GiB or larger".into())
                })?;
                self.out
                    .write_all(&FramePrefix::new(size).to_bytes())
                    .map_err(|source| Error::Write {
                        what: "the blob region",
                        source,
                    })?;
                self.position += FRAME_PREFIX_SIZE;
                self.frame_count += 1;
                self.frame_count as usize - 1
            }
        };
        u32::try_from(ordinal)
            .map_err(|_| Error::InvalidInput("more than 2^32 code objects".into()))
    }

    /// Copies a blob's stored bytes from `stored` into the blob region and
    /// records it for deduplication.
    fn store_from(&mut self, blob: &StoredBlob, stored: &mut dyn io::Read) -> Result<u32> {
        let ordinal = self.next_ordinal(blob.stored_size)?;
        let copied = io::copy(&mut Read::take(stored, blob.stored_size), &mut self.out).map_err(
            |source| Error::Write {
                what: "the blob region",
                source,
            },
        )?;
        if copied != blob.stored_size {
            return Err(Error::CodeObject(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{copied} of {} stored bytes", blob.stored_size),
            )));
        }
        self.position += copied;
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
        // The blob region follows the header: its frame count is next.
        if self.options.compression.scheme() == Scheme::ZstdPerKernel {
            self.out
                .write_all(&ZstdRegionHeader::new(self.frame_count).to_bytes())
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

//! The archive reader: maps the file, validates header, TOC and blob ranges
//! at open, and hands out code objects straight from the mapping.

mod toc;

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use fs_err as fs;
use memmap2::Mmap;

use crate::error::{DecompressionProblem, Error, FormatProblem, Result};
use crate::format::{
    FramePrefix, Metadata, RawHeader, Scheme, ZstdRegionHeader, BLOB_REGION_OFFSET,
    FRAME_PREFIX_SIZE, MAGIC, MIN_HEADER_BYTES, VERSION, ZSTD_REGION_HEADER_SIZE,
};
use kpack_gpu::target::Target;

/// An open, validated kpack archive.
///
/// Opening reads the header, the TOC and (for zstd) the 4-byte frame
/// sizes; code objects are read from the mapping only when asked for.
/// All methods take `&self` and may be called from many threads at once.
#[derive(Debug)]
pub struct Archive {
    path: PathBuf,
    map: Mmap,
    group: String,
    family: String,
    arches: Vec<Target>,
    scheme: Scheme,
    targets: Vec<Target>,
    binaries: Vec<toc::Binary>,
    by_name: HashMap<Box<str>, u32>,
    /// Stored bytes per ordinal: a code object (`none`) or a zstd frame.
    blobs: Vec<BlobRange>,
    /// Where the TOC starts, for reading entry metadata when asked.
    toc_offset: usize,
}

/// What the mapping holds: the archive file itself, or an anonymous copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backing {
    File,
    Memory,
}

#[derive(Debug, Clone, Copy)]
struct BlobRange {
    offset: usize,
    size: usize,
}

/// One code object in an archive, found by binary key and target.
#[derive(Debug, Clone, Copy)]
pub struct Kernel<'a> {
    archive: &'a Archive,
    binary: &'a str,
    target: &'a Target,
    ordinal: u32,
    original_size: u64,
    metadata: Option<toc::Span>,
}

/// Opens `path` for reading if it is a regular file.
///
/// On Unix it is opened non-blocking, so a FIFO (which a plain open would
/// wait on for a writer, for ever) or a device returns at once and is then
/// refused by its type. The flag is left set: it means nothing for a
/// regular file, whose descriptor is only mapped.
///
/// On Windows it is opened read-only letting others read, write, delete
/// and rename it, so an installer may work beside a running program; a
/// pipe, a console or another device is refused by its type.
fn open_regular(path: &Path) -> Result<fs::File> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use fs::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    #[cfg(windows)]
    {
        use fs::os::windows::fs::OpenOptionsExt;
        use windows_sys::Win32::Storage::FileSystem::{
            FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE,
        };
        options.share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE);
    }
    let file = options.open(path).map_err(Error::Open)?;
    let kind = file.metadata().map_err(Error::Open)?.file_type();
    if !kind.is_file() {
        return Err(Error::NotAFile {
            path: path.to_owned(),
            kind: file_kind(kind),
        });
    }
    Ok(file)
}

/// What a file that is not a regular file is, for messages.
fn file_kind(kind: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

impl Archive {
    /// Opens and validates the archive at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Archive> {
        let path = path.as_ref();
        let file = open_regular(path)?;
        let len = file.metadata().map_err(Error::Open)?.len();
        let format_error = |offset: u64, problem| Error::Format {
            path: path.to_owned(),
            offset,
            problem,
        };
        if len < MIN_HEADER_BYTES as u64 {
            return Err(format_error(0, FormatProblem::TooShort { len }));
        }
        // SAFETY: the mapping is read-only and private to this value. Like
        // every reader of memory-mapped files, we rely on the file not being
        // truncated while open; archives are replaced by rename, never
        // rewritten in place.
        let map = unsafe { Mmap::map(file.file()) }.map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        Archive::from_map(path.to_owned(), map, Backing::File)
    }

    /// Validates an archive held in memory; `name` stands in for the path
    /// in errors. Used for archives that are not files yet, and by fuzzing.
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: &[u8]) -> Result<Archive> {
        let name = name.into();
        if bytes.len() < MIN_HEADER_BYTES {
            return Err(Error::Format {
                path: name,
                offset: 0,
                problem: FormatProblem::TooShort {
                    len: bytes.len() as u64,
                },
            });
        }
        let read_error = |source| Error::Read {
            path: name.clone(),
            source,
        };
        let mut map = memmap2::MmapMut::map_anon(bytes.len()).map_err(read_error)?;
        map.copy_from_slice(bytes);
        let map = map.make_read_only().map_err(read_error)?;
        Archive::from_map(name, map, Backing::Memory)
    }

    fn from_map(path: PathBuf, map: Mmap, backing: Backing) -> Result<Archive> {
        let located = |(offset, problem)| Error::Format {
            path: path.clone(),
            offset,
            problem,
        };
        let toc_offset = check_header(&map).map_err(located)?;
        let parsed = toc::parse(map.get(toc_offset as usize..).unwrap_or_default())
            .map_err(|(at, problem)| located((toc_offset + at as u64, problem)))?;
        let blobs = match parsed.scheme {
            Scheme::None => blob_ranges(parsed.blobs.as_deref().unwrap_or_default(), toc_offset),
            Scheme::ZstdPerKernel => {
                let (offset, size) = parsed.zstd_region.unwrap_or_default();
                frame_ranges(&map, backing, offset, size, toc_offset)
            }
        }
        .map_err(located)?;
        let by_name =
            index_kernels(&parsed, &blobs).map_err(|problem| located((toc_offset, problem)))?;
        Ok(Archive {
            path,
            map,
            group: parsed.group,
            family: parsed.family,
            arches: parsed.arches,
            scheme: parsed.scheme,
            targets: parsed.targets,
            binaries: parsed.binaries,
            by_name,
            blobs,
            toc_offset: toc_offset as usize,
        })
    }

    /// The file this archive was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The group (`rocm`, `torch`, ...) the archive belongs to.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The family or target named in `gfx_arch_family`.
    pub fn family(&self) -> &str {
        &self.family
    }

    /// The targets the archive serves (`gfx_arches`), in stored order.
    pub fn architectures(&self) -> &[Target] {
        &self.arches
    }

    /// Whether `gfx_arches` lists exactly this target.
    pub fn serves(&self, target: &Target) -> bool {
        self.arches.contains(target)
    }

    /// How the blob region is stored.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// Binary keys (with `#N`) in TOC order.
    pub fn binaries(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.binaries.iter().map(|b| &*b.name)
    }

    /// The targets stored for one binary key, in TOC order.
    pub fn targets_of(&self, binary: &str) -> Option<impl Iterator<Item = &Target> + '_> {
        let index = *self.by_name.get(binary)?;
        Some(
            self.binaries[index as usize]
                .kernels
                .iter()
                .map(|k| &self.targets[k.target as usize]),
        )
    }

    /// Number of `(binary, target)` entries.
    pub fn kernel_count(&self) -> usize {
        self.binaries.iter().map(|b| b.kernels.len()).sum()
    }

    /// Number of stored code objects (deduplicated entries share one).
    pub fn stored_count(&self) -> usize {
        self.blobs.len()
    }

    /// The bytes its code objects decode to, every TOC entry counted (one
    /// stored code object shared by several entries as many times as it is
    /// listed): what materializing may write from it at most, and what a
    /// repository declares for it (`unpacked-size`).
    pub fn decoded_size(&self) -> u64 {
        self.binaries
            .iter()
            .flat_map(|b| &b.kernels)
            .fold(0u64, |sum, k| sum.saturating_add(k.original_size))
    }

    /// The archive's own size in bytes.
    pub fn file_size(&self) -> u64 {
        self.map.len() as u64
    }

    /// Finds the code object for a binary key (`lib/libfoo.so#0`; `\` is
    /// read as `/`) and an exact target.
    pub fn find<'a>(&'a self, binary: &str, target: &Target) -> Result<Kernel<'a>> {
        let normalized: Cow<'_, str> = if binary.contains('\\') {
            Cow::Owned(binary.replace('\\', "/"))
        } else {
            Cow::Borrowed(binary)
        };
        let not_found = || Error::KernelNotFound {
            path: self.path.clone(),
            binary: binary.to_owned(),
            target: target.to_string(),
        };
        let index = *self.by_name.get(&*normalized).ok_or_else(not_found)?;
        let entry = &self.binaries[index as usize];
        let kernel = entry
            .kernels
            .iter()
            .find(|k| self.targets[k.target as usize] == *target)
            .ok_or_else(not_found)?;
        Ok(Kernel {
            archive: self,
            binary: &entry.name,
            target: &self.targets[kernel.target as usize],
            // Checked against the blob count at open, which fits in u32.
            ordinal: kernel.ordinal as u32,
            original_size: kernel.original_size,
            metadata: kernel.metadata,
        })
    }

    /// The code object for a binary key and target: borrowed from the
    /// mapping when stored uncompressed, decompressed otherwise.
    pub fn kernel(&self, binary: &str, target: &Target) -> Result<Cow<'_, [u8]>> {
        self.find(binary, target)?.bytes()
    }
}

impl<'a> Kernel<'a> {
    /// The binary key this code object belongs to.
    pub fn binary(&self) -> &'a str {
        self.binary
    }

    /// The target it was built for.
    pub fn target(&self) -> &'a Target {
        self.target
    }

    /// Index of its stored blob or frame.
    pub fn ordinal(&self) -> u32 {
        self.ordinal
    }

    /// Size of the code object once decompressed.
    pub fn size(&self) -> u64 {
        self.original_size
    }

    /// The entry's `metadata` map (its string values), if it has one: read
    /// from the TOC now, so archives whose entries are never asked for it
    /// pay nothing at open.
    pub fn metadata(&self) -> Result<Option<Metadata>> {
        let Some(span) = self.metadata else {
            return Ok(None);
        };
        let toc = self
            .archive
            .map
            .get(self.archive.toc_offset..)
            .unwrap_or_default();
        toc::parse_metadata(toc, span)
            .map(Some)
            .map_err(|(at, problem)| Error::Format {
                path: self.archive.path.clone(),
                offset: (self.archive.toc_offset + at) as u64,
                problem,
            })
    }

    fn stored(&self) -> &'a [u8] {
        let blob = self.archive.blobs[self.ordinal as usize];
        &self.archive.map[blob.offset..blob.offset + blob.size]
    }

    fn problem(&self, problem: DecompressionProblem) -> Error {
        Error::Decompression {
            path: self.archive.path.clone(),
            binary: self.binary.to_owned(),
            target: self.target.to_string(),
            ordinal: self.ordinal,
            problem,
        }
    }

    /// The code object's bytes: borrowed when uncompressed, owned otherwise.
    pub fn bytes(&self) -> Result<Cow<'a, [u8]>> {
        match self.archive.scheme {
            Scheme::None => Ok(Cow::Borrowed(self.stored())),
            Scheme::ZstdPerKernel => {
                // Checked before allocating: a tiny archive must not make
                // the reader reserve the gigabytes its TOC may claim.
                self.check_frame()?;
                let size = usize::try_from(self.original_size)
                    .map_err(|_| Error::OutOfMemory { size: usize::MAX })?;
                let mut buffer = Vec::new();
                buffer
                    .try_reserve_exact(size)
                    .map_err(|_| Error::OutOfMemory { size })?;
                buffer.resize(size, 0);
                self.read_into(&mut buffer)?;
                Ok(Cow::Owned(buffer))
            }
        }
    }

    /// Checks, without decompressing, that the stored frame can produce
    /// exactly [`size`](Self::size) bytes: its header's content size must
    /// agree with the TOC, and the size must not exceed what the frame can
    /// decompress to at most. Callers allocating an output buffer check
    /// this first.
    pub fn check_frame(&self) -> Result<()> {
        if self.archive.scheme == Scheme::None {
            return Ok(());
        }
        let stored = self.stored();
        let not_a_frame = || self.problem(DecompressionProblem::Zstd("not a zstd frame".into()));
        let content_size =
            zstd::zstd_safe::get_frame_content_size(stored).map_err(|_| not_a_frame())?;
        let claimed = match content_size {
            Some(size) => size,
            // Without a recorded size: every block takes at least 3 header
            // bytes and yields at most 128 KiB.
            None => (stored.len() as u64).div_ceil(3).saturating_mul(128 * 1024),
        };
        if claimed != self.original_size && (content_size.is_some() || self.original_size > claimed)
        {
            return Err(self.problem(DecompressionProblem::SizeMismatch {
                expected: self.original_size,
                actual: claimed,
            }));
        }
        Ok(())
    }

    /// Writes the code object to `out` as a stream: a zstd frame is decoded
    /// a block at a time through its window, never held whole, and stops
    /// with an error at [`size`](Self::size) bytes if it would give more.
    pub fn write_to(&self, out: &mut dyn Write) -> Result<()> {
        let written = |source| Error::Write {
            what: "a code object",
            source,
        };
        let stored = self.stored();
        if self.archive.scheme == Scheme::None {
            return out.write_all(stored).map_err(written);
        }
        self.check_frame()?;
        let zstd = |e: std::io::Error| self.problem(DecompressionProblem::Zstd(e.to_string()));
        let mut decoder = zstd::stream::read::Decoder::with_buffer(stored)
            .map_err(zstd)?
            .single_frame();
        decoder.window_log_max(MAX_WINDOW_LOG).map_err(zstd)?;
        let mut buffer = vec![0; STREAM_PIECE];
        let mut total = 0u64;
        loop {
            let read = match decoder.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => read,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(zstd(e)),
            };
            total += read as u64;
            if total > self.original_size {
                return Err(self.problem(DecompressionProblem::SizeMismatch {
                    expected: self.original_size,
                    actual: total,
                }));
            }
            out.write_all(&buffer[..read]).map_err(written)?;
        }
        if total != self.original_size {
            return Err(self.problem(DecompressionProblem::SizeMismatch {
                expected: self.original_size,
                actual: total,
            }));
        }
        Ok(())
    }

    /// Writes the code object into `out`, which must be exactly
    /// [`size`](Self::size) bytes long; zstd frames decompress straight
    /// into it.
    pub fn read_into(&self, out: &mut [u8]) -> Result<()> {
        if out.len() as u64 != self.original_size {
            return Err(self.problem(DecompressionProblem::BufferSize {
                expected: self.original_size,
                actual: out.len() as u64,
            }));
        }
        let stored = self.stored();
        match self.archive.scheme {
            Scheme::None => out.copy_from_slice(stored),
            Scheme::ZstdPerKernel => {
                self.check_frame()?;
                let written = decompress_frame(stored, out)
                    .map_err(|e| self.problem(DecompressionProblem::Zstd(e)))?;
                if written as u64 != self.original_size {
                    return Err(self.problem(DecompressionProblem::SizeMismatch {
                        expected: self.original_size,
                        actual: written as u64,
                    }));
                }
            }
        }
        Ok(())
    }
}

/// How much of a code object [`Kernel::write_to`] decodes before writing it.
const STREAM_PIECE: usize = 256 << 10;

/// The largest window a frame decoded as a stream may need (128 MiB, zstd's
/// own default limit): what any zstd level writes; level 3, the default,
/// uses 2 MiB.
const MAX_WINDOW_LOG: u32 = 27;

/// Decompresses one frame with this thread's own context, so threads never
/// wait on each other.
fn decompress_frame(frame: &[u8], out: &mut [u8]) -> std::result::Result<usize, String> {
    use std::cell::RefCell;
    thread_local! {
        static CONTEXT: RefCell<Option<zstd::zstd_safe::DCtx<'static>>> = const { RefCell::new(None) };
    }
    CONTEXT.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| "decompressor busy".to_owned())?;
        let context = match &mut *slot {
            Some(context) => context,
            None => slot
                .insert(zstd::zstd_safe::DCtx::try_create().ok_or("cannot create a zstd context")?),
        };
        context
            .decompress(out, frame)
            .map_err(|code| zstd::zstd_safe::get_error_name(code).to_owned())
    })
}

type RangeError = (u64, FormatProblem);

fn outside(what: String, start: u64, end: u64, region_end: u64) -> FormatProblem {
    FormatProblem::OutsideBlobRegion {
        what,
        start,
        end,
        region_end,
    }
}

/// Checks every `blobs` entry lies inside `[64, toc_offset)`.
fn blob_ranges(blobs: &[toc::BlobEntry], toc_offset: u64) -> Result<Vec<BlobRange>, RangeError> {
    blobs
        .iter()
        .enumerate()
        .map(|(index, blob)| {
            let end = blob.offset.checked_add(blob.size);
            match end {
                Some(end) if blob.offset >= BLOB_REGION_OFFSET && end <= toc_offset => {
                    Ok(BlobRange {
                        offset: blob.offset as usize,
                        size: blob.size as usize,
                    })
                }
                _ => Err((
                    toc_offset,
                    outside(
                        format!("blobs[{index}]"),
                        blob.offset,
                        end.unwrap_or(u64::MAX),
                        toc_offset,
                    ),
                )),
            }
        })
        .collect()
}

/// Checks the fixed header (magic, version, where the TOC starts) and
/// returns the TOC's offset.
fn check_header(map: &[u8]) -> std::result::Result<u64, (u64, FormatProblem)> {
    use std::mem::offset_of;
    let file_len = map.len() as u64;
    let header =
        RawHeader::from_bytes(map).ok_or((0, FormatProblem::TooShort { len: file_len }))?;
    if header.magic != MAGIC {
        let found = header.magic;
        let at = offset_of!(RawHeader, magic) as u64;
        return Err((at, FormatProblem::BadMagic { found }));
    }
    let version = header.version.get();
    if version != VERSION {
        let at = offset_of!(RawHeader, version) as u64;
        return Err((at, FormatProblem::UnsupportedVersion { version }));
    }
    let toc_offset = header.toc_offset.get();
    if toc_offset < BLOB_REGION_OFFSET || toc_offset >= file_len {
        return Err((
            offset_of!(RawHeader, toc_offset) as u64,
            FormatProblem::TocOffsetOutOfRange {
                toc_offset,
                file_len,
            },
        ));
    }
    Ok(toc_offset)
}

/// Binary name to its index, once every kernel's ordinal names a blob (of
/// the size the TOC says, when blobs are stored whole).
fn index_kernels(
    parsed: &toc::Toc,
    blobs: &[BlobRange],
) -> std::result::Result<HashMap<Box<str>, u32>, FormatProblem> {
    let mut by_name = HashMap::with_capacity(parsed.binaries.len());
    for (index, binary) in parsed.binaries.iter().enumerate() {
        for kernel in &binary.kernels {
            let target = parsed
                .targets
                .get(kernel.target as usize)
                .map(ToString::to_string)
                .unwrap_or_default();
            let what = || format!("toc[{:?}][{target:?}]", binary.name);
            let blob = blobs.get(kernel.ordinal as usize).ok_or_else(|| {
                FormatProblem::OrdinalOutOfRange {
                    what: what(),
                    ordinal: kernel.ordinal,
                    count: blobs.len(),
                }
            })?;
            if parsed.scheme == Scheme::None && blob.size as u64 != kernel.original_size {
                return Err(FormatProblem::Mismatch {
                    what: format!("{}.original_size", what()),
                    expected: blob.size as u64,
                    actual: kernel.original_size,
                });
            }
        }
        by_name.insert(binary.name.clone(), index as u32);
    }
    Ok(by_name)
}

/// Walks the zstd region's frame sizes, checking each frame lies inside it.
fn frame_ranges(
    map: &Mmap,
    backing: Backing,
    region_offset: u64,
    region_size: u64,
    toc_offset: u64,
) -> Result<Vec<BlobRange>, RangeError> {
    let region_end = zstd_region_end(region_offset, region_size, toc_offset)?;
    advise_random(map, region_offset, region_size);
    let frames = read_frames(map, region_offset, region_end);
    release_region(map, backing, region_offset, region_size);
    let (frames, at) = frames?;
    if at != region_end {
        return Err((
            toc_offset,
            FormatProblem::Mismatch {
                what: "zstd_size".to_owned(),
                expected: at - region_offset,
                actual: region_size,
            },
        ));
    }
    Ok(frames)
}

/// Where the zstd region ends, once it lies between the header and the
/// TOC and can hold its frame count.
fn zstd_region_end(
    region_offset: u64,
    region_size: u64,
    toc_offset: u64,
) -> Result<u64, RangeError> {
    let region_end = region_offset.checked_add(region_size);
    match region_end {
        Some(end)
            if region_offset >= BLOB_REGION_OFFSET
                && end <= toc_offset
                && region_size >= ZSTD_REGION_HEADER_SIZE =>
        {
            Ok(end)
        }
        _ => Err((
            toc_offset,
            outside(
                "the zstd region (zstd_offset, zstd_size)".to_owned(),
                region_offset,
                region_end.unwrap_or(u64::MAX),
                toc_offset,
            ),
        )),
    }
}

/// The frames of the region, each after its prefix, and where the last
/// one ends.
fn read_frames(
    map: &Mmap,
    region_offset: u64,
    region_end: u64,
) -> Result<(Vec<BlobRange>, u64), RangeError> {
    let bytes_at = |at: u64| map.get(at as usize..).unwrap_or_default();
    let frame_count = ZstdRegionHeader::from_bytes(bytes_at(region_offset))
        .map(|header| header.frame_count.get())
        .unwrap_or_default();
    let region_size = region_end - region_offset;
    // Each frame takes at least its prefix.
    let most = region_size / FRAME_PREFIX_SIZE;
    let mut frames = Vec::with_capacity((frame_count as usize).min(most as usize));
    let mut at = region_offset + ZSTD_REGION_HEADER_SIZE;
    for index in 0..frame_count {
        let size = if at + FRAME_PREFIX_SIZE <= region_end {
            FramePrefix::from_bytes(bytes_at(at)).map(|prefix| prefix.frame_size.get())
        } else {
            None
        };
        let start = at + FRAME_PREFIX_SIZE;
        let end = size.map(|size| start + u64::from(size));
        match end {
            Some(end) if end <= region_end => {
                frames.push(BlobRange {
                    offset: start as usize,
                    size: (end - start) as usize,
                });
                at = end;
            }
            _ => {
                return Err((
                    at,
                    outside(
                        format!("zstd frame {index}"),
                        start,
                        end.unwrap_or(start + FRAME_PREFIX_SIZE),
                        region_end,
                    ),
                ))
            }
        }
    }
    Ok((frames, at))
}

/// Only the 4-byte size prefixes of the zstd region are touched:
/// random-access advice keeps the kernel from faulting in the frames
/// around them, so opening a huge archive costs a page per frame at most.
#[cfg(unix)]
fn advise_random(map: &Mmap, region_offset: u64, region_size: u64) {
    let _ = map.advise_range(
        memmap2::Advice::Random,
        region_offset as usize,
        region_size as usize,
    );
}

/// Windows has no per-range access advice; reading the prefixes maps what
/// the memory manager prefetches.
#[cfg(not(unix))]
fn advise_random(_map: &Mmap, _region_offset: u64, _region_size: u64) {}

/// Gives back the pages reading the size prefixes mapped. Fault-around maps
/// up to 64 KiB of cached pages around each prefix even with random-access
/// advice; unmapping the region again (the file stays in the page cache,
/// the mapping is read-only and shared) keeps a 1 GiB archive's open from
/// adding 500 x 64 KiB of resident memory.
#[cfg(unix)]
fn release_region(map: &Mmap, backing: Backing, region_offset: u64, region_size: u64) {
    if backing == Backing::File {
        // SAFETY: DONTNEED on a read-only file mapping drops page table
        // entries only; later reads fault the same file bytes back in. (On
        // the anonymous copy of `from_bytes` it would zero the data.)
        let _ = unsafe {
            map.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                region_offset as usize,
                region_size as usize,
            )
        };
    }
    let _ = map.advise_range(
        memmap2::Advice::Normal,
        region_offset as usize,
        region_size as usize,
    );
}

/// Windows trims a process's working set of mapped file pages on its own.
#[cfg(not(unix))]
fn release_region(_map: &Mmap, _backing: Backing, _region_offset: u64, _region_size: u64) {}

//! Errors of reading, splitting and materializing binaries.

use std::path::PathBuf;

use kpack_gpu::ParseTargetError;

/// What is wrong with a `.hip_fatbin` section's offload bundles. Offsets
/// are relative to the start of the section.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BundleError {
    #[error(
        "offset {offset}: neither an offload bundle nor a compressed bundle (bytes {found:02x?})"
    )]
    UnknownData { offset: usize, found: Vec<u8> },
    #[error("offset {offset}: bundle header truncated")]
    TruncatedHeader { offset: usize },
    #[error("offset {offset}: bundle entry {entry} spans [{start}, {end}) past the end of its data ({limit} bytes)")]
    EntryOutOfRange {
        offset: usize,
        entry: usize,
        start: u64,
        end: u64,
        limit: usize,
    },
    #[error("offset {offset}: bundle entry {entry} has a triple that is not UTF-8")]
    TripleNotUtf8 { offset: usize, entry: usize },
    #[error("offset {offset}: bundle entry {entry}: bad target")]
    BadTarget {
        offset: usize,
        entry: usize,
        #[source]
        source: ParseTargetError,
    },
    #[error("offset {offset}: two code objects for {target} in one bundle")]
    DuplicateTarget { offset: usize, target: String },
    #[error(
        "offset {offset}: compressed bundle version {version} is not supported (1, 2 and 3 are)"
    )]
    UnsupportedCcobVersion { offset: usize, version: u16 },
    #[error("offset {offset}: compressed bundle method {method} is unknown (0 zlib, 1 zstd)")]
    UnknownCcobMethod { offset: usize, method: u16 },
    #[error("offset {offset}: compressed bundle claims {total} bytes, only {available} remain in the section")]
    CcobTruncated {
        offset: usize,
        total: u64,
        available: usize,
    },
    #[error("offset {offset}: compressed bundle payload does not decompress: {reason}")]
    CcobDecompress { offset: usize, reason: String },
    #[error(
        "offset {offset}: compressed bundle decompressed to {actual} bytes, header says {expected}"
    )]
    CcobSize {
        offset: usize,
        expected: u64,
        actual: u64,
    },
    #[error("offset {offset}: compressed bundle code object {entry} starts at {start}, before the one ahead of it ends ({previous_end}); clang writes them in order, without overlap, and such a bundle is refused rather than decompressed whole")]
    CcobEntriesOutOfOrder {
        offset: usize,
        entry: usize,
        start: u64,
        previous_end: u64,
    },
    #[error("offset {offset}: compressed bundle hash {actual:#018x} does not match the header's {expected:#018x}")]
    CcobHash {
        offset: usize,
        expected: u64,
        actual: u64,
    },
}

/// Why old kernels would start an executable wrongly: where RHEL 8's
/// kernel (4.18) tells ld.so its program header table is, the load base
/// plus `e_phoff`, is not where the table is loaded (rocm-systems#7937).
/// Addresses and offsets are the file's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProgramHeaderError {
    #[error("program headers: PT_PHDR at vaddr {vaddr:#x} is not at its file offset {offset:#x} + load bias {bias:#x} ({})", EL8_REASON)]
    Misplaced { vaddr: u64, offset: u64, bias: u64 },
    #[error("program headers: PT_PHDR at file offset {offset:#x} is not the table at e_phoff {phoff:#x} ({})", EL8_REASON)]
    NotTheTable { offset: u64, phoff: u64 },
    #[error("program headers: no load segment maps the table ({len} bytes at file offset {phoff:#x}) at offset + load bias {bias:#x} ({})", EL8_REASON)]
    NotLoaded { phoff: u64, len: u64, bias: u64 },
    #[error("program headers: an executable without a load segment")]
    NoLoadSegment,
    #[error("program headers: unreadable: {0}")]
    Malformed(String),
}

/// Why the program header rule matters, for messages.
const EL8_REASON: &str = "RHEL 8 kernels compute AT_PHDR as load base + e_phoff; rocm-systems#7937";

/// Why an ELF file with device code cannot be split.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ElfError {
    #[error("malformed ELF file: {0}")]
    Malformed(String),
    #[error("unsupported ELF file: {0}")]
    Unsupported(String),
    #[error("already split (its wrappers are HIPK)")]
    AlreadySplit,
    #[error("wrapper {index} at {address:#x}: {message}")]
    BadWrapper {
        index: usize,
        address: u64,
        message: String,
    },
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// The file written would break the program header rule.
    #[error(transparent)]
    ProgramHeaders(#[from] ProgramHeaderError),
    /// An executable's program header table must grow and has no room
    /// where old kernels and GNU strip keep finding it.
    #[error(
        "the executable's program header table must grow to {len} bytes, and neither the \
         space after it nor free bytes after a load segment at the first one's load bias \
         hold it ({})",
        EL8_REASON
    )]
    NoRoomForProgramHeaders { len: u64 },
}

/// Why a PE/COFF image with device code cannot be read, split or
/// materialized. Offsets are file offsets, RVAs relative to the image base.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PeError {
    #[error("malformed PE image: {0}")]
    Malformed(String),
    #[error("unsupported PE image: {0}")]
    Unsupported(String),
    #[error("section {section}: its file data [{start:#x}, {end:#x}) runs past the end of the file ({len:#x} bytes)")]
    SectionPastEnd {
        section: String,
        start: u64,
        end: u64,
        len: u64,
    },
    #[error("sections {first} and {second} overlap {place}")]
    OverlappingSections {
        first: String,
        second: String,
        /// "in the file" or "in memory".
        place: &'static str,
    },
    #[error("base relocation block at file offset {offset:#x} ({size} bytes) runs past its table, which ends at {table_end:#x}")]
    RelocationBlockPastTable {
        offset: u64,
        size: u32,
        table_end: u64,
    },
    #[error("already split (its wrappers are HIPK)")]
    AlreadySplit,
    #[error("wrapper {index} at RVA {rva:#x}: {message}")]
    BadWrapper {
        index: usize,
        rva: u32,
        message: String,
    },
    #[error(transparent)]
    Bundle(#[from] BundleError),
}

/// Why a binary, of either format, cannot be read, split or materialized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    #[error(transparent)]
    Elf(#[from] ElfError),
    #[error(transparent)]
    Pe(#[from] PeError),
    /// Its offload bundles, which are the same in either format.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// A split plan patched with a binary of the other format.
    #[error("the split plan was made for a binary of another format")]
    FormatMismatch,
    /// The input ended before its headers said it would.
    #[error("the input is shorter than its headers say: {0}")]
    Truncated(String),
}

/// Everything reading, splitting and materializing binaries can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file-system call failed; the error (from fs-err or tempfile)
    /// names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Writing a file atomically failed.
    #[error(transparent)]
    Write(#[from] kpack_fs::PathError),
    #[error("{}: cannot map into memory", path.display())]
    Map {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: not a binary kpack-pack split (no {} or {} marker)", path.display(), rocm_kpack::format::ELF_MARKER_SECTION, rocm_kpack::format::PE_MARKER_SECTION)]
    NotSplit { path: PathBuf },
    #[error("{}: cannot be read as a split binary", path.display())]
    ReadSplit {
        path: PathBuf,
        #[source]
        source: ImageError,
    },
    #[error("{}: cannot be read as a fat binary", path.display())]
    ReadFat {
        path: PathBuf,
        #[source]
        source: ImageError,
    },
    #[error("{}: its kpack marker cannot be read", path.display())]
    Marker {
        path: PathBuf,
        #[source]
        source: Box<rocm_kpack::Error>,
    },
    #[error("{}: cannot materialize", path.display())]
    Materialize {
        path: PathBuf,
        #[source]
        source: ImageError,
    },
    #[error("{}: cannot write the materialized binary", path.display())]
    WriteMaterialized {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An archive whose code objects decode to more than they may.
    #[error(
        "{}: its table of contents lists {decoded} bytes of code objects, more than the {limit} bytes {why}; refused",
        path.display()
    )]
    DecodesPastLimit {
        path: PathBuf,
        decoded: u64,
        limit: u64,
        why: String,
    },
    #[error("{}: no archive found for {targets} (--archives names a directory of them)", path.display())]
    NoArchives { path: PathBuf, targets: String },
    #[error(transparent)]
    Runtime(#[from] rocm_kpack::Error),
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

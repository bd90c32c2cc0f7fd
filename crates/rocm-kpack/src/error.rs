//! Errors of the archive reader, the writer and the loader, each mapping to
//! one of the reference C API's error numbers.

use std::io;
use std::path::PathBuf;

use kpack_gpu::target::{join_targets, ParseTargetError, Target};

/// The reference `kpack_error_t` numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ErrorCode {
    Success = 0,
    InvalidArgument = 1,
    FileNotFound = 2,
    InvalidFormat = 3,
    UnsupportedVersion = 4,
    KernelNotFound = 5,
    DecompressionFailed = 6,
    OutOfMemory = 7,
    NotImplemented = 8,
    IoError = 9,
    MsgpackParseFailed = 10,
    PathDiscoveryFailed = 11,
    InvalidMetadata = 12,
    ArchiveNotFound = 13,
    ArchNotFound = 14,
}

/// Everything that can go wrong reading, writing or loading archives.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Opening an archive file; the cause names the path.
    #[error("cannot open the archive")]
    Open(#[source] io::Error),
    /// An archive path that names a FIFO, a directory, a device or a
    /// socket: only regular files are opened (a FIFO would block).
    #[error("{}: not a regular file ({kind})", path.display())]
    NotAFile { path: PathBuf, kind: &'static str },
    /// Mapping an archive into memory; the cause does not name the path.
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Reading `/proc/self/maps`; the cause names it.
    #[error("cannot read the process's memory mappings")]
    Mappings(#[source] io::Error),
    /// Reading a code object being added failed (a decompressing
    /// reader's error, which says where).
    #[error("cannot read the code object being added")]
    CodeObject(#[source] io::Error),
    #[error("cannot write {what}")]
    Write {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{}: invalid kpack archive at offset {offset}: {problem}", path.display())]
    Format {
        path: PathBuf,
        offset: u64,
        problem: FormatProblem,
    },
    #[error("{}: no code object for binary {binary:?} and target {target}", path.display())]
    KernelNotFound {
        path: PathBuf,
        binary: String,
        target: String,
    },
    /// Every archive that lists a compatible target lacks the binary's key.
    #[error("no archive holds {binary:?}; {}", display_misses(misses))]
    KernelNotFoundAnywhere {
        binary: String,
        misses: Vec<(PathBuf, Target)>,
    },
    #[error("{}: code object {binary:?} for {target} (ordinal {ordinal}): {problem}", path.display())]
    Decompression {
        path: PathBuf,
        binary: String,
        target: String,
        ordinal: u32,
        problem: DecompressionProblem,
    },
    #[error("cannot allocate {size} bytes")]
    OutOfMemory { size: usize },
    #[error("kpack loading is disabled by ROCM_KPACK_DISABLE")]
    Disabled,
    #[error("invalid kpack marker: {problem}")]
    InvalidMarker { problem: MarkerProblem },
    #[error("no kpack archive found; tried {}", display_paths(tried))]
    ArchiveNotFound { tried: Vec<PathBuf> },
    #[error(
        "no archive has code for {}; available: {}",
        join_targets(requested),
        display_available(available)
    )]
    ArchNotFound {
        requested: Vec<Target>,
        available: Vec<(PathBuf, Vec<Target>)>,
    },
    #[error("no file is mapped at address {address:#x}")]
    PathDiscovery { address: usize },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error(transparent)]
    Target(#[from] ParseTargetError),
    #[error("invalid archive contents: {0}")]
    InvalidInput(String),
}

/// What is wrong with an archive's header or table of contents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatProblem {
    #[error("{what} names more than {limit} targets")]
    TooManyTargets { what: &'static str, limit: usize },
    #[error("file is {len} bytes, shorter than the 16-byte header")]
    TooShort { len: u64 },
    #[error("bad magic {found:02x?}, expected \"KPAK\"")]
    BadMagic { found: [u8; 4] },
    #[error("unsupported header version {version} (this reader supports 1)")]
    UnsupportedVersion { version: u32 },
    #[error("unsupported TOC format_version {version} (this reader supports 1)")]
    UnsupportedTocVersion { version: u64 },
    #[error("toc_offset {toc_offset} is not inside [64, {file_len})")]
    TocOffsetOutOfRange { toc_offset: u64, file_len: u64 },
    #[error("malformed MessagePack: {0}")]
    Msgpack(MsgpackError),
    #[error("{what} is a {found}, expected a {expected}")]
    WrongType {
        what: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("missing key {key:?} in {context}")]
    MissingKey { key: &'static str, context: String },
    #[error("duplicate key {key:?} in {context}")]
    DuplicateKey { key: String, context: String },
    #[error("unknown compression scheme {scheme:?}")]
    UnknownScheme { scheme: String },
    #[error("unknown entry type {found:?} for {what}, expected \"hsaco\"")]
    UnknownEntryType { what: String, found: String },
    #[error("{what}: bad target")]
    BadTarget {
        what: String,
        #[source]
        source: ParseTargetError,
    },
    #[error("{what}: ordinal {ordinal} is past the {count} stored code objects")]
    OrdinalOutOfRange {
        what: String,
        ordinal: u64,
        count: usize,
    },
    #[error("{what}: bytes [{start}, {end}) are outside the blob region [64, {region_end})")]
    OutsideBlobRegion {
        what: String,
        start: u64,
        end: u64,
        region_end: u64,
    },
    #[error("{what} is {actual}, expected {expected}")]
    Mismatch {
        what: String,
        expected: u64,
        actual: u64,
    },
    #[error("{count} bytes after the table of contents")]
    TrailingBytes { count: u64 },
}

/// A MessagePack encoding error (as opposed to a well-formed value of the
/// wrong shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MsgpackError {
    #[error("truncated value")]
    Truncated,
    #[error("reserved marker byte 0xc1")]
    ReservedMarker,
    #[error("string is not UTF-8")]
    InvalidUtf8,
}

/// Why a code object could not be decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecompressionProblem {
    #[error("zstd: {0}")]
    Zstd(String),
    #[error("decompressed to {actual} bytes, expected {expected}")]
    SizeMismatch { expected: u64, actual: u64 },
    #[error("output buffer of {actual} bytes, need {expected}")]
    BufferSize { expected: u64, actual: u64 },
}

/// What is wrong with a `.rocm_kpack_ref` marker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MarkerProblem {
    #[error("malformed MessagePack at byte {offset}: {error}")]
    Msgpack { offset: usize, error: MsgpackError },
    #[error("not a map")]
    NotMap,
    #[error("missing key {0:?}")]
    MissingKey(&'static str),
    #[error("{0:?} has the wrong type")]
    WrongType(&'static str),
    #[error("kpack_search_paths holds no path")]
    NoPaths,
}

impl Error {
    /// The C API error number for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Open(source) if source.kind() == io::ErrorKind::NotFound => {
                ErrorCode::FileNotFound
            }
            // A path that exists but is no file: the I/O error a directory
            // always gave, not FILE_NOT_FOUND (it is there) nor
            // INVALID_ARGUMENT (kept for null and out-of-range arguments).
            Error::Open(_)
            | Error::NotAFile { .. }
            | Error::Read { .. }
            | Error::Mappings(_)
            | Error::CodeObject(_)
            | Error::Write { .. } => ErrorCode::IoError,
            Error::Format { problem, .. } => match problem {
                FormatProblem::UnsupportedVersion { .. }
                | FormatProblem::UnsupportedTocVersion { .. } => ErrorCode::UnsupportedVersion,
                FormatProblem::Msgpack(_) => ErrorCode::MsgpackParseFailed,
                _ => ErrorCode::InvalidFormat,
            },
            Error::KernelNotFound { .. } | Error::KernelNotFoundAnywhere { .. } => {
                ErrorCode::KernelNotFound
            }
            Error::Decompression { .. } => ErrorCode::DecompressionFailed,
            Error::OutOfMemory { .. } => ErrorCode::OutOfMemory,
            Error::Disabled => ErrorCode::NotImplemented,
            Error::InvalidMarker { .. } => ErrorCode::InvalidMetadata,
            Error::ArchiveNotFound { .. } => ErrorCode::ArchiveNotFound,
            Error::ArchNotFound { .. } => ErrorCode::ArchNotFound,
            Error::PathDiscovery { .. } => ErrorCode::PathDiscoveryFailed,
            Error::InvalidArgument(_) | Error::Target(_) | Error::InvalidInput(_) => {
                ErrorCode::InvalidArgument
            }
        }
    }
}

fn display_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "no path".to_owned();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn display_misses(misses: &[(PathBuf, Target)]) -> String {
    let each: Vec<String> = misses
        .iter()
        .map(|(path, target)| format!("{} ({target})", path.display()))
        .collect();
    format!("searched {}", each.join(", "))
}

fn display_available(available: &[(PathBuf, Vec<Target>)]) -> String {
    if available.is_empty() {
        return "nothing".to_owned();
    }
    available
        .iter()
        .map(|(path, targets)| format!("{} has [{}]", path.display(), join_targets(targets)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_names_each_cause_once() {
        let error = FormatProblem::BadTarget {
            what: "arch 0".into(),
            source: Target::parse("gfx90a:bogus").unwrap_err(),
        };
        let cause = Target::parse("gfx90a:bogus").unwrap_err().to_string();
        let report = kpack_error::one_line(&error);
        assert_eq!(report, format!("arch 0: bad target: {cause}"));
        assert_eq!(report.matches(&cause).count(), 1);
    }
}

//! Why a wheel cannot be split.

use std::path::PathBuf;

use crate::error::ImageError;

/// What is wrong with an input wheel, or what failed while splitting it.
/// `member` is a path inside the wheel.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WheelError {
    #[error("{}: not a wheel: {reason}", path.display())]
    NotAWheel {
        path: PathBuf,
        #[source]
        reason: NotAWheel,
    },
    #[error("{}: cannot read the zip archive", path.display())]
    Zip {
        path: PathBuf,
        #[source]
        source: zip::result::ZipError,
    },
    #[error("member {member:?}: cannot be read")]
    Member {
        member: String,
        #[source]
        source: std::io::Error,
    },
    #[error("member {member:?}: {source}")]
    MemberZip {
        member: String,
        #[source]
        source: zip::result::ZipError,
    },
    #[error("member {member:?}: unsafe path (absolute, `..`, backslash or empty part); refused")]
    UnsafePath { member: String },
    #[error("{}: two members have the same name (readers would disagree on its content); refused", path.display())]
    DuplicateMember { path: PathBuf },
    /// A member whose zip headers disagree, or whose data overlaps
    /// another's: readers going by the central directory (Python's
    /// `zipfile`) and by the local headers (streaming installers) would
    /// read different bytes, or refuse it.
    #[error("member {member:?}: {mismatch}; refused (zip readers would disagree on its content)")]
    ZipMismatch {
        member: String,
        mismatch: ZipMismatch,
    },
    /// With strict RECORD checking: a member RECORD does not describe.
    #[error("member {member:?}: {problem}; refused (RECORD is checked strictly)")]
    Record {
        member: String,
        problem: RecordProblem,
    },
    /// A decompression bomb, or (strict) a member larger than RECORD
    /// says: reading stopped one byte past `limit`.
    #[error(
        "member {member:?}: inflates to more than {limit} bytes, the size {given_by}; refused"
    )]
    Inflates {
        member: String,
        limit: u64,
        given_by: &'static str,
    },
    #[error("RECORD is not UTF-8")]
    RecordNotUtf8,
    #[error(transparent)]
    BadRecord {
        #[from]
        source: kpack_wheel::record::RecordError,
    },
    #[error("RECORD: hash {hash:?} for {path:?}: only sha256 is supported")]
    RecordNotSha256 { path: String, hash: String },
    #[error("RECORD: {path:?} listed twice")]
    RecordListedTwice { path: String },
    #[error("METADATA is not UTF-8")]
    MetadataNotUtf8,
    #[error("cannot read METADATA")]
    BadMetadata {
        #[source]
        source: kpack_wheel::MetadataError,
    },
    #[error("no device distribution name can be made")]
    BadName {
        #[source]
        source: kpack_wheel::InvalidName,
    },
    #[error("fat binary {member:?}: {reason}")]
    Placement {
        member: String,
        #[source]
        reason: Placement,
    },
    #[error("fat binary {member:?}: cannot split")]
    Split {
        member: String,
        #[source]
        source: ImageError,
    },
    #[error("the output {} would overwrite the input", path.display())]
    OverwritesInput { path: PathBuf },
    #[error("no variant label can be made")]
    VariantLabel {
        #[source]
        source: kpack_wheel::filename::InvalidLabel,
    },
    #[error("no variant property can be made")]
    VariantProperty {
        #[source]
        source: kpack_wheel::variants::InvalidProperty,
    },
    #[error("cannot write variant metadata")]
    Variants {
        #[source]
        source: kpack_wheel::variants::VariantsError,
    },
    /// A file-system call failed; the error (from fs-err or tempfile)
    /// names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Writing or signing the archives failed.
    #[error(transparent)]
    Packer(Box<crate::Error>),
    #[error("{}: cannot write the wheel", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: zip::result::ZipError,
    },
}

/// Why a file is not a wheel.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotAWheel {
    #[error("bad file name: {0}")]
    FileName(#[source] kpack_wheel::InvalidFilename),
    #[error("{0} .dist-info directories (one expected)")]
    DistInfoCount(usize),
    #[error("{dist_info} does not belong to distribution {dist}")]
    OtherDistribution { dist_info: String, dist: String },
    #[error("no {0}")]
    Missing(String),
    #[error("{name} is over {limit} bytes")]
    TooLarge { name: String, limit: u64 },
}

/// What is wrong with a line of RECORD.
/// Why a fat binary cannot be split where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Placement {
    #[error("at the wheel's root, outside any package: no place for .kpack/")]
    AtRoot,
    #[error("in the wheel's .data or .dist-info directory, installed outside the packages")]
    OutsidePackages,
    #[error("has a section for offload bundles but no device code")]
    NoDeviceCode,
}

/// How a member's zip headers disagree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ZipMismatch {
    #[error("no local header at offset {offset}, where the central directory puts it")]
    NoLocalHeader { offset: u64 },
    #[error("its local header names it {local:?}")]
    Name { local: String },
    #[error("its local header gives compression method {local}, the central directory {central}")]
    Method { local: u16, central: u16 },
    #[error("its local header gives CRC-32 {:08x} and sizes {} and {}, the central directory {:08x}, {} and {}", local.0, local.1, local.2, central.0, central.1, central.2)]
    Sizes {
        /// CRC-32, compressed and uncompressed size.
        local: (u32, u64, u64),
        central: (u32, u64, u64),
    },
    #[error("its data overlaps {other}")]
    Overlap { other: String },
}

/// How a member's row in RECORD disagrees with the member.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordProblem {
    #[error("not listed in RECORD")]
    NotListed,
    #[error("listed in RECORD without a hash")]
    Hashless,
    #[error("RECORD gives size {recorded}, the member has {actual}")]
    Size { recorded: u64, actual: u64 },
    #[error("RECORD gives {recorded}, the member has {actual}")]
    Hash { recorded: String, actual: String },
    #[error("listed in RECORD, not in the wheel")]
    NotInWheel,
}

//! Parsing and validating the table of contents.

use std::collections::{HashMap, HashSet};

use crate::error::FormatProblem;
use crate::format::{key, Metadata, Scheme, ENTRY_TYPE_HSACO, MAX_TARGETS, TOC_FORMAT_VERSION};
use crate::msgpack::{Cursor, ReadError};
use kpack_gpu::target::Target;

/// A TOC problem and the offset (relative to the TOC start) where it is.
pub(super) type TocError = (usize, FormatProblem);

/// The TOC as parsed, before the blob region is checked against it.
#[derive(Debug)]
pub(super) struct Toc {
    pub group: String,
    pub family: String,
    pub arches: Vec<Target>,
    pub scheme: Scheme,
    /// Distinct targets named in `toc`, in first-seen order.
    pub targets: Vec<Target>,
    pub binaries: Vec<Binary>,
    pub blobs: Option<Vec<BlobEntry>>,
    pub zstd_region: Option<(u64, u64)>,
}

#[derive(Debug)]
pub(super) struct Binary {
    pub name: Box<str>,
    pub kernels: Vec<KernelEntry>,
}

/// One `toc[binary][target]` entry.
#[derive(Debug, Clone, Copy)]
pub(super) struct KernelEntry {
    /// Index into [`Toc::targets`].
    pub target: u32,
    pub ordinal: u64,
    pub original_size: u64,
    /// Where its `metadata` value is, read only when asked for.
    pub metadata: Option<Span>,
}

/// A value's bytes, as offsets from the start of the TOC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Span {
    pub start: usize,
    pub end: usize,
}

/// The parts of an entry map the reader keeps.
struct EntryFields {
    ordinal: u64,
    original_size: u64,
    metadata: Option<Span>,
}

/// One element of `blobs` (scheme `none`).
#[derive(Debug, Clone, Copy)]
pub(super) struct BlobEntry {
    pub offset: u64,
    pub size: u64,
}

/// Parses the TOC bytes (everything from `toc_offset` to the end of file).
pub(super) fn parse(bytes: &[u8]) -> Result<Toc, TocError> {
    let mut c = Cursor::new(bytes);
    let top = read(&mut c, || "the table of contents", Cursor::map_len)?;
    let mut fields = TopLevel::default();
    for _ in 0..top {
        fields.read_one(&mut c)?;
    }
    if c.remaining() != 0 {
        return Err((
            c.pos(),
            FormatProblem::TrailingBytes {
                count: c.remaining() as u64,
            },
        ));
    }
    fields.finish(c.pos())
}

/// The top-level keys of a TOC as they are read, each at most once.
#[derive(Default)]
struct TopLevel {
    format_version: Option<u64>,
    group: Option<String>,
    family: Option<String>,
    arches: Option<Vec<Target>>,
    toc: Option<(Vec<Target>, Vec<Binary>)>,
    scheme: Option<Scheme>,
    blobs: Option<Vec<BlobEntry>>,
    zstd_offset: Option<u64>,
    zstd_size: Option<u64>,
}

/// Fills `slot`, which must still be empty: a key given twice is an error.
fn once<T>(slot: &mut Option<T>, value: T, at: usize, key: &str) -> Result<(), TocError> {
    if slot.is_some() {
        return Err((
            at,
            FormatProblem::DuplicateKey {
                key: key.to_owned(),
                context: "the table of contents".to_owned(),
            },
        ));
    }
    *slot = Some(value);
    Ok(())
}

impl TopLevel {
    /// Reads one key and its value; unknown keys are skipped.
    fn read_one(&mut self, c: &mut Cursor<'_>) -> Result<(), TocError> {
        let at = c.pos();
        let name = read(c, || "a top-level key", Cursor::str)?;
        match name {
            key::FORMAT_VERSION => {
                let value = read(c, || name, Cursor::uint)?;
                once(&mut self.format_version, value, at, name)
            }
            key::GROUP_NAME => {
                let value = read(c, || name, Cursor::str)?.to_owned();
                once(&mut self.group, value, at, name)
            }
            key::GFX_ARCH_FAMILY => {
                let value = read(c, || name, Cursor::str)?.to_owned();
                once(&mut self.family, value, at, name)
            }
            key::GFX_ARCHES => once(&mut self.arches, parse_arches(c)?, at, name),
            key::TOC => once(&mut self.toc, parse_binaries(c)?, at, name),
            key::COMPRESSION_SCHEME => {
                let value_at = c.pos();
                let value = read(c, || name, Cursor::str)?;
                let parsed = Scheme::from_name(value).ok_or_else(|| {
                    (
                        value_at,
                        FormatProblem::UnknownScheme {
                            scheme: value.to_owned(),
                        },
                    )
                })?;
                once(&mut self.scheme, parsed, at, name)
            }
            key::BLOBS => once(&mut self.blobs, parse_blobs(c)?, at, name),
            key::ZSTD_OFFSET => {
                let value = read(c, || name, Cursor::uint)?;
                once(&mut self.zstd_offset, value, at, name)
            }
            key::ZSTD_SIZE => {
                let value = read(c, || name, Cursor::uint)?;
                once(&mut self.zstd_size, value, at, name)
            }
            _ => skip(c),
        }
    }

    /// The TOC, once every key it needs was given (`end` locates a missing
    /// key's error).
    fn finish(self, end: usize) -> Result<Toc, TocError> {
        let missing = |key: &'static str| {
            (
                end,
                FormatProblem::MissingKey {
                    key,
                    context: "the table of contents".to_owned(),
                },
            )
        };
        let version = self
            .format_version
            .ok_or_else(|| missing(key::FORMAT_VERSION))?;
        if version != TOC_FORMAT_VERSION {
            return Err((0, FormatProblem::UnsupportedTocVersion { version }));
        }
        let scheme = self
            .scheme
            .ok_or_else(|| missing(key::COMPRESSION_SCHEME))?;
        let (targets, binaries) = self.toc.ok_or_else(|| missing(key::TOC))?;
        let mut parsed = Toc {
            group: self.group.ok_or_else(|| missing(key::GROUP_NAME))?,
            family: self.family.ok_or_else(|| missing(key::GFX_ARCH_FAMILY))?,
            arches: self.arches.ok_or_else(|| missing(key::GFX_ARCHES))?,
            scheme,
            targets,
            binaries,
            blobs: None,
            zstd_region: None,
        };
        match scheme {
            Scheme::None => parsed.blobs = Some(self.blobs.ok_or_else(|| missing(key::BLOBS))?),
            Scheme::ZstdPerKernel => {
                parsed.zstd_region = Some((
                    self.zstd_offset.ok_or_else(|| missing(key::ZSTD_OFFSET))?,
                    self.zstd_size.ok_or_else(|| missing(key::ZSTD_SIZE))?,
                ))
            }
        }
        Ok(parsed)
    }
}

/// Reads one value with `f`, turning a failure into a located problem.
/// `what` describes the value for the error message and is only evaluated
/// on failure, keeping the success path free of allocations.
fn read<'a, T, D: ToString>(
    c: &mut Cursor<'a>,
    what: impl FnOnce() -> D,
    f: impl FnOnce(&mut Cursor<'a>) -> Result<T, ReadError>,
) -> Result<T, TocError> {
    let at = c.pos();
    f(c).map_err(|error| (at, problem(error, what().to_string())))
}

fn problem(error: ReadError, what: String) -> FormatProblem {
    match error {
        ReadError::Msgpack(error) => FormatProblem::Msgpack(error),
        ReadError::WrongType { expected, found } => FormatProblem::WrongType {
            what,
            expected,
            found,
        },
    }
}

fn skip(c: &mut Cursor<'_>) -> Result<(), TocError> {
    let at = c.pos();
    c.skip()
        .map_err(|error| (at, FormatProblem::Msgpack(error)))
}

fn parse_target(c: &mut Cursor<'_>, what: &str) -> Result<Target, TocError> {
    let at = c.pos();
    let name = read(c, || what, Cursor::str)?;
    Target::parse(name).map_err(|source| {
        (
            at,
            FormatProblem::BadTarget {
                what: what.to_owned(),
                source,
            },
        )
    })
}

fn parse_arches(c: &mut Cursor<'_>) -> Result<Vec<Target>, TocError> {
    let at = c.pos();
    let count = read(c, || key::GFX_ARCHES, Cursor::array_len)?;
    if count > MAX_TARGETS {
        return Err((at, too_many_targets(key::GFX_ARCHES)));
    }
    let mut arches = Vec::with_capacity(count.min(c.remaining()));
    for _ in 0..count {
        arches.push(parse_target(c, "an element of gfx_arches")?);
    }
    Ok(arches)
}

fn parse_binaries(c: &mut Cursor<'_>) -> Result<(Vec<Target>, Vec<Binary>), TocError> {
    let count = read(c, || key::TOC, Cursor::map_len)?;
    let capacity = count.min(c.remaining());
    let mut binaries: Vec<Binary> = Vec::with_capacity(capacity);
    let mut seen_binaries: HashMap<&str, ()> = HashMap::with_capacity(capacity);
    let mut targets: Vec<Target> = Vec::new();
    let mut by_target: HashMap<Target, u32> = HashMap::new();
    let mut target_index: HashMap<&str, u32> = HashMap::new();
    // The targets one binary has an entry for, by index.
    let mut has_entry: HashSet<u32> = HashSet::new();

    for _ in 0..count {
        let at = c.pos();
        let name = read(c, || "a binary key in toc", Cursor::str)?;
        if seen_binaries.insert(name, ()).is_some() {
            return Err((
                at,
                FormatProblem::DuplicateKey {
                    key: name.to_owned(),
                    context: "toc".to_owned(),
                },
            ));
        }
        let what = || format!("toc[{name:?}]");
        let kernel_count = read(c, what, Cursor::map_len)?;
        let mut kernels: Vec<KernelEntry> = Vec::with_capacity(kernel_count.min(c.remaining()));
        has_entry.clear();
        for _ in 0..kernel_count {
            let at = c.pos();
            let target_name = read(c, || format!("a target key in {}", what()), Cursor::str)?;
            let target = match target_index.get(target_name) {
                Some(&index) => index,
                None => {
                    let parsed = Target::parse(target_name).map_err(|source| {
                        (
                            at,
                            FormatProblem::BadTarget {
                                what: what(),
                                source,
                            },
                        )
                    })?;
                    // Differently spelled keys for one target share an index.
                    let index = match by_target.get(&parsed) {
                        Some(&index) => index,
                        None if targets.len() >= MAX_TARGETS => {
                            return Err((at, too_many_targets(key::TOC)));
                        }
                        None => {
                            let index = targets.len() as u32;
                            by_target.insert(parsed.clone(), index);
                            targets.push(parsed);
                            index
                        }
                    };
                    target_index.insert(target_name, index);
                    index
                }
            };
            if !has_entry.insert(target) {
                return Err((
                    at,
                    FormatProblem::DuplicateKey {
                        key: target_name.to_owned(),
                        context: what(),
                    },
                ));
            }
            let fields = parse_entry(c, || format!("{}[{target_name:?}]", what()))?;
            kernels.push(KernelEntry {
                target,
                ordinal: fields.ordinal,
                original_size: fields.original_size,
                metadata: fields.metadata,
            });
        }
        binaries.push(Binary {
            name: name.into(),
            kernels,
        });
    }
    Ok((targets, binaries))
}

fn too_many_targets(what: &'static str) -> FormatProblem {
    FormatProblem::TooManyTargets {
        what,
        limit: MAX_TARGETS,
    }
}

/// Parses one entry map: its ordinal, size and where its metadata is.
fn parse_entry(c: &mut Cursor<'_>, what: impl Fn() -> String) -> Result<EntryFields, TocError> {
    let at = c.pos();
    let count = read(c, &what, Cursor::map_len)?;
    let mut entry_type = None;
    let mut ordinal = None;
    let mut original_size = None;
    let mut metadata = None;
    for _ in 0..count {
        let key_at = c.pos();
        let name = read(c, || format!("a key of {}", what()), Cursor::str)?;
        let slot = match name {
            key::TYPE => {
                let type_at = c.pos();
                let value = read(c, || format!("{}.type", what()), Cursor::str)?;
                if value != ENTRY_TYPE_HSACO {
                    return Err((
                        type_at,
                        FormatProblem::UnknownEntryType {
                            what: what(),
                            found: value.to_owned(),
                        },
                    ));
                }
                entry_type.replace(()).map(|_| ())
            }
            key::ORDINAL => ordinal
                .replace(read(c, || format!("{}.ordinal", what()), Cursor::uint)?)
                .map(|_| ()),
            key::ORIGINAL_SIZE => original_size
                .replace(read(
                    c,
                    || format!("{}.original_size", what()),
                    Cursor::uint,
                )?)
                .map(|_| ()),
            key::METADATA => {
                let start = c.pos();
                skip(c)?;
                metadata
                    .replace(Span {
                        start,
                        end: c.pos(),
                    })
                    .map(|_| ())
            }
            _ => {
                skip(c)?;
                None
            }
        };
        if slot.is_some() {
            return Err((
                key_at,
                FormatProblem::DuplicateKey {
                    key: name.to_owned(),
                    context: what(),
                },
            ));
        }
    }
    let missing = |key| {
        (
            at,
            FormatProblem::MissingKey {
                key,
                context: what(),
            },
        )
    };
    entry_type.ok_or_else(|| missing(key::TYPE))?;
    Ok(EntryFields {
        ordinal: ordinal.ok_or_else(|| missing(key::ORDINAL))?,
        original_size: original_size.ok_or_else(|| missing(key::ORIGINAL_SIZE))?,
        metadata,
    })
}

/// Reads an entry's `metadata` value (the bytes of `span` in `toc`): a
/// map whose string values are kept and other values skipped. Offsets in
/// errors are relative to the start of the TOC.
pub(super) fn parse_metadata(toc: &[u8], span: Span) -> Result<Metadata, TocError> {
    let bytes = toc.get(span.start..span.end).unwrap_or_default();
    let mut c = Cursor::new(bytes);
    let located = |(at, problem): TocError| (span.start + at, problem);
    let count = read(&mut c, || "an entry's metadata", Cursor::map_len).map_err(located)?;
    let mut metadata = Metadata::new();
    for _ in 0..count {
        let name = read(&mut c, || "a metadata key", Cursor::str).map_err(located)?;
        match c.str() {
            Ok(value) => metadata = metadata.with(name, value),
            Err(ReadError::WrongType { .. }) => skip(&mut c).map_err(located)?,
            Err(error) => return Err(located((c.pos(), problem(error, name.to_owned())))),
        }
    }
    Ok(metadata)
}

fn parse_blobs(c: &mut Cursor<'_>) -> Result<Vec<BlobEntry>, TocError> {
    let count = read(c, || key::BLOBS, Cursor::array_len)?;
    let mut blobs = Vec::with_capacity(count.min(c.remaining()));
    for index in 0..count {
        let at = c.pos();
        let what = || format!("blobs[{index}]");
        let fields = read(c, what, Cursor::map_len)?;
        let mut offset = None;
        let mut size = None;
        for _ in 0..fields {
            let key_at = c.pos();
            let name = read(c, || format!("a key of {}", what()), Cursor::str)?;
            let slot = match name {
                key::OFFSET => &mut offset,
                key::SIZE => &mut size,
                _ => {
                    skip(c)?;
                    continue;
                }
            };
            let value = read(c, || format!("{}.{name}", what()), Cursor::uint)?;
            if slot.replace(value).is_some() {
                return Err((
                    key_at,
                    FormatProblem::DuplicateKey {
                        key: name.to_owned(),
                        context: what(),
                    },
                ));
            }
        }
        let missing = |key| {
            (
                at,
                FormatProblem::MissingKey {
                    key,
                    context: what(),
                },
            )
        };
        blobs.push(BlobEntry {
            offset: offset.ok_or_else(|| missing(key::OFFSET))?,
            size: size.ok_or_else(|| missing(key::SIZE))?,
        });
    }
    Ok(blobs)
}

//! Materializing (08-hip-runtimes.md): a host-only binary and the archives
//! its marker names, for a set of installed targets, made into a fat
//! binary that any HIP runtime registers. Each wrapper gets an
//! uncompressed offload bundle holding the host entry and every code
//! object the archives hold for it that runs on an installed GPU: every
//! feature variant of an installed processor (the runtime chooses between
//! `xnack+` and `xnack-` by the GPU's live mode) and its generic target.
//!
//! The output is written as a stream: the input's bytes are copied by the
//! kernel, code objects are decoded into it a block at a time, never held
//! whole, and only the few records that change are patched afterwards, so
//! memory stays small whatever the binary's size. Its size is bounded
//! before anything is written ([`bound`]): the archives' code may decode to
//! what is declared or allowed for them, and each bundle and code object
//! stops at its planned length.

mod bound;

pub use bound::{undeclared_limit, BoundedArchives, MIN_UNDECLARED_LIMIT, UNDECLARED_RATIO};

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use memmap2::{Mmap, MmapMut};
use rocm_kpack::{Archive, Kernel, Loader, LoaderConfig, Marker, Target};

use crate::bundle::{write_ccob, OffloadBundleLayout};
use crate::error::{Error, ImageError, Result};
use crate::image::{MaterializePlan, SplitImage};

/// Alignment of code objects in a bundle, as clang lays them out.
const CODE_ALIGN: u64 = 4096;

/// Where the archives a binary's code comes from are.
#[derive(Debug, Clone)]
pub enum ArchiveSource {
    /// Where its marker points, as the runtime's loader finds them.
    Marker,
    /// Every `*.kpack` file in this directory.
    Dir(PathBuf),
}

/// What materializing one binary did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Materialized {
    /// Wrappers made fat again.
    pub wrappers: usize,
    /// Code objects put into bundles, over all wrappers.
    pub code_objects: usize,
    /// The targets whose code was put in, sorted.
    pub targets: Vec<Target>,
    /// Wrappers whose bundle got no code object (host entry only).
    pub empty: usize,
    /// The archives code was taken from.
    pub archives: Vec<PathBuf>,
    /// Bytes of the fat binary.
    pub size: u64,
}

/// How the bundles of a materialized binary are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BundleEncoding {
    /// Plain offload bundles, which every HIP runtime loads.
    #[default]
    Plain,
    /// Compressed bundles (CCOB v3, zstd, as clang's `--offload-compress`
    /// writes them), which HIP runtimes from ROCm 6.2 on load.
    Compressed,
}

/// Writes the binary at `input` materialized for `targets` to `output`
/// (atomically, with the input's mode), its bundles written as
/// `encoding` says, taking code from the archives `source` names; at
/// least one must exist. Their code objects may decode to `limit` bytes in
/// all, or with none given, each to what an archive that declares nothing
/// may ([`undeclared_limit`]).
pub fn materialize_file(
    input: &Path,
    output: &Path,
    targets: &[Target],
    source: &ArchiveSource,
    limit: Option<u64>,
    encoding: BundleEncoding,
) -> Result<Materialized> {
    let file = fs_err::File::open(input)?;
    let marker = read_marker(file.file(), input)?;
    let archives = open_archives(&marker, input, targets, source)?;
    if archives.is_empty() {
        return Err(Error::NoArchives {
            path: input.to_owned(),
            targets: kpack_gpu::target::join_targets(targets),
        });
    }
    let archives = match limit {
        Some(limit) => BoundedArchives::within(archives, limit)?,
        None => BoundedArchives::undeclared(archives)?,
    };
    let mode = file.metadata()?.permissions().mode();
    let out = kpack_fs::AtomicFile::with_mode(output, mode & 0o7777)?;
    let destination = Destination {
        file: out.file(),
        path: output,
        spool_dir: output.parent().unwrap_or(Path::new(".")),
    };
    let report = materialize_into(
        file.file(),
        input,
        destination,
        targets,
        &archives,
        encoding,
    )?;
    out.commit()?;
    Ok(report)
}

/// Whether `file` is a binary `kpack-pack split` wrote (an ELF or PE file
/// with a kpack marker); a file of neither format is not one.
pub fn is_split(file: &File, path: &Path) -> Result<bool> {
    let map = map_input(file, path)?;
    Ok(SplitImage::parse(&map)
        .map_err(|source| materialize_error(path, source))?
        .is_some())
}

/// The marker of the split binary `file`.
pub fn read_marker(file: &File, path: &Path) -> Result<Marker> {
    let map = map_input(file, path)?;
    let split = parse_split(&map, path)?;
    Ok(Marker::parse(split.marker_bytes())?)
}

/// Where a materialized binary is written: an empty file open for reading
/// and writing, its path (for errors), and a directory on the same disk
/// where compressed bundles are spooled (in a file without a name, gone
/// when closed).
#[derive(Debug, Clone, Copy)]
pub struct Destination<'a> {
    pub file: &'a File,
    pub path: &'a Path,
    pub spool_dir: &'a Path,
}

/// Writes the split binary `input` (at `path`) materialized for `targets`
/// into `output`, its bundles written as `encoding` says, taking code
/// from `archives`, the first holding a target winning: each checked
/// against what it may decode to, so the output is at most the input,
/// their code and its bundles' headers and alignment. With no archive, or
/// none holding code for the targets, every wrapper gets a bundle with
/// only the host entry.
pub fn materialize_into(
    input: &File,
    path: &Path,
    output: Destination<'_>,
    targets: &[Target],
    archives: &BoundedArchives,
    encoding: BundleEncoding,
) -> Result<Materialized> {
    let archives = archives.archives();
    let map = map_input(input, path)?;
    let split = parse_split(&map, path)?;
    let planned = plan_bundles(&split, archives, targets)?;
    let output_path = output.path;
    let written = |source| Error::WriteMaterialized {
        path: output_path.to_owned(),
        source,
    };
    let bundles = EncodedBundles::encode(planned, encoding, output.spool_dir).map_err(written)?;
    let plan = MaterializePlan::new(&map, &split, &bundles.lens())
        .map_err(|source| materialize_error(path, source))?;
    let mut reader = input;
    reader.seek(SeekFrom::Start(0)).map_err(written)?;
    let mut writer = output.file;
    plan.write(&mut reader, &mut writer, |index, out| {
        bundles.write(index, out).map_err(written)
    })?;
    let output = output.file;
    writer.flush().map_err(written)?;
    let size = plan.output_len(map.len() as u64);
    // SAFETY: the output is a file this call was given to write, private
    // to it until committed; nothing else truncates it while mapped.
    let mut out = unsafe { MmapMut::map_mut(output) }.map_err(|source| Error::Map {
        path: output_path.to_owned(),
        source,
    })?;
    plan.patch(&mut out, &split)
        .map_err(|source| materialize_error(path, source))?;
    out.flush().map_err(written)?;
    Ok(report(&split, &bundles.planned, archives, size))
}

/// The bytes the code objects put into the split binary `input`'s
/// bundles decode to when it is materialized for `targets` from
/// `archives`, every use of a TOC entry counted: what [`materialize_into`]
/// would decode into it, found without writing anything, so that whoever
/// materializes many binaries can bound them all before the first.
pub fn planned_code_size(
    input: &File,
    path: &Path,
    targets: &[Target],
    archives: &BoundedArchives,
) -> Result<u64> {
    let map = map_input(input, path)?;
    let split = parse_split(&map, path)?;
    let planned = plan_bundles(&split, archives.archives(), targets)?;
    Ok(planned
        .values()
        .flat_map(|bundle| &bundle.code)
        .map(Kernel::size)
        .fold(0, u64::saturating_add))
}

/// The bundle each wrapper of `split` gets, by bundle index.
fn plan_bundles<'a>(
    split: &SplitImage<'_>,
    archives: &'a [Archive],
    targets: &[Target],
) -> Result<BTreeMap<u32, PlannedBundle<'a>>> {
    let marker = Marker::parse(split.marker_bytes())?;
    let host = split.host_triple();
    let indices: BTreeSet<u32> = split.wrapper_bundles().into_iter().collect();
    let mut planned = BTreeMap::new();
    for index in indices {
        let key = format!("{}#{index}", marker.kernel_name);
        planned.insert(index, PlannedBundle::plan(host, archives, &key, targets)?);
    }
    Ok(planned)
}

/// The bundles the wrappers get, by bundle index: planned, and with
/// compression, compressed into a spool beside the output (so neither a
/// plain nor a compressed bundle is held whole).
struct EncodedBundles<'a> {
    planned: BTreeMap<u32, PlannedBundle<'a>>,
    /// With compression, where each compressed bundle is.
    spooled: Option<Spool>,
}

/// Compressed bundles in a file without a name: each one's offset and
/// length in it, by bundle index.
struct Spool {
    file: File,
    ranges: BTreeMap<u32, (u64, u64)>,
}

impl<'a> EncodedBundles<'a> {
    fn encode(
        planned: BTreeMap<u32, PlannedBundle<'a>>,
        encoding: BundleEncoding,
        spool_dir: &Path,
    ) -> std::io::Result<EncodedBundles<'a>> {
        if encoding == BundleEncoding::Plain {
            return Ok(EncodedBundles {
                planned,
                spooled: None,
            });
        }
        let mut spool = tempfile::tempfile_in(spool_dir)?;
        let mut ranges = BTreeMap::new();
        for (&index, bundle) in &planned {
            let start = spool.stream_position()?;
            let len = write_ccob(&mut spool, bundle.layout.len(), |out| {
                bundle.write(out).map_err(std::io::Error::other)
            })?;
            ranges.insert(index, (start, len));
        }
        Ok(EncodedBundles {
            planned,
            spooled: Some(Spool {
                file: spool,
                ranges,
            }),
        })
    }

    /// Each bundle's length as written.
    fn lens(&self) -> BTreeMap<u32, u64> {
        match &self.spooled {
            Some(spool) => spool
                .ranges
                .iter()
                .map(|(&i, &(_, len))| (i, len))
                .collect(),
            None => self
                .planned
                .iter()
                .map(|(&i, b)| (i, b.layout.len()))
                .collect(),
        }
    }

    /// Writes bundle `index` into `out`.
    fn write(&self, index: u32, out: &mut dyn Write) -> std::io::Result<()> {
        let missing = || std::io::Error::other(format!("no bundle planned for index {index}"));
        match &self.spooled {
            Some(spool) => {
                let &(start, len) = spool.ranges.get(&index).ok_or_else(missing)?;
                let mut reader = &spool.file;
                reader.seek(SeekFrom::Start(start))?;
                std::io::copy(&mut reader.take(len), out)?;
                Ok(())
            }
            None => self
                .planned
                .get(&index)
                .ok_or_else(missing)?
                .write(out)
                .map_err(std::io::Error::other),
        }
    }
}

/// The bundle one wrapper gets: its layout and the code objects to fill it.
struct PlannedBundle<'a> {
    layout: OffloadBundleLayout,
    code: Vec<Kernel<'a>>,
}

impl<'a> PlannedBundle<'a> {
    /// The bundle for TOC key `key`: the host entry, then the code objects
    /// `targets` want, sorted by triple as clang orders them.
    fn plan(
        host: &str,
        archives: &'a [Archive],
        key: &str,
        targets: &[Target],
    ) -> Result<PlannedBundle<'a>> {
        let mut code: BTreeMap<String, Kernel<'a>> = BTreeMap::new();
        for archive in archives {
            let Some(held) = archive.targets_of(key) else {
                continue;
            };
            for target in held.filter(|t| wanted(t, targets)) {
                let triple = format!("hipv4-amdgcn-amd-amdhsa--{target}");
                if let std::collections::btree_map::Entry::Vacant(slot) = code.entry(triple) {
                    let kernel = archive.find(key, target)?;
                    kernel.check_frame()?;
                    slot.insert(kernel);
                }
            }
        }
        let layout = OffloadBundleLayout::plan(
            host,
            code.iter().map(|(triple, k)| (triple.as_str(), k.size())),
            CODE_ALIGN,
        );
        Ok(PlannedBundle {
            layout,
            code: code.into_values().collect(),
        })
    }

    /// Writes the bundle, decoding one code object at a time into it as a
    /// stream.
    fn write(&self, out: &mut dyn Write) -> Result<()> {
        self.layout.write(out, |index, write| {
            let kernel = self.code.get(index).ok_or_else(|| {
                std::io::Error::other(format!("no code object planned at entry {index}"))
            })?;
            kernel.write_to(&mut Passed(write))?;
            Ok::<(), Error>(())
        })
    }
}

/// A writer passing every piece to a bundle layout's entry writer.
struct Passed<'a>(&'a mut dyn FnMut(&[u8]) -> std::io::Result<()>);

impl Write for Passed<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        (self.0)(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What materializing did, for the caller to report.
fn report(
    split: &SplitImage<'_>,
    bundles: &BTreeMap<u32, PlannedBundle<'_>>,
    archives: &[Archive],
    size: u64,
) -> Materialized {
    let targets: BTreeSet<Target> = bundles
        .values()
        .flat_map(|b| b.code.iter().map(|k| k.target().clone()))
        .collect();
    let wrappers = split.wrapper_bundles();
    let per_wrapper = |bundle: &u32| bundles.get(bundle).map_or(0, |b| b.code.len());
    Materialized {
        wrappers: wrappers.len(),
        code_objects: wrappers.iter().map(per_wrapper).sum(),
        empty: wrappers.iter().filter(|w| per_wrapper(w) == 0).count(),
        targets: targets.into_iter().collect(),
        archives: archives.iter().map(|a| a.path().to_owned()).collect(),
        size,
    }
}

/// Maps the input read-only: only the pages its headers, wrappers and
/// relocations lie on are read through the mapping.
fn map_input(file: &File, path: &Path) -> Result<Mmap> {
    // SAFETY: read-only and private to this call; like every reader of
    // mapped files we rely on the input not being truncated meanwhile.
    unsafe { Mmap::map(file) }.map_err(|source| Error::Map {
        path: path.to_owned(),
        source,
    })
}

fn parse_split<'a>(data: &'a [u8], path: &Path) -> Result<SplitImage<'a>> {
    SplitImage::parse(data)
        .map_err(|source| materialize_error(path, source))?
        .ok_or_else(|| Error::NotSplit {
            path: path.to_owned(),
        })
}

fn materialize_error(path: &Path, source: impl Into<ImageError>) -> Error {
    Error::Materialize {
        path: path.to_owned(),
        source: source.into(),
    }
}

/// Whether code built for `code` is for one of the installed `targets`:
/// any feature variant of an installed processor, or its generic target.
fn wanted(code: &Target, targets: &[Target]) -> bool {
    targets.iter().any(|gpu| {
        code.processor() == gpu.processor()
            || gpu
                .generic()
                .is_some_and(|generic| generic.processor() == code.processor())
    })
}

/// The archives to take code from, in the order they are searched.
pub fn open_archives(
    marker: &Marker,
    binary: &Path,
    targets: &[Target],
    source: &ArchiveSource,
) -> Result<Vec<Archive>> {
    let paths = match source {
        ArchiveSource::Marker => {
            let arches: Vec<Target> = targets.iter().flat_map(Target::selection_order).collect();
            Loader::new(LoaderConfig::default()).candidates(marker, binary, &arches)
        }
        ArchiveSource::Dir(dir) => {
            let mut paths: Vec<PathBuf> = fs_err::read_dir(dir)?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|path| path.extension().is_some_and(|e| e == "kpack"))
                .collect();
            paths.sort();
            paths
        }
    };
    let mut archives = Vec::new();
    for path in paths {
        match Archive::open(&path) {
            Ok(archive) => archives.push(archive),
            Err(rocm_kpack::Error::Open(error)) if error.kind() == std::io::ErrorKind::NotFound => {
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(archives)
}

//! Grouping code objects into kpack archives and writing them.
//!
//! By default there is one archive per processor (`<group>_<processor>.kpack`,
//! the layout ROCm's TheRock packaging uses), holding that processor's
//! feature variants under their full target names; markers then name
//! `<group>_@GFXARCH@.kpack` and the runtime's feature fallback finds it.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
mod file;

use std::path::{Path, PathBuf};

use rocm_kpack::{
    ArchiveOptions, ArchiveWriter, BinaryKey, CodeSource, Compression, Metadata, StoredBlob, Target,
};

use crate::error::{Error, Result};
use crate::pipeline::{self, MemoryBudget};
use crate::spool::Spool;
use file::ArchiveFile;
use kpack_binary::bundle::{Bundle, CodeBytes};

/// Placeholder the runtime expands to each compatible target.
pub const GFXARCH: &str = "@GFXARCH@";

/// File name of the archive for one processor.
pub fn processor_archive_name(group: &str, processor: &str) -> String {
    format!("{group}_{processor}.kpack")
}

/// The marker path pattern for per-processor archives.
pub fn processor_archive_pattern(group: &str) -> String {
    processor_archive_name(group, GFXARCH)
}

/// How code objects are grouped into archives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grouping {
    /// `<group>_<processor>.kpack`, found through `@GFXARCH@`.
    #[default]
    Processor,
    /// `<group>_<family>.kpack` (`rocm_gfx110X-all.kpack`), each family
    /// archive named explicitly in the markers.
    Family,
}

impl Grouping {
    /// What names the archive a target's code goes into.
    pub fn archive_key(self, target: &Target) -> &str {
        match self {
            Grouping::Processor => target.processor(),
            Grouping::Family => kpack_gpu::family::packaging_family(target.processor()),
        }
    }

    /// Marker paths for a binary with code for `targets`, each behind
    /// `prefix` (the path from the binary's directory to `.kpack/`).
    pub fn search_paths(self, group: &str, prefix: &str, targets: &[Target]) -> Vec<String> {
        match self {
            Grouping::Processor => vec![format!("{prefix}{}", processor_archive_pattern(group))],
            Grouping::Family => {
                let mut names: Vec<String> = targets
                    .iter()
                    .map(|t| {
                        format!(
                            "{prefix}{}",
                            processor_archive_name(group, self.archive_key(t))
                        )
                    })
                    .collect();
                names.sort();
                names.dedup();
                names
            }
        }
    }
}

/// One code object on its way into an archive: borrowed from a mapped
/// input file where it is stored as is, owned when it was decompressed.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    pub binary: BinaryKey,
    pub target: Target,
    pub bytes: Cow<'a, [u8]>,
    /// The entry's TOC metadata (kernel database files record their
    /// library and path).
    pub metadata: Option<Metadata>,
}

impl Entry<'_> {
    /// The same entry owning its bytes.
    pub fn into_owned(self) -> Entry<'static> {
        Entry {
            binary: self.binary,
            target: self.target,
            bytes: Cow::Owned(self.bytes.into_owned()),
            metadata: self.metadata,
        }
    }
}

/// One unit of work for the archives: a code object read in place (an
/// uncompressed bundle's, a database file), or every code object of a
/// compressed bundle, decoded once as a stream.
#[derive(Debug, Clone)]
pub enum Unit<'a> {
    Whole(Entry<'a>),
    Compressed {
        /// The binary's key (`#N`, N the bundle's index).
        binary: BinaryKey,
        bundle: Bundle<'a>,
    },
}

impl Unit<'_> {
    /// Its code objects.
    pub fn code_objects(&self) -> usize {
        match self {
            Unit::Whole(_) => 1,
            Unit::Compressed { bundle, .. } => bundle.entries.len(),
        }
    }
}

/// An archive written to disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenArchive {
    pub path: PathBuf,
    pub targets: Vec<Target>,
    pub code_objects: usize,
    pub bytes: u64,
}

/// Writes one archive per processor into `dir`, entries in the order given
/// (which fixes the archive bytes), each archive atomically: test support,
/// for building archives from chosen entries.
#[cfg(feature = "test-fixtures")]
pub fn write_processor_archives(
    dir: &Path,
    group: &str,
    compression: Compression,
    entries: &[Entry<'_>],
) -> Result<Vec<WrittenArchive>> {
    write_archives(
        dir,
        group,
        Grouping::Processor,
        compression,
        entries,
        |_| {},
    )
}

/// Archives whose files stay open at once, at most. Past the bound, the
/// file of the one written longest ago is closed, and reopened when its
/// next code object comes, so a split into thousands of archives needs
/// few file handles.
pub const MAX_OPEN_ARCHIVES: usize = 32;

/// Archives whose files may stay open at once in this process: a quarter
/// of the files it may open (the rest for its inputs, the other threads'
/// archives and its output), between 2 and [`MAX_OPEN_ARCHIVES`].
pub fn open_archive_limit() -> usize {
    kpack_fs::open_file_limit()
        .map_or(MAX_OPEN_ARCHIVES, |files| {
            usize::try_from(files / 4).unwrap_or(MAX_OPEN_ARCHIVES)
        })
        .clamp(2, MAX_OPEN_ARCHIVES)
}

/// An archive being written: its file and what went in.
#[derive(Debug)]
struct Writing {
    path: PathBuf,
    writer: ArchiveWriter<ArchiveFile>,
    code_objects: usize,
    /// Each distinct target added, with whether a binary's code (rather
    /// than a database file) came for it, in the order they came.
    seen: Vec<(Target, bool)>,
    /// When it was last written to, while its file is open.
    used: Option<u64>,
}

/// Writes one archive per processor or family into `dir`, each atomically,
/// from `entries` in the order given (which fixes the archive bytes);
/// `done` is called as for [`ArchiveSet::add`].
pub fn write_archives(
    dir: &Path,
    group: &str,
    grouping: Grouping,
    compression: Compression,
    entries: &[Entry<'_>],
    done: impl Fn(&[u8]) + Sync,
) -> Result<Vec<WrittenArchive>> {
    let units: Vec<Unit<'_>> = entries.iter().cloned().map(Unit::Whole).collect();
    let mut archives = ArchiveSet::new(dir, group, grouping, compression);
    archives.add(&units, done)?;
    archives.finish()
}

/// The targets an archive lists (`gfx_arches`), from the targets added to
/// it in order (`seen`) and the processors any archive got a binary's code
/// for (`with_code`).
///
/// The runtime's loader picks, for a GPU, the first of its compatible
/// targets (most specific first) that an archive lists, then looks a binary
/// up for exactly that target. So for a processor the archives hold
/// binaries' code for, only the binaries' targets are listed: a kernel
/// database file's `gfx90a:xnack-` beside a binary's plain `gfx90a` code
/// (Debian's rocBLAS has exactly that) would hide the binary's code on an
/// `xnack-` GPU. For other processors the database files' targets are
/// listed, so the archive is still found and published for them. Database
/// files are read by key and target, listed or not.
fn listed_targets(seen: &[(Target, bool)], with_code: &HashSet<String>) -> Vec<Target> {
    let mut listed: Vec<Target> = Vec::new();
    for (target, binary) in seen {
        let listed_here = *binary || !with_code.contains(target.processor());
        if listed_here && !listed.contains(target) {
            listed.push(target.clone());
        }
    }
    listed
}

/// Archives written as code objects arrive, a batch of units at a time.
/// Each archive is opened when its first code object comes; the bytes
/// depend only on the order of the units added, never on the thread count
/// or the memory budget.
#[derive(Debug)]
pub struct ArchiveSet {
    dir: PathBuf,
    group: String,
    grouping: Grouping,
    compression: Compression,
    budget: MemoryBudget,
    archives: BTreeMap<String, Writing>,
    /// The archives whose files are open, by when each was last written
    /// to (`clock` counts the writes).
    recent: BTreeMap<u64, String>,
    clock: u64,
    /// How many archives' files may be open at once.
    open_limit: usize,
    /// Processors a binary's code came for, in any archive.
    with_code: HashSet<String>,
    scratch: bool,
}

impl ArchiveSet {
    /// Archives of group `group` in `dir`, none open yet, each written
    /// atomically.
    pub fn new(dir: &Path, group: &str, grouping: Grouping, compression: Compression) -> Self {
        ArchiveSet {
            dir: dir.to_owned(),
            group: group.to_owned(),
            grouping,
            compression,
            budget: MemoryBudget::DEFAULT,
            archives: BTreeMap::new(),
            recent: BTreeMap::new(),
            clock: 0,
            open_limit: open_archive_limit(),
            with_code: HashSet::new(),
            scratch: false,
        }
    }

    /// As [`ArchiveSet::new`], written as scratch files (neither synced
    /// nor renamed) for a caller that copies them elsewhere, as the wheel
    /// splitter does into the device wheels.
    pub fn scratch(dir: &Path, group: &str, grouping: Grouping, compression: Compression) -> Self {
        ArchiveSet {
            scratch: true,
            ..ArchiveSet::new(dir, group, grouping, compression)
        }
    }

    /// The memory the code objects in flight may use.
    pub fn with_budget(self, budget: MemoryBudget) -> Self {
        ArchiveSet { budget, ..self }
    }

    /// Adds the code objects of `units`, in order. They are hashed and
    /// compressed on every core the budget allows, a few units in flight,
    /// their stored bytes spooled beside the archives when large; `done`
    /// is called with the input bytes of each (a large code object a piece
    /// at a time, a compressed bundle once decoded), so a caller reading
    /// mapped files can drop those pages: memory stays bounded by the
    /// budget, not the input.
    pub fn add(&mut self, units: &[Unit<'_>], done: impl Fn(&[u8]) + Sync) -> Result<()> {
        if units.is_empty() {
            return Ok(());
        }
        fs_err::create_dir_all(&self.dir)?;
        let workers = self.budget.workers(rayon::current_num_threads());
        let (dir, compression) = (self.dir.clone(), self.compression);
        pipeline::in_order(
            units,
            (workers, self.budget.units()),
            |unit| prepare(unit, compression, &dir, &done),
            |prepared| self.add_prepared(prepared?),
        )
    }

    /// Copies one prepared unit into its archives.
    fn add_prepared(&mut self, prepared: Prepared) -> Result<()> {
        let mut stored = prepared.spool.into_reader()?;
        for (head, blob) in prepared.blobs {
            let binary = head.binary.index().is_some();
            if binary {
                self.with_code.insert(head.target.processor().to_owned());
            }
            let name = self.grouping.archive_key(&head.target);
            let Some(archive) = self.current(name)? else {
                continue;
            };
            if !archive.seen.contains(&(head.target.clone(), binary)) {
                archive.seen.push((head.target.clone(), binary));
            }
            archive.writer.add_stored(
                &head.binary,
                &head.target,
                &blob,
                &mut stored,
                head.metadata,
            )?;
            archive.code_objects += 1;
        }
        Ok(())
    }

    /// The archive of `name`, created when it is new, to be written to
    /// next: its file open, and at most [`open_archive_limit`] open, the
    /// one written to longest ago closed first.
    fn current(&mut self, name: &str) -> Result<Option<&mut Writing>> {
        let open = self.archives.get(name).is_some_and(|a| a.used.is_some());
        while !open && self.recent.len() >= self.open_limit {
            let Some((_, oldest)) = self.recent.pop_first() else {
                break;
            };
            if let Some(archive) = self.archives.get_mut(&oldest) {
                archive.used = None;
                archive.writer.get_mut().close()?;
            }
        }
        if !self.archives.contains_key(name) {
            let file = ArchiveFile::create(&self.dir, &self.group, name, self.scratch)?;
            let archive = Writing::start(file, &self.group, name, self.compression)?;
            self.archives.insert(name.to_owned(), archive);
        }
        self.clock += 1;
        let Some(archive) = self.archives.get_mut(name) else {
            return Ok(None);
        };
        if let Some(used) = archive.used.replace(self.clock) {
            self.recent.remove(&used);
        }
        self.recent.insert(self.clock, name.to_owned());
        Ok(Some(archive))
    }

    /// Finishes every archive and renames it into place.
    pub fn finish(self) -> Result<Vec<WrittenArchive>> {
        let mut written = Vec::new();
        for (_, mut archive) in self.archives {
            let targets = listed_targets(&archive.seen, &self.with_code);
            archive.writer.set_arches(targets.clone())?;
            written.push(archive.finish(targets)?);
        }
        Ok(written)
    }
}

/// Who a code object belongs to in the archive.
#[derive(Debug)]
struct Head {
    binary: BinaryKey,
    target: Target,
    metadata: Option<Metadata>,
}

/// A unit's code objects hashed and stored, their bytes in `spool`.
#[derive(Debug)]
struct Prepared {
    blobs: Vec<(Head, StoredBlob)>,
    spool: Spool,
}

/// Hashes and stores (compresses) the code objects of `unit` into a spool
/// in `dir`.
fn prepare(
    unit: &Unit<'_>,
    compression: Compression,
    dir: &Path,
    done: &(impl Fn(&[u8]) + Sync),
) -> Result<Prepared> {
    let mut spool = Spool::new(dir);
    let mut blobs = Vec::with_capacity(unit.code_objects());
    match unit {
        Unit::Whole(entry) => {
            let blob = StoredBlob::write(
                compression,
                CodeSource::Slice(&entry.bytes, done),
                &mut spool,
            )?;
            let head = Head {
                binary: entry.binary.clone(),
                target: entry.target.clone(),
                metadata: entry.metadata.clone(),
            };
            blobs.push((head, blob));
        }
        Unit::Compressed { binary, bundle } => {
            let code = bundle.for_each_code_object(|info, bytes| {
                let blob = match bytes {
                    CodeBytes::Slice(slice) => {
                        StoredBlob::write(compression, CodeSource::Slice(slice, done), &mut spool)
                    }
                    CodeBytes::Reader(reader) => StoredBlob::write(
                        compression,
                        CodeSource::Reader(reader, info.size),
                        &mut spool,
                    ),
                }
                .map_err(|source| code_object_error(source, binary, bundle.offset))?;
                let head = Head {
                    binary: binary.clone(),
                    target: info.target.clone(),
                    metadata: None,
                };
                blobs.push((head, blob));
                Ok::<(), Error>(())
            });
            code.map_err(|error| match error {
                Error::Bundle(source) => Error::Code {
                    binary: binary.clone(),
                    source,
                },
                error => error,
            })?;
            done(bundle.bytes());
        }
    }
    Ok(Prepared { blobs, spool })
}

/// A decoding error surfacing through the archive writer is the bundle's.
fn code_object_error(error: rocm_kpack::Error, binary: &BinaryKey, offset: usize) -> Error {
    match error {
        rocm_kpack::Error::CodeObject(source) => Error::Code {
            binary: binary.clone(),
            source: kpack_binary::bundle::decode_error(source, offset),
        },
        error => error.into(),
    }
}

impl Writing {
    /// Starts writing the archive for `name` (a processor or family) into
    /// `file`; the targets it lists are set when it is finished.
    fn start(
        (path, file): (PathBuf, ArchiveFile),
        group: &str,
        name: &str,
        compression: Compression,
    ) -> Result<Writing> {
        let options = ArchiveOptions {
            group: group.to_owned(),
            family: name.to_owned(),
            arches: Vec::new(),
            compression,
        };
        let writer = ArchiveWriter::new(file, options)?;
        Ok(Writing {
            path,
            writer,
            code_objects: 0,
            seen: Vec::new(),
            used: None,
        })
    }

    /// Finishes the archive and renames it into place.
    fn finish(self, targets: Vec<Target>) -> Result<WrittenArchive> {
        self.writer.finish()?.commit()?;
        let bytes = fs_err::metadata(&self.path)?.len();
        Ok(WrittenArchive {
            path: self.path,
            targets,
            code_objects: self.code_objects,
            bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(binary: BinaryKey, target: &str) -> Entry<'static> {
        Entry {
            binary,
            target: Target::parse(target).unwrap(),
            bytes: Cow::Borrowed(b"x"),
            metadata: None,
        }
    }

    /// The targets each archive written from `entries` lists.
    fn listed(entries: &[Entry<'_>], grouping: Grouping) -> Vec<(String, Vec<String>)> {
        let dir = tempfile::tempdir().unwrap();
        let written = write_archives(
            dir.path(),
            "rocm",
            grouping,
            Compression::DEFAULT,
            entries,
            |_| {},
        )
        .unwrap();
        written
            .iter()
            .map(|archive| {
                let read = rocm_kpack::Archive::open(&archive.path).unwrap();
                let targets: Vec<String> = read
                    .architectures()
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                assert_eq!(read.architectures(), &archive.targets[..]);
                (read.family().to_owned(), targets)
            })
            .collect()
    }

    #[test]
    fn database_targets_never_hide_a_binarys_code_from_the_loader() {
        let library = || BinaryKey::new("lib/librocblas.so.0.1", 0);
        let kernels = |target: &str| {
            let name = format!("rocblas/{target}/Kernels.so-000.hsaco");
            entry(BinaryKey::named(&name), target)
        };
        let entries = [
            entry(library(), "gfx90a"),
            kernels("gfx90a:xnack-"),
            kernels("gfx90a:xnack+"),
            kernels("gfx1010"),
            kernels("gfx1100"),
            entry(library(), "gfx1101"),
        ];
        // gfx90a and gfx1101 list the library's targets only; gfx1010 and
        // gfx1100, which it has no code for, their database files'.
        assert_eq!(
            listed(&entries, Grouping::Processor),
            [
                ("gfx1010".to_owned(), vec!["gfx1010".to_owned()]),
                ("gfx1100".to_owned(), vec!["gfx1100".to_owned()]),
                ("gfx1101".to_owned(), vec!["gfx1101".to_owned()]),
                ("gfx90a".to_owned(), vec!["gfx90a".to_owned()]),
            ]
        );
        // In one family archive, per processor all the same.
        assert_eq!(
            listed(&entries, Grouping::Family),
            [
                ("gfx101X-all".to_owned(), vec!["gfx1010".to_owned()]),
                (
                    "gfx110X-all".to_owned(),
                    vec!["gfx1100".to_owned(), "gfx1101".to_owned()]
                ),
                ("gfx90a-dcgpu".to_owned(), vec!["gfx90a".to_owned()]),
            ]
        );
    }
}

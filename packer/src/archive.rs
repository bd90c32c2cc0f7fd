//! Grouping code objects into kpack archives and writing them.
//!
//! By default there is one archive per processor (`<group>_<processor>.kpack`,
//! the layout ROCm's TheRock packaging uses), holding that processor's
//! feature variants under their full target names; markers then name
//! `<group>_@GFXARCH@.kpack` and the runtime's feature fallback finds it.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use kpack_fs::AtomicFile;
use rayon::prelude::*;
use rocm_kpack::{
    ArchiveOptions, ArchiveWriter, BinaryKey, Compression, Metadata, PreparedBlob, Target,
};

use crate::error::{Error, Result};

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
            Grouping::Family => rocm_kpack::family::packaging_family(target.processor()),
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

/// An archive written to disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenArchive {
    pub path: PathBuf,
    pub targets: Vec<Target>,
    pub code_objects: usize,
    pub bytes: u64,
}

/// Code objects compressed together, in parallel, before they are written:
/// bounds the memory in flight whatever the input size.
const CHUNK_BYTES: usize = 32 * 1024 * 1024;

/// Writes one archive per processor into `dir`, entries in the order given
/// (which fixes the archive bytes), each archive atomically.
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

/// An archive being written: its temporary file and what went in.
#[derive(Debug)]
struct Open {
    path: PathBuf,
    writer: ArchiveWriter<BufWriter<ArchiveFile>>,
    code_objects: usize,
}

/// Where an archive is written: atomically into place (synced, renamed),
/// or as a scratch file another step copies elsewhere (no sync).
#[derive(Debug)]
enum ArchiveFile {
    Atomic(AtomicFile),
    Scratch(fs_err::File),
}

impl Write for ArchiveFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            ArchiveFile::Atomic(file) => file.write(buf),
            ArchiveFile::Scratch(file) => file.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            ArchiveFile::Atomic(file) => file.flush(),
            ArchiveFile::Scratch(file) => file.flush(),
        }
    }
}

impl Seek for ArchiveFile {
    fn seek(&mut self, position: SeekFrom) -> std::io::Result<u64> {
        match self {
            ArchiveFile::Atomic(file) => file.seek(position),
            ArchiveFile::Scratch(file) => file.seek(position),
        }
    }
}

/// Writes one archive per processor or family into `dir`, each atomically.
///
/// Entries go in in the order given, which fixes the archive bytes. They
/// are compressed a chunk at a time on every core, and `done` is called
/// with each entry's bytes once they are compressed (a large entry, such as
/// a kernel database file, a piece at a time), so a caller reading from a
/// mapped file can drop those pages: memory stays bounded by the chunk and
/// the pieces, not the input.
pub fn write_archives(
    dir: &Path,
    group: &str,
    grouping: Grouping,
    compression: Compression,
    entries: &[Entry<'_>],
    done: impl Fn(&[u8]) + Sync,
) -> Result<Vec<WrittenArchive>> {
    fs_err::create_dir_all(dir)?;
    let listed = archive_targets(entries, grouping);
    let mut open = open_archives(dir, group, compression, &listed)?;
    let mut targets: BTreeMap<String, Vec<Target>> = listed
        .into_iter()
        .map(|(name, list)| (name.to_owned(), list))
        .collect();
    let mut rest = entries;
    while !rest.is_empty() {
        let (chunk, after) = rest.split_at(chunk_len(rest));
        add_chunk(&mut open, chunk, grouping, compression, &done)?;
        rest = after;
    }
    let mut written = Vec::new();
    for (name, archive) in open {
        written.push(archive.finish(targets.remove(&name).unwrap_or_default())?);
    }
    Ok(written)
}

/// The targets each archive lists (`gfx_arches`), keyed by its name: known
/// up front, as its header lists them.
///
/// The runtime's loader picks, for a GPU, the first of its compatible
/// targets (most specific first) that an archive lists, then looks a binary
/// up for exactly that target. So for a processor the archive holds
/// binaries' code for, only the binaries' targets are listed: a kernel
/// database file's `gfx90a:xnack-` beside a binary's plain `gfx90a` code
/// (Debian's rocBLAS has exactly that) would hide the binary's code on an
/// `xnack-` GPU. For other processors the database files' targets are
/// listed, so the archive is still found and published for them. Database
/// files are read by key and target, listed or not.
fn archive_targets<'e>(
    entries: &'e [Entry<'_>],
    grouping: Grouping,
) -> BTreeMap<&'e str, Vec<Target>> {
    let with_code: HashSet<&str> = entries
        .iter()
        .filter(|entry| entry.binary.index().is_some())
        .map(|entry| entry.target.processor())
        .collect();
    let mut targets: BTreeMap<&str, Vec<Target>> = BTreeMap::new();
    for entry in entries {
        let list = targets
            .entry(grouping.archive_key(&entry.target))
            .or_default();
        let listed =
            entry.binary.index().is_some() || !with_code.contains(entry.target.processor());
        if listed && !list.contains(&entry.target) {
            list.push(entry.target.clone());
        }
    }
    targets
}

/// Starts writing every archive in `dir`.
fn open_archives(
    dir: &Path,
    group: &str,
    compression: Compression,
    targets: &BTreeMap<&str, Vec<Target>>,
) -> Result<BTreeMap<String, Open>> {
    let mut open = BTreeMap::new();
    for (name, arches) in targets {
        let file = ArchiveFile::create(dir, group, name, false)?;
        let archive = Open::start(file, group, name, compression, arches.clone())?;
        open.insert((*name).to_owned(), archive);
    }
    Ok(open)
}

/// Archives written as code objects arrive, a batch at a time, for a
/// caller that cannot hold them all at once (a wheel's binaries are split a
/// few at a time). Each archive is opened when its first code object comes
/// and lists its targets in the order they came; the bytes depend only on
/// the order of the entries added.
#[derive(Debug)]
pub struct ArchiveSet {
    dir: PathBuf,
    group: String,
    grouping: Grouping,
    compression: Compression,
    open: BTreeMap<String, Open>,
    targets: BTreeMap<String, Vec<Target>>,
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
            open: BTreeMap::new(),
            targets: BTreeMap::new(),
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

    /// Adds `entries` in order (compressed a chunk at a time on every core,
    /// `done` called as for [`write_archives`]).
    pub fn add(&mut self, entries: &[Entry<'_>], done: impl Fn(&[u8]) + Sync) -> Result<()> {
        for entry in entries {
            let name = self.grouping.archive_key(&entry.target);
            if !self.open.contains_key(name) {
                let file = ArchiveFile::create(&self.dir, &self.group, name, self.scratch)?;
                let archive = Open::start(file, &self.group, name, self.compression, Vec::new())?;
                self.open.insert(name.to_owned(), archive);
            }
            let listed = self.targets.entry(name.to_owned()).or_default();
            if !listed.contains(&entry.target) {
                listed.push(entry.target.clone());
            }
        }
        let mut rest = entries;
        while !rest.is_empty() {
            let (chunk, after) = rest.split_at(chunk_len(rest));
            add_chunk(
                &mut self.open,
                chunk,
                self.grouping,
                self.compression,
                &done,
            )?;
            rest = after;
        }
        Ok(())
    }

    /// Finishes every archive and renames it into place.
    pub fn finish(mut self) -> Result<Vec<WrittenArchive>> {
        let mut written = Vec::new();
        for (name, archive) in self.open {
            written.push(archive.finish(self.targets.remove(&name).unwrap_or_default())?);
        }
        Ok(written)
    }
}

/// How many of `entries` (at least one) make the next chunk: up to
/// [`CHUNK_BYTES`] of code.
fn chunk_len(entries: &[Entry<'_>]) -> usize {
    let (mut len, mut bytes) = (0, 0);
    for entry in entries {
        if len > 0 && bytes >= CHUNK_BYTES {
            break;
        }
        bytes += entry.bytes.len();
        len += 1;
    }
    len
}

/// Compresses `chunk` on every core, then adds it to the open archives in
/// order, calling `done` with each entry's bytes as they are compressed
/// (a large entry a piece at a time).
fn add_chunk(
    open: &mut BTreeMap<String, Open>,
    chunk: &[Entry<'_>],
    grouping: Grouping,
    compression: Compression,
    done: &(impl Fn(&[u8]) + Sync),
) -> Result<()> {
    let blobs = chunk
        .par_iter()
        .map(|entry| PreparedBlob::new_streamed(compression, &entry.bytes, done))
        .collect::<Result<Vec<_>, _>>()?;
    for (entry, blob) in chunk.iter().zip(blobs) {
        let Some(archive) = open.get_mut(grouping.archive_key(&entry.target)) else {
            continue;
        };
        archive.writer.add_prepared_with_metadata(
            &entry.binary,
            &entry.target,
            blob,
            entry.metadata.clone(),
        )?;
        archive.code_objects += 1;
    }
    Ok(())
}

impl ArchiveFile {
    /// The file for the archive of `name` (a processor or family) in `dir`.
    fn create(dir: &Path, group: &str, name: &str, scratch: bool) -> Result<(PathBuf, Self)> {
        let path = dir.join(processor_archive_name(group, name));
        let file = if scratch {
            fs_err::create_dir_all(dir)?;
            ArchiveFile::Scratch(fs_err::File::create(&path)?)
        } else {
            ArchiveFile::Atomic(AtomicFile::create(&path)?)
        };
        Ok((path, file))
    }

    /// Makes the finished file appear at its path.
    fn commit(self) -> Result<()> {
        match self {
            ArchiveFile::Atomic(file) => file.commit()?,
            ArchiveFile::Scratch(file) => drop(file),
        }
        Ok(())
    }
}

impl Open {
    /// Starts writing the archive for `name` (a processor or family) into
    /// `file`, listing `arches` (empty: the targets added, as they come).
    fn start(
        (path, file): (PathBuf, ArchiveFile),
        group: &str,
        name: &str,
        compression: Compression,
        arches: Vec<Target>,
    ) -> Result<Open> {
        let options = ArchiveOptions {
            group: group.to_owned(),
            family: name.to_owned(),
            arches,
            compression,
        };
        let writer = ArchiveWriter::new(BufWriter::new(file), options)?;
        Ok(Open {
            path,
            writer,
            code_objects: 0,
        })
    }

    /// Finishes the archive and renames it into place.
    fn finish(self, targets: Vec<Target>) -> Result<WrittenArchive> {
        let temp = self
            .writer
            .finish()?
            .into_inner()
            // The buffer's last flush; its error names the archive.
            .map_err(|e| Error::Io(e.into_error()))?;
        temp.commit()?;
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

    fn listed(entries: &[Entry<'_>], grouping: Grouping) -> Vec<(String, Vec<String>)> {
        archive_targets(entries, grouping)
            .into_iter()
            .map(|(name, targets)| {
                let targets = targets.iter().map(ToString::to_string).collect();
                (name.to_owned(), targets)
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

//! Splitting an install tree: every fat ELF file (found by content) is
//! split, kernel database files (found by path, [`crate::databases`]) and
//! loose code objects with their companions (found by content,
//! [`crate::route`]) are routed per owner, everything else is copied,
//! symlinks stay symlinks, modes are kept, and one `.kpack/` at the root
//! holds the archives.
//!
//! Database files for one target leave the host tree: by default they are
//! copied into per-processor payloads beside it
//! (`<output>.payloads/<component>/<processor>/<relative path>`, see
//! [`crate::databases::payload`]); with [`DatabaseMode::Pack`] they go into
//! the archives ([`crate::databases::pack`]). Shared database files stay.
//! The host tree plus every payload is the input tree, fat binaries aside.
//!
//! The tree and the payloads are built in temporary directories beside
//! their destinations and renamed into place at the end, so a failure
//! leaves nothing behind.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use rocm_kpack::Compression;

use crate::archive::{ArchiveSet, Grouping, Unit, WrittenArchive};
use crate::databases::pack;
use crate::databases::payload::{default_payload_dir, write_payloads, DatabasePayload, DeviceFile};
use crate::error::{Error, Result};
use crate::pipeline::MemoryBudget;
use crate::route::{self, Candidate};
use crate::split::FatBinary;
use kpack_binary::code_object::{self, Embedded};
use kpack_binary::databases::Recognisers;
use kpack_binary::input::MappedFile;
use kpack_binary::BinaryFormat;
use rocm_kpack::format::KPACK_DIR;

/// What happens to kernel database files for one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DatabaseMode {
    /// Copied into per-processor payloads beside the host tree.
    #[default]
    Payloads,
    /// Stored in the kpack archives under `<library>/<target>/<name>`.
    Pack,
}

/// How a tree is split.
#[derive(Debug)]
pub struct TreeOptions {
    /// Archive group (`<group>_<processor>.kpack`).
    pub group: String,
    pub grouping: Grouping,
    pub compression: Compression,
    pub databases: DatabaseMode,
    /// Where payloads go (it must not exist); `None`: `<output>.payloads`.
    pub payload_dir: Option<PathBuf>,
    /// Which files are kernel database files.
    pub recognisers: Recognisers,
    /// The memory the code objects in flight may use.
    pub budget: MemoryBudget,
}

impl TreeOptions {
    /// Per-processor archives of group `group`, zstd level 3, database
    /// files of every known library into payloads beside the host tree.
    pub fn new(group: &str) -> TreeOptions {
        TreeOptions {
            group: group.to_owned(),
            grouping: Grouping::default(),
            compression: Compression::DEFAULT,
            databases: DatabaseMode::default(),
            payload_dir: None,
            recognisers: Recognisers::builtin(),
            budget: MemoryBudget::DEFAULT,
        }
    }
}

/// What a tree split did.
#[derive(Debug, Clone, Default)]
pub struct TreeReport {
    /// Regular files seen.
    pub files: usize,
    /// Of those, fat binaries split.
    pub binaries: usize,
    /// Of those, kernel database files routed by target.
    pub database_files: usize,
    /// Bytes of regular files read.
    pub bytes_in: u64,
    /// Bytes of the split binaries' host-only files.
    pub host_bytes_out: u64,
    /// Host-only files whose Authenticode signature the split removed (it
    /// no longer held), relative to the output.
    pub unsigned: Vec<PathBuf>,
    pub archives: Vec<WrittenArchive>,
    /// The database payloads, at their final place (none when packed).
    pub payloads: Vec<DatabasePayload>,
    /// Binaries embedding code objects outside offload bundles, which they
    /// load by their own means: left in the host tree as they are.
    pub embedded: Vec<(PathBuf, Vec<Embedded>)>,
}

/// One entry of the input tree, relative to its root.
#[derive(Debug)]
enum Item {
    Dir(PathBuf),
    File(PathBuf),
    Symlink(PathBuf),
}

/// Lists the tree under `root` (relative paths, parents before children,
/// sorted so the result does not depend on directory order).
fn walk(root: &Path) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let dir = root.join(&relative);
        let mut children: Vec<_> = fs_err::read_dir(&dir)?
            .map(|entry| entry.map(|e| e.file_name()))
            .collect::<std::io::Result<_>>()?;
        children.sort();
        for name in children.into_iter().rev() {
            let child = relative.join(&name);
            let path = root.join(&child);
            let kind = fs_err::symlink_metadata(&path)?.file_type();
            if kind.is_symlink() {
                items.push(Item::Symlink(child));
            } else if kind.is_dir() {
                items.push(Item::Dir(child.clone()));
                pending.push(child);
            } else if kind.is_file() {
                items.push(Item::File(child));
            }
            // Sockets, fifos and devices are not part of an install tree.
        }
    }
    items.sort_by(|a, b| key(a).cmp(key(b)));
    Ok(items)
}

fn key(item: &Item) -> &Path {
    match item {
        Item::Dir(p) | Item::File(p) | Item::Symlink(p) => p,
    }
}

/// The result of handling one regular file.
struct FileResult<'a> {
    bytes_in: u64,
    host_bytes: Option<u64>,
    /// Its host-only file, relative to the output, when it lost the
    /// signature the split made invalid.
    unsigned: Option<PathBuf>,
    /// A fat binary, whose code objects go into the archives.
    binary: Option<FatBinary<'a>>,
    /// Code objects it embeds outside offload bundles, by section.
    embedded: Vec<Embedded>,
}

/// The path from the directory of a file at `relative` to the root's
/// `.kpack/`, with a trailing slash.
fn kpack_prefix(relative: &Path) -> String {
    let depth = relative.parent().map_or(0, |p| p.components().count());
    format!("{}{KPACK_DIR}/", "../".repeat(depth))
}

/// Phase one for a file: ELF files are mapped for splitting, everything
/// else is copied now.
fn map_or_copy(input: &Path, output: &Path, relative: &Path) -> Result<Option<MappedFile>> {
    let source = input.join(relative);
    if BinaryFormat::of_path(&source)?.is_some() {
        return Ok(Some(MappedFile::open(&source)?));
    }
    let destination = output.join(relative);
    fs_err::copy(&source, &destination)?;
    Ok(None)
}

/// Phase two for an ELF file: if it has device code, write its host-only
/// file (its code objects are read later, from the mapping); copy it
/// otherwise.
fn split_or_copy<'a>(
    mapped: &'a MappedFile,
    output: &Path,
    relative: &Path,
    options: &TreeOptions,
) -> Result<FileResult<'a>> {
    let (group, grouping) = (options.group.as_str(), options.grouping);
    let source = mapped.path();
    let destination = output.join(relative);
    let data = mapped.bytes();
    let key = relative.to_string_lossy().replace('\\', "/");
    let prefix = kpack_prefix(relative);
    let binary = FatBinary::parse(data, &key, |targets| {
        grouping.search_paths(group, &prefix, targets)
    })
    .map_err(|source_error| Error::Split {
        path: source.to_owned(),
        source: source_error,
    })?;
    let embedded = code_object::embedded_in(data);
    let Some(binary) = binary else {
        fs_err::copy(source, &destination)?;
        return Ok(FileResult {
            bytes_in: data.len() as u64,
            host_bytes: None,
            unsigned: None,
            binary: None,
            embedded,
        });
    };
    let (layout, host) = binary.write_host_like(data, mapped.file(), &destination, source)?;
    Ok(FileResult {
        bytes_in: data.len() as u64,
        host_bytes: Some(host),
        unsigned: layout.removed_signature().then(|| relative.to_owned()),
        binary: Some(binary),
        embedded,
    })
}

/// Splits the tree at `input` into a new tree at `output` (which must not
/// exist) as `options` say.
pub fn split_tree_with(input: &Path, output: &Path, options: &TreeOptions) -> Result<TreeReport> {
    let staging = staging_dir(output)?;
    let items = walk(input)?;
    let (files, databases) = route(input, &items, &options.recognisers)?;
    let database_files = databases.len();
    // Archives hold database files for targets: with --pack-databases a
    // sub-family's or family's files, and code objects loaded by path,
    // still go into payloads.
    let (to_pack, to_payloads): (Vec<DeviceFile>, Vec<DeviceFile>) = match options.databases {
        DatabaseMode::Pack => databases.into_iter().partition(DeviceFile::packable),
        DatabaseMode::Payloads => (Vec::new(), databases),
    };
    let payloads = payload_staging(output, options, &to_payloads)?;
    make_dirs_and_symlinks(input, staging.path(), &items)?;
    let mapped = map_or_copy_all(input, staging.path(), &files)?;
    let results = mapped
        .par_iter()
        .map(|(relative, file)| split_or_copy(file, staging.path(), relative, options))
        .collect::<Result<Vec<_>>>()?;
    let embedded: Vec<(PathBuf, Vec<Embedded>)> = mapped
        .iter()
        .zip(&results)
        .filter(|(_, result)| !result.embedded.is_empty())
        .map(|((relative, _), result)| (relative.to_path_buf(), result.embedded.clone()))
        .collect();

    let mut report = TreeReport {
        files: files.len() + database_files,
        database_files,
        bytes_in: copied_bytes(input, &files, &mapped),
        embedded,
        ..TreeReport::default()
    };
    let mut units = tally(&mut report, results);
    let packed = pack::map_files(input, &to_pack)?;
    if !packed.is_empty() {
        units.extend(
            pack::entries(&to_pack, &packed)?
                .into_iter()
                .map(Unit::Whole),
        );
        report.bytes_in += packed.iter().map(|m| m.bytes().len() as u64).sum::<u64>();
    }
    if let Some(payloads) = &payloads {
        report.payloads = write_payloads(input, payloads.dir.path(), &to_payloads)?;
        report.bytes_in += report.payloads.iter().map(|p| p.bytes).sum::<u64>();
        fs_err::set_permissions(payloads.dir.path(), fs_err::metadata(input)?.permissions())?;
    }
    let mut archives = ArchiveSet::new(
        &staging.path().join(KPACK_DIR),
        &options.group,
        options.grouping,
        options.compression,
    )
    .with_budget(options.budget);
    archives.add(&units, |bytes| release(&mapped, &packed, bytes))?;
    report.archives = archives.finish()?;
    copy_modes(input, staging.path(), &items)?;
    move_into_place(staging, output, payloads, &mut report)?;
    Ok(report)
}

/// Sorts the tree's regular files into those split or copied and those
/// routed to an owner ([`crate::route`]: kernel database files by path,
/// code objects by content, with their companions); shared database files
/// stay with the first.
fn route<'i>(
    input: &Path,
    items: &'i [Item],
    recognisers: &Recognisers,
) -> Result<(Vec<&'i Path>, Vec<DeviceFile>)> {
    let paths: Vec<&Path> = items
        .iter()
        .filter_map(|item| match item {
            Item::File(relative) => Some(relative.as_path()),
            _ => None,
        })
        .collect();
    let code_objects = paths
        .par_iter()
        .map(|relative| Ok(code_object::read_file_header(&input.join(relative))?.map(|c| c.target)))
        .collect::<Result<Vec<_>>>()?;
    let candidates: Vec<Candidate<'_>> = paths
        .iter()
        .zip(&code_objects)
        .map(|(path, code_object)| Candidate {
            path,
            code_object: code_object.as_ref(),
        })
        .collect();
    let mut files = Vec::new();
    let mut devices = Vec::new();
    for (path, routed) in paths.iter().zip(route::route(&candidates, recognisers)) {
        match routed {
            Some(device) => devices.push(device),
            None => files.push(*path),
        }
    }
    Ok((files, devices))
}

/// Adds the files' results up into `report` and gathers their code
/// objects' units, in file order.
fn tally<'a>(report: &mut TreeReport, results: Vec<FileResult<'a>>) -> Vec<Unit<'a>> {
    let mut units = Vec::new();
    for result in results {
        report.bytes_in += result.bytes_in;
        if let Some(host) = result.host_bytes {
            report.binaries += 1;
            report.host_bytes_out += host;
        }
        report.unsigned.extend(result.unsigned);
        if let Some(binary) = result.binary {
            units.extend(binary.units());
        }
    }
    units
}

/// Drops the pages under `bytes`, written into an archive, from whichever
/// mapped input holds them.
fn release(mapped: &[(&Path, MappedFile)], packed: &[MappedFile], bytes: &[u8]) {
    mapped.iter().for_each(|(_, file)| file.release(bytes));
    packed.iter().for_each(|file| file.release(bytes));
}

/// The payloads' staging directory and where it goes.
struct PayloadStaging {
    dir: tempfile::TempDir,
    destination: PathBuf,
}

/// Stages payloads beside their destination when there are database files
/// to copy into them; refuses a destination that exists or overlaps the
/// host tree.
fn payload_staging(
    output: &Path,
    options: &TreeOptions,
    databases: &[DeviceFile],
) -> Result<Option<PayloadStaging>> {
    if databases.is_empty() {
        return Ok(None);
    }
    let destination = match &options.payload_dir {
        Some(dir) => dir.clone(),
        None => default_payload_dir(output)?,
    };
    if destination.starts_with(output) || output.starts_with(&destination) {
        return Err(Error::NoPayloadDir { path: destination });
    }
    Ok(Some(PayloadStaging {
        dir: staging_dir(&destination)?,
        destination,
    }))
}

/// A private directory beside `output` to build the tree in, so that a
/// failure leaves nothing at `output`; refuses an `output` that exists.
fn staging_dir(output: &Path) -> Result<tempfile::TempDir> {
    if output.exists() {
        return Err(Error::OutputExists {
            path: output.to_owned(),
        });
    }
    let parent = output
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs_err::create_dir_all(parent)?;
    Ok(tempfile::Builder::new()
        .prefix(".kpack-split-")
        .tempdir_in(parent)?)
}

/// Makes the tree's directories and symlinks under `staging`: cheap, and
/// the files need their parents.
fn make_dirs_and_symlinks(input: &Path, staging: &Path, items: &[Item]) -> Result<()> {
    for item in items {
        match item {
            Item::Dir(relative) => {
                fs_err::create_dir(staging.join(relative))?;
            }
            Item::Symlink(relative) => {
                let target = fs_err::read_link(input.join(relative))?;
                symlink(&target, &staging.join(relative))?;
            }
            Item::File(_) => {}
        }
    }
    Ok(())
}

/// Maps the ELF files among `files` and copies the rest, in parallel: the
/// split binaries' code objects then stay borrowed from those mappings
/// until their archives are written, and their pages are dropped as they
/// go.
fn map_or_copy_all<'f>(
    input: &Path,
    staging: &Path,
    files: &[&'f Path],
) -> Result<Vec<(&'f Path, MappedFile)>> {
    Ok(files
        .par_iter()
        .map(|relative| Ok(map_or_copy(input, staging, relative)?.map(|m| (*relative, m))))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect())
}

/// Bytes of the files that were copied, not mapped (one that cannot be
/// measured counts nothing).
fn copied_bytes(input: &Path, files: &[&Path], mapped: &[(&Path, MappedFile)]) -> u64 {
    let elf_files: HashSet<&Path> = mapped.iter().map(|(relative, _)| *relative).collect();
    files
        .iter()
        .filter(|relative| !elf_files.contains(*relative))
        .map(|relative| {
            fs_err::metadata(input.join(relative))
                .map(|m| m.len())
                .unwrap_or(0)
        })
        .sum()
}

/// Gives the staged tree's directories their modes in the input, last (a
/// read-only directory must be filled first). The root too: the staging
/// directory was made private (0700).
fn copy_modes(input: &Path, staging: &Path, items: &[Item]) -> Result<()> {
    fs_err::set_permissions(staging, fs_err::metadata(input)?.permissions())?;
    for item in items {
        if let Item::Dir(relative) = item {
            let permissions = fs_err::metadata(input.join(relative))?.permissions();
            fs_err::set_permissions(staging.join(relative), permissions)?;
        }
    }
    Ok(())
}

/// Renames the staged payloads, then the staged tree, into place (removing
/// what was moved if a later rename fails) and points the report's paths
/// there.
fn move_into_place(
    staging: tempfile::TempDir,
    output: &Path,
    payloads: Option<PayloadStaging>,
    report: &mut TreeReport,
) -> Result<()> {
    let moved_payloads = match payloads {
        Some(payloads) => {
            let staged = rename_staged(payloads.dir, &payloads.destination)?;
            for payload in &mut report.payloads {
                repoint(&mut payload.dir, &staged, &payloads.destination);
            }
            Some(payloads.destination)
        }
        None => None,
    };
    let staged = match rename_staged(staging, output) {
        Ok(staged) => staged,
        Err(error) => {
            if let Some(moved) = moved_payloads {
                let _ = fs_err::remove_dir_all(moved);
            }
            return Err(error);
        }
    };
    for archive in &mut report.archives {
        repoint(&mut archive.path, &staged, output);
    }
    Ok(())
}

/// Renames a staged directory to `destination` (removing it if that
/// fails); returns where it was staged.
fn rename_staged(staging: tempfile::TempDir, destination: &Path) -> Result<PathBuf> {
    let staged = staging.keep();
    if let Err(error) = fs_err::rename(&staged, destination) {
        let _ = fs_err::remove_dir_all(&staged);
        return Err(error.into());
    }
    Ok(staged)
}

/// Points `path`, inside `staged`, at the same place inside `destination`.
fn repoint(path: &mut PathBuf, staged: &Path, destination: &Path) {
    if let Ok(relative) = path.strip_prefix(staged) {
        *path = destination.join(relative);
    }
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    fs_err::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    fs_err::copy(target, link).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_paths_climb_to_the_root() {
        assert_eq!(kpack_prefix(Path::new("libx.so")), ".kpack/");
        assert_eq!(kpack_prefix(Path::new("lib/libx.so")), "../.kpack/");
        assert_eq!(
            kpack_prefix(Path::new("lib/rocm/bin/app")),
            "../../../.kpack/"
        );
    }
}

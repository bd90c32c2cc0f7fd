//! Splitting an install tree: every fat ELF file (found by content) is
//! split, everything else is copied, symlinks stay symlinks, modes are
//! kept, and one `.kpack/` at the root holds the archives.
//!
//! The tree is built in a temporary directory beside the destination and
//! renamed into place at the end, so a failure leaves nothing behind.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use rocm_kpack::Compression;

use crate::archive::{write_archives, Entry, Grouping, WrittenArchive};
use crate::error::{Error, Result};
use crate::input::MappedFile;
use crate::split::{split_binary_with, write_like};

/// The directory holding the archives, at the root of a split tree.
pub const KPACK_DIR: &str = ".kpack";

/// What a tree split did.
#[derive(Debug, Clone, Default)]
pub struct TreeReport {
    /// Regular files seen.
    pub files: usize,
    /// Of those, fat binaries split.
    pub binaries: usize,
    /// Bytes of regular files read.
    pub bytes_in: u64,
    /// Bytes of the split binaries' host-only files.
    pub host_bytes_out: u64,
    pub archives: Vec<WrittenArchive>,
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
    entries: Vec<Entry<'a>>,
}

/// Whether the file starts like an ELF file (only those are read whole).
fn looks_like_elf(path: &Path) -> Result<bool> {
    let mut magic = [0u8; 4];
    let mut file = fs_err::File::open(path)?;
    match file.read_exact(&mut magic) {
        Ok(()) => Ok(magic == *b"\x7fELF"),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e.into()),
    }
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
    if looks_like_elf(&source)? {
        return MappedFile::open(&source).map(Some);
    }
    let destination = output.join(relative);
    fs_err::copy(&source, &destination)?;
    Ok(None)
}

/// Phase two for an ELF file: split it if it has device code (its code
/// objects stay borrowed from the mapping), copy it otherwise.
fn split_or_copy<'a>(
    mapped: &'a MappedFile,
    output: &Path,
    relative: &Path,
    group: &str,
    grouping: Grouping,
) -> Result<FileResult<'a>> {
    let source = mapped.path();
    let destination = output.join(relative);
    let data = mapped.bytes();
    let key = relative.to_string_lossy().replace('\\', "/");
    let prefix = kpack_prefix(relative);
    let split = split_binary_with(data, &key, |targets| {
        grouping.search_paths(group, &prefix, targets)
    })
    .map_err(|source_error| Error::Elf {
        path: source.to_owned(),
        source: source_error,
    })?;
    let Some(split) = split else {
        fs_err::copy(source, &destination)?;
        return Ok(FileResult {
            bytes_in: data.len() as u64,
            host_bytes: None,
            entries: Vec::new(),
        });
    };
    write_like(&destination, &split.host, source)?;
    Ok(FileResult {
        bytes_in: data.len() as u64,
        host_bytes: Some(split.host.len() as u64),
        entries: split.entries,
    })
}

/// Splits the tree at `input` into a new tree at `output` (which must not
/// exist), with archives of group `group` in `output/.kpack/`.
pub fn split_tree(
    input: &Path,
    output: &Path,
    group: &str,
    grouping: Grouping,
    compression: Compression,
) -> Result<TreeReport> {
    let staging = staging_dir(output)?;
    let items = walk(input)?;
    make_dirs_and_symlinks(input, staging.path(), &items)?;
    let files: Vec<&Path> = items
        .iter()
        .filter_map(|item| match item {
            Item::File(relative) => Some(relative.as_path()),
            _ => None,
        })
        .collect();
    let mapped = map_or_copy_all(input, staging.path(), &files)?;
    let results = mapped
        .par_iter()
        .map(|(relative, file)| split_or_copy(file, staging.path(), relative, group, grouping))
        .collect::<Result<Vec<_>>>()?;

    let mut report = TreeReport {
        files: files.len(),
        bytes_in: copied_bytes(input, &files, &mapped),
        ..TreeReport::default()
    };
    let mut entries = Vec::new();
    for result in results {
        report.bytes_in += result.bytes_in;
        if let Some(host) = result.host_bytes {
            report.binaries += 1;
            report.host_bytes_out += host;
        }
        entries.extend(result.entries);
    }
    if !entries.is_empty() {
        report.archives = write_archives(
            &staging.path().join(KPACK_DIR),
            group,
            grouping,
            compression,
            &entries,
            |bytes| mapped.iter().for_each(|(_, file)| file.release(bytes)),
        )?;
    }
    copy_modes(input, staging.path(), &items)?;
    move_into_place(staging, output, &mut report)?;
    Ok(report)
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

/// Renames the staged tree to `output` (removing it if that fails) and
/// points the report's archive paths there.
fn move_into_place(
    staging: tempfile::TempDir,
    output: &Path,
    report: &mut TreeReport,
) -> Result<()> {
    let staged = staging.keep();
    if let Err(error) = fs_err::rename(&staged, output) {
        let _ = fs_err::remove_dir_all(&staged);
        return Err(error.into());
    }
    for archive in &mut report.archives {
        if let Ok(relative) = archive.path.strip_prefix(&staged) {
            archive.path = output.join(relative);
        }
    }
    Ok(())
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

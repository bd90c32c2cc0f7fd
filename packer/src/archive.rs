//! Grouping code objects into kpack archives and writing them.
//!
//! By default there is one archive per processor (`<group>_<processor>.kpack`,
//! the layout ROCm's TheRock packaging uses), holding that processor's
//! feature variants under their full target names; markers then name
//! `<group>_@GFXARCH@.kpack` and the runtime's feature fallback finds it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use rocm_kpack::{ArchiveOptions, ArchiveWriter, BinaryKey, Compression, PreparedBlob, Target};

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

/// One code object on its way into an archive.
#[derive(Debug, Clone)]
pub struct Entry {
    pub binary: BinaryKey,
    pub target: Target,
    pub bytes: Vec<u8>,
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
/// (which fixes the archive bytes), each archive atomically.
pub fn write_processor_archives(
    dir: &Path,
    group: &str,
    compression: Compression,
    entries: &[Entry],
) -> Result<Vec<WrittenArchive>> {
    write_archives(dir, group, Grouping::Processor, compression, entries)
}

/// Writes one archive per processor or family into `dir`, entries in the
/// order given (which fixes the archive bytes), each archive atomically.
pub fn write_archives(
    dir: &Path,
    group: &str,
    grouping: Grouping,
    compression: Compression,
    entries: &[Entry],
) -> Result<Vec<WrittenArchive>> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    fs::create_dir_all(dir).map_err(io(dir))?;
    let mut by_archive: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for entry in entries {
        by_archive
            .entry(grouping.archive_key(&entry.target))
            .or_default()
            .push(entry);
    }
    let mut written = Vec::new();
    for (name, entries) in by_archive {
        let path = dir.join(processor_archive_name(group, name));
        let mut targets: Vec<Target> = Vec::new();
        for entry in &entries {
            if !targets.contains(&entry.target) {
                targets.push(entry.target.clone());
            }
        }
        let temp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
        let options = ArchiveOptions {
            group: group.to_owned(),
            family: name.to_owned(),
            arches: targets.clone(),
            compression,
        };
        // Compression runs on every core; adding in entry order keeps the
        // bytes the same whatever the thread count.
        let blobs = entries
            .par_iter()
            .map(|entry| PreparedBlob::new(compression, &entry.bytes))
            .collect::<Result<Vec<_>, _>>()?;
        let mut writer = ArchiveWriter::new(std::io::BufWriter::new(temp), options)?;
        for (entry, blob) in entries.iter().zip(blobs) {
            writer.add_prepared(&entry.binary, &entry.target, blob, None)?;
        }
        let temp = writer.finish()?.into_inner().map_err(|e| Error::Io {
            path: path.clone(),
            source: e.into_error(),
        })?;
        let bytes = temp.as_file().metadata().map_err(io(&path))?.len();
        temp.persist(&path).map_err(|e| Error::Io {
            path: path.clone(),
            source: e.error,
        })?;
        written.push(WrittenArchive {
            path,
            targets,
            code_objects: entries.len(),
            bytes,
        });
    }
    Ok(written)
}

//! The split binaries of an installed host distribution: the files its
//! `RECORD` lists that are host-only ELF files with a kpack marker (as
//! `kpack-pack wheel split` leaves them), and where the original of each
//! is kept once the installed file has been replaced by a fat one.
//!
//! A materialized file reads as a fat binary, not a split one, so once a
//! binary has been replaced its kept original is what says it is split
//! and holds its marker.

use std::path::{Component, Path, PathBuf};

use kpack_binary::input::MappedFile;
use kpack_binary::sniff::split_binary;
use kpack_binary::BinaryFormat;
use kpack_wheel::{DistName, Record};
use rocm_kpack::Marker;

use super::MaterializeError;
use crate::pip::dist_file::{read_dist_info_file, DistFileError};
use crate::pip::environment::InstalledDist;

/// Where a host distribution keeps the originals of the binaries it
/// replaced, under its `.dist-info`, by their path in the site directory.
pub(crate) const KEPT_DIR: &str = "kpack/host";

/// An installed host distribution, its RECORD, and its split binaries.
#[derive(Debug)]
pub struct HostBinaries {
    pub name: DistName,
    /// Its `.dist-info` directory.
    pub dist_info: PathBuf,
    /// The `.dist-info`'s own name (`demo-1.0.dist-info`), which starts
    /// the RECORD paths of the files in it.
    pub dist_info_name: String,
    /// The RECORD, as read.
    pub record: Record,
    pub binaries: Vec<SplitBinary>,
    /// Files that hold a kpack marker but cannot be read, one line each.
    pub skipped: Vec<String>,
}

/// One split binary of a host distribution.
#[derive(Debug, Clone)]
pub struct SplitBinary {
    /// Its RECORD path (`jax_rocm7_plugin/_prng.so`).
    pub path: String,
    /// The installed file.
    pub installed: PathBuf,
    /// Where its host-only original is kept once it is replaced.
    pub kept: PathBuf,
    /// The kept original's RECORD path.
    pub kept_path: String,
    /// Whether the original is kept (the installed file has been replaced
    /// at least once; it may be fat).
    pub kept_exists: bool,
    /// Its marker: where the runtime's loader finds its archives.
    pub marker: Marker,
}

impl SplitBinary {
    /// The host-only file: the kept original, else the installed file.
    pub(crate) fn host_only(&self) -> &Path {
        if self.kept_exists {
            &self.kept
        } else {
            &self.installed
        }
    }
}

impl HostBinaries {
    /// Reads `dist`'s RECORD and finds its split binaries. A distribution
    /// without a RECORD has none; nor has one whose RECORD is not a regular
    /// file within the cap, which is skipped with a line saying why.
    pub fn find(dist: &InstalledDist) -> Result<HostBinaries, MaterializeError> {
        let dist_info = dist.dist_info.clone();
        let site = dist_info.parent().unwrap_or(Path::new("/")).to_owned();
        let dist_info_name = dist_info
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut host = HostBinaries {
            name: dist.metadata.name.clone(),
            dist_info,
            dist_info_name,
            record: Record::default(),
            binaries: Vec::new(),
            skipped: Vec::new(),
        };
        let record = match read_record(&host.dist_info)? {
            Ok(record) => record,
            Err(error) => {
                host.skipped.push(format!("distribution skipped: {error}"));
                return Ok(host);
            }
        };
        for row in record.rows() {
            let Some(relative) = inside_site(&row.path) else {
                continue;
            };
            if relative.starts_with(&host.dist_info_name) {
                continue;
            }
            host.consider(&site, &row.path, relative)?;
        }
        host.record = record;
        Ok(host)
    }

    /// Adds the file at `relative` if it is a split binary.
    fn consider(
        &mut self,
        site: &Path,
        path: &str,
        relative: &Path,
    ) -> Result<(), MaterializeError> {
        let installed = site.join(relative);
        let kept = self.dist_info.join(KEPT_DIR).join(relative);
        let kept_exists = is_regular_file(&kept)?;
        if !kept_exists && !is_binary_file(&installed)? {
            return Ok(());
        }
        let source = if kept_exists { &kept } else { &installed };
        match read_marker(source) {
            Ok(Some(marker)) => self.binaries.push(SplitBinary {
                path: path.to_owned(),
                installed,
                kept_path: format!("{}/{KEPT_DIR}/{path}", self.dist_info_name),
                kept,
                kept_exists,
                marker,
            }),
            Ok(None) => {}
            Err(reason) => self
                .skipped
                .push(format!("skipped {}: {reason}", source.display())),
        }
        Ok(())
    }
}

/// The distribution's RECORD; an empty one when it has none; an inner
/// error when it is not a regular file within the cap, or cannot be read.
fn read_record(dist_info: &Path) -> Result<Result<Record, DistFileError>, MaterializeError> {
    let path = dist_info.join("RECORD");
    match read_dist_info_file(&path) {
        Ok(text) => Record::parse(&text)
            .map(Ok)
            .map_err(|source| MaterializeError::Record { path, source }),
        Err(error) if error.is_not_found() => Ok(Ok(Record::default())),
        Err(error) => Ok(Err(error)),
    }
}

/// A RECORD path as a path inside the site directory: relative, not
/// starting with `.`, without `..` (scripts and data installed elsewhere,
/// `../../../bin/tool`, are not considered).
fn inside_site(path: &str) -> Option<&Path> {
    let path = Path::new(path);
    let normal = path.components().all(|c| matches!(c, Component::Normal(_)));
    (normal && path.components().next().is_some()).then_some(path)
}

/// Whether `path` is a regular file (not a link); `false` when absent.
fn is_regular_file(path: &Path) -> Result<bool, MaterializeError> {
    match fs_err::symlink_metadata(path) {
        Ok(metadata) => Ok(metadata.is_file()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(MaterializeError::Io(e)),
    }
}

/// Whether `path` is a regular file in a binary format.
fn is_binary_file(path: &Path) -> Result<bool, MaterializeError> {
    if !is_regular_file(path)? {
        return Ok(false);
    }
    let format = BinaryFormat::of_path(path).map_err(MaterializeError::Io)?;
    Ok(format.is_some())
}

/// The marker of the split binary at `path`; `None` when it is not one;
/// why, when it has a marker that cannot be read.
fn read_marker(path: &Path) -> Result<Option<Marker>, String> {
    let mapped = MappedFile::open(path).map_err(|e| e.to_string())?;
    match split_binary(mapped.bytes(), path) {
        Ok(split) => Ok(split.map(|split| split.marker)),
        Err(kpack_binary::Error::ReadSplit { source, .. }) => Err(source.to_string()),
        Err(kpack_binary::Error::Marker { source, .. }) => {
            Err(format!("its kpack marker cannot be read: {source}"))
        }
        Err(error) => Err(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_inside_the_site_directory_are_considered() {
        assert_eq!(inside_site("pkg/_ext.so"), Some(Path::new("pkg/_ext.so")));
        assert_eq!(inside_site("../../../bin/tool"), None);
        assert_eq!(inside_site("/usr/lib/x.so"), None);
        assert_eq!(inside_site("./pkg/x.so"), None);
        assert_eq!(inside_site(""), None);
    }
}

//! The fat binaries of a wheel: found among its spooled ELF and PE members, and
//! split with markers pointing at `<top-level package>/.kpack/`: each
//! host-only file written as a stream, the code objects going into the
//! archives within the memory budget.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::error::{Placement, WheelError};
use super::reader::Checked;
use crate::archive::{ArchiveSet, Grouping};
use crate::split::FatBinary;
use kpack_binary::code_object::{self, Embedded};
use kpack_binary::input::MappedFile;
use kpack_binary::sniff::{sniff, Sniffed};
use rocm_kpack::format::KPACK_DIR;

/// A fat member's host-only file, spooled.
#[derive(Debug)]
pub struct SplitHost {
    /// The member's position among the wheel's members.
    pub number: usize,
    pub path: PathBuf,
    pub size: u64,
    /// It lost the Authenticode signature the split made invalid.
    pub removed_signature: bool,
}

/// The spooled members that carry device code, by position.
#[derive(Debug, Default)]
pub struct DeviceCode {
    /// Those with bundles in the file (ELF or PE; a split binary has
    /// none; a member whose device code cannot be read counts, so that
    /// its split says why).
    pub fat: Vec<usize>,
    /// Those embedding code objects outside bundles, by section.
    pub embedded: Vec<(usize, Vec<Embedded>)>,
}

/// Finds the spooled members that carry device code.
pub fn find_fat(checked: &[Checked]) -> Result<DeviceCode, WheelError> {
    let mut fat = Vec::new();
    let mut embedded = Vec::new();
    for (number, member) in checked.iter().enumerate() {
        let Some(path) = &member.spooled else {
            continue;
        };
        let mapped = MappedFile::open(path).map_err(boxed)?;
        if matches!(
            sniff(mapped.bytes(), path),
            Ok(Sniffed::Fat(_)) | Err(kpack_binary::Error::ReadFat { .. })
        ) {
            fat.push(number);
        }
        let sections = code_object::embedded_in(mapped.bytes());
        if !sections.is_empty() {
            embedded.push((number, sections));
        }
    }
    Ok(DeviceCode { fat, embedded })
}

/// The top-level package whose `.kpack/` holds the archives: the first
/// directory of the first fat binary's installed path. Fat binaries
/// installed outside the package tree (other `.data/` schemes, the
/// wheel's root) are refused.
pub fn top_level_package(checked: &[Checked], fat: &[usize]) -> Result<String, WheelError> {
    for &number in fat {
        let name = &checked[number].member.name;
        let placement = |reason| WheelError::Placement {
            member: name.clone(),
            reason,
        };
        let Some((top, _)) = installed_path(name).split_once('/') else {
            return Err(placement(Placement::AtRoot));
        };
        if top.ends_with(".data") || top.ends_with(".dist-info") {
            return Err(placement(Placement::OutsidePackages));
        }
    }
    let first = fat
        .first()
        .and_then(|&number| installed_path(&checked[number].member.name).split_once('/'))
        .map(|(top, _)| top.to_owned());
    Ok(first.unwrap_or_default())
}

/// Where `member` lands below site-packages: members of the `.data/`
/// directory's `purelib` and `platlib` schemes install there as if at the
/// wheel's root (PEP 427), everything else where it is.
pub fn installed_path(member: &str) -> &str {
    let mut parts = member.splitn(3, '/');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(data), Some("purelib" | "platlib"), Some(rest)) if data.ends_with(".data") => rest,
        _ => member,
    }
}

/// The TOC key of `member` (its installed path below `top`, or its whole
/// installed path when outside it) and the path from its installed
/// directory to `top/.kpack/`.
pub fn key_and_prefix(member: &str, top: &str) -> (String, String) {
    let member = installed_path(member);
    let depth = member.matches('/').count();
    match member.strip_prefix(top).and_then(|p| p.strip_prefix('/')) {
        Some(below) => (
            below.to_owned(),
            format!("{}{KPACK_DIR}/", "../".repeat(depth - 1)),
        ),
        None => (
            member.to_owned(),
            format!("{}{top}/{KPACK_DIR}/", "../".repeat(depth)),
        ),
    }
}

/// Where the split binaries go and how they are named.
#[derive(Debug)]
pub struct Splitter<'a> {
    pub checked: &'a [Checked],
    pub top: &'a str,
    pub group: &'a str,
    /// Where host-only files are spooled.
    pub spool: &'a Path,
}

impl Splitter<'_> {
    /// Splits the fat members `fat`: each host-only file is spooled as a
    /// stream from its member, then the code objects of all of them go
    /// into `archives` in member order, within the archives' memory
    /// budget.
    pub fn split_all(
        &self,
        fat: &[usize],
        archives: &mut ArchiveSet,
    ) -> Result<Vec<SplitHost>, WheelError> {
        let mapped = fat
            .iter()
            .map(|&number| self.map(number))
            .collect::<Result<Vec<_>, _>>()?;
        let split = mapped
            .par_iter()
            .zip(fat)
            .map(|(file, &number)| self.split_one(file, number))
            .collect::<Result<Vec<_>, _>>()?;
        let mut hosts = Vec::with_capacity(fat.len());
        let mut units = Vec::new();
        for (host, binary) in split {
            hosts.push(host);
            units.extend(binary.units());
        }
        archives
            .add(&units, |bytes| mapped.iter().for_each(|m| m.release(bytes)))
            .map_err(boxed)?;
        Ok(hosts)
    }

    fn map(&self, number: usize) -> Result<MappedFile, WheelError> {
        let path = self.checked[number]
            .spooled
            .as_deref()
            .unwrap_or(Path::new(""));
        MappedFile::open(path).map_err(boxed)
    }

    /// Parses one member and spools its host-only file.
    fn split_one<'m>(
        &self,
        file: &'m MappedFile,
        number: usize,
    ) -> Result<(SplitHost, FatBinary<'m>), WheelError> {
        let name = &self.checked[number].member.name;
        let (key, prefix) = key_and_prefix(name, self.top);
        let binary = FatBinary::parse(file.bytes(), &key, |targets| {
            Grouping::Processor.search_paths(self.group, &prefix, targets)
        })
        .map_err(|source| WheelError::Split {
            member: name.clone(),
            source,
        })?;
        let Some(binary) = binary else {
            return Err(WheelError::Placement {
                member: name.clone(),
                reason: Placement::NoDeviceCode,
            });
        };
        let path = self.spool.join(format!("host-{number}"));
        let out = fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        let (layout, size) = binary
            .write_host(file.bytes(), file.file(), out.file(), &path)
            .map_err(boxed)?;
        let host = SplitHost {
            number,
            path,
            size,
            removed_signature: layout.removed_signature(),
        };
        Ok((host, binary))
    }
}

fn boxed(error: impl Into<crate::Error>) -> WheelError {
    WheelError::Packer(Box::new(error.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_climb_to_the_top_level_package() {
        let pkg = "jax_rocm7_plugin";
        assert_eq!(
            key_and_prefix("jax_rocm7_plugin/_linalg.so", pkg),
            ("_linalg.so".to_owned(), ".kpack/".to_owned())
        );
        assert_eq!(
            key_and_prefix("jax_rocm7_plugin/lib/x/libk.so", pkg),
            ("lib/x/libk.so".to_owned(), "../../.kpack/".to_owned())
        );
        assert_eq!(
            key_and_prefix("other/libk.so", pkg),
            (
                "other/libk.so".to_owned(),
                "../jax_rocm7_plugin/.kpack/".to_owned()
            )
        );
    }

    #[test]
    fn purelib_and_platlib_members_are_keyed_where_they_install() {
        let pkg = "hip_quant";
        assert_eq!(
            key_and_prefix(
                "hip_quant-0.4.7.data/purelib/hip_quant/hip_quantize.dll",
                pkg
            ),
            ("hip_quantize.dll".to_owned(), ".kpack/".to_owned())
        );
        assert_eq!(
            key_and_prefix("hip_quant-0.4.7.data/platlib/hip_quant/lib/x.pyd", pkg),
            ("lib/x.pyd".to_owned(), "../.kpack/".to_owned())
        );
        assert_eq!(
            installed_path("x-1.data/scripts/tool.exe"),
            "x-1.data/scripts/tool.exe"
        );
    }
}

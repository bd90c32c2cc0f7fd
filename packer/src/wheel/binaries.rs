//! The fat binaries of a wheel: found among its spooled ELF members, and
//! split a few at a time with markers pointing at
//! `<top-level package>/.kpack/`, their code going into the archives as
//! each batch is split (memory holds one batch's code, not the wheel's).

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};
use rayon::prelude::*;

use super::error::WheelError;
use super::reader::{Checked, Member};
use crate::archive::{ArchiveSet, Entry, Grouping};
use crate::elf::FATBIN_SECTION;
use crate::input::MappedFile;
use crate::split::split_binary_with;
use crate::tree::KPACK_DIR;

/// A fat member's host-only file, spooled.
#[derive(Debug)]
pub struct SplitHost {
    /// The member's position among the wheel's members.
    pub number: usize,
    pub path: PathBuf,
    pub size: u64,
}

/// The positions of the spooled ELF members that carry device code: a
/// `.hip_fatbin` section with bytes in the file (a split binary keeps the
/// section, memory-only).
pub fn find_fat(checked: &[Checked]) -> Result<Vec<usize>, WheelError> {
    let mut fat = Vec::new();
    for (number, member) in checked.iter().enumerate() {
        let Some(path) = &member.spooled else {
            continue;
        };
        let mapped = MappedFile::open(path).map_err(boxed)?;
        let has_fatbin = object::File::parse(mapped.bytes()).is_ok_and(|file| {
            file.section_by_name(FATBIN_SECTION)
                .is_some_and(|section| section.file_range().is_some())
        });
        if has_fatbin {
            fat.push(number);
        }
    }
    Ok(fat)
}

/// The top-level package whose `.kpack/` holds the archives: the first
/// directory of the first fat binary's path. Fat binaries outside the
/// package tree (`.data/`, the wheel's root) are refused.
pub fn top_level_package(members: &[Member], fat: &[usize]) -> Result<String, WheelError> {
    for &number in fat {
        let name = &members[number].name;
        let placement = |reason: &str| WheelError::Placement {
            member: name.clone(),
            reason: reason.to_owned(),
        };
        let Some((top, _)) = name.split_once('/') else {
            return Err(placement(
                "at the wheel's root, outside any package: no place for .kpack/",
            ));
        };
        if top.ends_with(".data") || top.ends_with(".dist-info") {
            return Err(placement(
                "in the wheel's .data or .dist-info directory, installed outside the packages",
            ));
        }
    }
    let first = fat
        .first()
        .and_then(|&number| members[number].name.split_once('/'))
        .map(|(top, _)| top.to_owned());
    Ok(first.unwrap_or_default())
}

/// The TOC key of `member` (its path below `top`, or its whole path when
/// outside it) and the path from its directory to `top/.kpack/`.
pub fn key_and_prefix(member: &str, top: &str) -> (String, String) {
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
    pub members: &'a [Member],
    pub checked: &'a [Checked],
    pub top: &'a str,
    pub group: &'a str,
    /// Where host-only files are spooled.
    pub spool: &'a Path,
}

impl Splitter<'_> {
    /// Splits the fat members `fat`, as many at a time as there are
    /// threads, adding their code objects to `archives` in member order.
    pub fn split_all(
        &self,
        fat: &[usize],
        archives: &mut ArchiveSet,
    ) -> Result<Vec<SplitHost>, WheelError> {
        let mut hosts = Vec::with_capacity(fat.len());
        for batch in fat.chunks(rayon::current_num_threads().max(1)) {
            let mapped = batch
                .iter()
                .map(|&number| self.map(number))
                .collect::<Result<Vec<_>, _>>()?;
            let split = mapped
                .par_iter()
                .zip(batch)
                .map(|(file, &number)| self.split_one(file, number))
                .collect::<Result<Vec<_>, _>>()?;
            let mut entries = Vec::new();
            for (host, code) in split {
                hosts.push(host);
                entries.extend(code);
            }
            archives
                .add(&entries, |bytes| {
                    mapped.iter().for_each(|m| m.release(bytes))
                })
                .map_err(boxed)?;
        }
        Ok(hosts)
    }

    fn map(&self, number: usize) -> Result<MappedFile, WheelError> {
        let path = self.checked[number]
            .spooled
            .as_deref()
            .unwrap_or(Path::new(""));
        MappedFile::open(path).map_err(boxed)
    }

    /// Splits one member, spooling its host-only file.
    fn split_one<'m>(
        &self,
        file: &'m MappedFile,
        number: usize,
    ) -> Result<(SplitHost, Vec<Entry<'m>>), WheelError> {
        let name = &self.members[number].name;
        let (key, prefix) = key_and_prefix(name, self.top);
        let split = split_binary_with(file.bytes(), &key, |targets| {
            Grouping::Processor.search_paths(self.group, &prefix, targets)
        })
        .map_err(|source| WheelError::Split {
            member: name.clone(),
            source,
        })?;
        let Some(split) = split else {
            return Err(WheelError::Placement {
                member: name.clone(),
                reason: "has a .hip_fatbin section but no device code".to_owned(),
            });
        };
        let path = self.spool.join(format!("host-{number}"));
        fs_err::write(&path, &split.host)?;
        let host = SplitHost {
            number,
            path,
            size: split.host.len() as u64,
        };
        Ok((host, split.entries))
    }
}

fn boxed(error: crate::Error) -> WheelError {
    WheelError::Packer(Box::new(error))
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
}

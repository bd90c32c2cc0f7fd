//! The fat binaries of a wheel: found among its spooled ELF members, and
//! split with markers pointing at `<top-level package>/.kpack/`.

use std::path::{Path, PathBuf};

use object::Object;
use rayon::prelude::*;

use super::error::WheelError;
use super::reader::{Checked, Member};
use crate::archive::{Entry, Grouping};
use crate::elf::FATBIN_SECTION;
use crate::input::MappedFile;
use crate::split::split_binary_with;
use crate::tree::KPACK_DIR;

/// A spooled member with device code.
#[derive(Debug)]
pub struct FatMember {
    /// Its position among the wheel's members.
    pub number: usize,
    pub mapped: MappedFile,
}

/// A fat member split: its host-only file (spooled) and code objects.
#[derive(Debug)]
pub struct SplitMember<'a> {
    pub number: usize,
    pub host: PathBuf,
    pub host_size: u64,
    pub entries: Vec<Entry<'a>>,
}

/// Maps the spooled ELF members that carry a `.hip_fatbin` section.
pub fn find_fat(checked: &[Checked]) -> Result<Vec<FatMember>, WheelError> {
    let mut fat = Vec::new();
    for (number, member) in checked.iter().enumerate() {
        let Some(path) = &member.spooled else {
            continue;
        };
        let mapped = MappedFile::open(path).map_err(boxed)?;
        let has_fatbin = object::File::parse(mapped.bytes())
            .is_ok_and(|file| file.section_by_name(FATBIN_SECTION).is_some());
        if has_fatbin {
            fat.push(FatMember { number, mapped });
        }
    }
    Ok(fat)
}

/// The top-level package whose `.kpack/` holds the archives: the first
/// directory of the first fat binary's path. Fat binaries outside the
/// package tree (`.data/`, the wheel's root) are refused.
pub fn top_level_package(members: &[Member], fat: &[FatMember]) -> Result<String, WheelError> {
    for binary in fat {
        let name = &members[binary.number].name;
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
        .and_then(|binary| members[binary.number].name.split_once('/'))
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

/// Splits every fat member in parallel, each host-only file spooled into
/// `spool` as soon as it is made; code objects stay borrowed from the
/// mappings where they are stored uncompressed.
pub fn split_all<'a>(
    members: &[Member],
    fat: &'a [FatMember],
    top: &str,
    group: &str,
    spool: &Path,
) -> Result<Vec<SplitMember<'a>>, WheelError> {
    fat.par_iter()
        .map(|binary| {
            let name = &members[binary.number].name;
            let (key, prefix) = key_and_prefix(name, top);
            let split = split_binary_with(binary.mapped.bytes(), &key, |targets| {
                Grouping::Processor.search_paths(group, &prefix, targets)
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
            let host = spool.join(format!("host-{}", binary.number));
            fs_err::write(&host, &split.host)?;
            Ok(SplitMember {
                number: binary.number,
                host,
                host_size: split.host.len() as u64,
                entries: split.entries,
            })
        })
        .collect()
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

//! `--pack-databases`: database files stored in the kpack archives instead
//! of payloads, each under the TOC key `<library>/<target>/<name>` with the
//! metadata `{library, path}` (its path relative to the install root), so a
//! library reads one through `kpack_get_kernel(archive,
//! "rocblas/gfx90a:xnack-/Kernels.so-000-gfx90a-xnack-.hsaco",
//! "gfx90a:xnack-")`. Entries keep the type `hsaco`, the only one readers
//! accept.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use rayon::prelude::*;
use rocm_kpack::format::key;
use rocm_kpack::{BinaryKey, Metadata, Target};

use super::payload::DeviceFile;
use crate::archive::{processor_archive_name, Entry, Grouping};
use crate::error::{Error, HiddenCode, Result};
use crate::input::MappedFile;

/// The TOC key of a database file: `<library>/<target>/<name>`.
pub fn toc_key(library: &str, target: &Target, name: &str) -> String {
    format!("{library}/{target}/{name}")
}

/// Maps `files` (relative to `input`) in parallel, for their bytes to be
/// compressed straight from the page cache.
pub fn map_files(input: &Path, files: &[DeviceFile]) -> Result<Vec<MappedFile>> {
    files
        .par_iter()
        .map(|file| MappedFile::open(&input.join(&file.relative)))
        .collect()
}

/// The archive entries of `files`, whose bytes are `mapped` (in the same
/// order); two files that would share a key are an error naming both.
pub fn entries<'a>(files: &[DeviceFile], mapped: &'a [MappedFile]) -> Result<Vec<Entry<'a>>> {
    let mut seen: HashMap<String, &Path> = HashMap::new();
    let mut entries = Vec::with_capacity(files.len());
    for (file, bytes) in files.iter().zip(mapped) {
        let name = toc_key(file.library, &file.target, &file.name);
        if let Some(first) = seen.insert(name.clone(), &file.relative) {
            return Err(Error::DatabaseKeyClash {
                key: name,
                first: first.to_owned(),
                second: file.relative.clone(),
            });
        }
        let path = file.relative.to_string_lossy().replace('\\', "/");
        entries.push(Entry {
            binary: BinaryKey::named(&name),
            target: file.target.clone(),
            bytes: Cow::Borrowed(bytes.bytes()),
            metadata: Some(
                Metadata::new()
                    .with(key::META_LIBRARY, file.library)
                    .with(key::META_PATH, path),
            ),
        });
    }
    Ok(entries)
}

/// Refuses database entries that would hide a binary's code from the
/// runtime's loader. The loader takes, for a GPU, the first of its
/// compatible targets (most specific first) that an archive lists, then
/// looks the binary up for exactly that target; so a database file for
/// `gfx942:xnack-` in an archive whose binary has code for plain `gfx942`
/// only would make that binary's code unreachable on a `gfx942:xnack-` GPU.
pub fn check_binaries_stay_reachable(
    entries: &[Entry<'_>],
    group: &str,
    grouping: Grouping,
) -> Result<()> {
    // Per archive: each binary's targets, and the database files' targets.
    let mut binaries: BTreeMap<&str, BTreeMap<&BinaryKey, Vec<&Target>>> = BTreeMap::new();
    let mut databases: BTreeMap<&str, Vec<&Target>> = BTreeMap::new();
    for entry in entries {
        let archive = grouping.archive_key(&entry.target);
        match entry.binary.index() {
            Some(_) => binaries
                .entry(archive)
                .or_default()
                .entry(&entry.binary)
                .or_default()
                .push(&entry.target),
            None => databases.entry(archive).or_default().push(&entry.target),
        }
    }
    for (archive, targets) in databases {
        for (binary, has) in binaries.get(archive).into_iter().flatten() {
            for target in &targets {
                let fallback = has.iter().find(|t| t.runs_on(target));
                if let (false, Some(fallback)) = (has.contains(target), fallback) {
                    return Err(Error::DatabaseHidesCode(Box::new(HiddenCode {
                        archive: processor_archive_name(group, archive),
                        target: (*target).clone(),
                        binary: binary.to_string(),
                        fallback: (*fallback).clone(),
                    })));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Target {
        Target::parse(s).unwrap()
    }

    fn entry(binary: BinaryKey, target: &str) -> Entry<'static> {
        Entry {
            binary,
            target: t(target),
            bytes: Cow::Borrowed(b"x"),
            metadata: None,
        }
    }

    #[test]
    fn keys_carry_the_full_target() {
        assert_eq!(
            toc_key(
                "rocblas",
                &t("gfx90a:xnack+"),
                "Kernels.so-000-gfx90a-xnack+.hsaco"
            ),
            "rocblas/gfx90a:xnack+/Kernels.so-000-gfx90a-xnack+.hsaco"
        );
    }

    #[test]
    fn refuses_a_database_target_that_hides_a_binarys_code() {
        let binary = || entry(BinaryKey::new("lib/libx.so", 0), "gfx942");
        let database = |target| entry(BinaryKey::named("rocblas/x"), target);
        let hiding = [binary(), database("gfx942:xnack-")];
        let error = check_binaries_stay_reachable(&hiding, "rocm", Grouping::Processor)
            .unwrap_err()
            .to_string();
        assert!(error.contains("rocm_gfx942.kpack"), "{error}");
        assert!(error.contains("lib/libx.so#0"), "{error}");
        // Plain targets, targets the binary has, other processors: fine.
        for fine in ["gfx942", "gfx90a:xnack-"] {
            let entries = [binary(), database(fine)];
            check_binaries_stay_reachable(&entries, "rocm", Grouping::Processor).unwrap();
        }
        let covered = [
            binary(),
            entry(BinaryKey::new("lib/libx.so", 0), "gfx942:xnack-"),
            database("gfx942:xnack-"),
        ];
        check_binaries_stay_reachable(&covered, "rocm", Grouping::Processor).unwrap();
    }
}

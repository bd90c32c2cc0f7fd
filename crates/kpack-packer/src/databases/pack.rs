//! `--pack-databases`: database files stored in the kpack archives instead
//! of payloads, each under the TOC key `<library>/<target>/<name>` with the
//! metadata `{library, path}` (its path relative to the install root), so a
//! library reads one through `kpack_get_kernel(archive,
//! "rocblas/gfx90a:xnack-/Kernels.so-000-gfx90a-xnack-.hsaco",
//! "gfx90a:xnack-")`. Entries keep the type `hsaco`, the only one readers
//! accept. Which of their targets an archive lists in `gfx_arches` is the
//! archive writer's choice ([`crate::archive`]): never one that would hide
//! a binary's code from the loader.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use rayon::prelude::*;
use rocm_kpack::format::key;
use rocm_kpack::{BinaryKey, Metadata, Target};

use super::payload::DeviceFile;
use crate::archive::Entry;
use crate::error::{Error, Result};
use kpack_binary::input::MappedFile;

/// The TOC key of a database file: `<library>/<target>/<name>`.
pub fn toc_key(library: &str, target: &Target, name: &str) -> String {
    format!("{library}/{target}/{name}")
}

/// Maps `files` (relative to `input`) in parallel, for their bytes to be
/// compressed straight from the page cache.
pub fn map_files(input: &Path, files: &[DeviceFile]) -> Result<Vec<MappedFile>> {
    files
        .par_iter()
        .map(|file| Ok(MappedFile::open(&input.join(&file.relative))?))
        .collect()
}

/// The archive entries of `files`, whose bytes are `mapped` (in the same
/// order); two files that would share a key are an error naming both.
pub fn entries<'a>(files: &[DeviceFile], mapped: &'a [MappedFile]) -> Result<Vec<Entry<'a>>> {
    let mut seen: HashMap<String, &Path> = HashMap::new();
    let mut entries = Vec::with_capacity(files.len());
    for (file, bytes) in files.iter().zip(mapped) {
        // A sub-family's or family's file has no target to be stored for.
        let Some(target) = &file.target else { continue };
        let name = toc_key(file.library, target, &file.name);
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
            target: target.clone(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Target {
        Target::parse(s).unwrap()
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
}

//! LLVM's `clang-offload-bundler` (Debian 12's `clang-tools-15`) as an
//! independent reader of the offload bundles in an ELF file's
//! `.hip_fatbin` section.
//!
//! The section holds uncompressed offload bundles back to back, zero
//! padding between them:
//!
//! ```text
//! 0   24  "__CLANG_OFFLOAD_BUNDLE__"
//! 24  8   u64 entry count
//! 32  ..  per entry: u64 offset (from the bundle's start), u64 size,
//!         u64 triple length, triple
//! ```
//!
//! A bundle ends at its header's end or its last entry's end, whichever is
//! later. The bundler reads a bundle on its own as a raw file with
//! `-type=o` (an input that is not an object file is read as a bundle, as
//! ROCm's `roc-obj-extract` relies on; `-type=bc` reads it the same way).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use fs_err as fs;
use object::{Object, ObjectSection};

/// The program, as `clang-tools-15` installs it on `$PATH`.
pub const PROGRAM: &str = "clang-offload-bundler-15";

/// The first bytes of an uncompressed offload bundle.
const MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";

/// One offload bundle, written to a file of its own for the bundler.
#[derive(Debug)]
pub struct OffloadBundle {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl OffloadBundle {
    /// Writes `bytes` (one whole bundle) to a temporary file.
    pub fn new(bytes: &[u8]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bundle");
        fs::write(&path, bytes).unwrap();
        Self { _dir: dir, path }
    }

    /// The file holding the bundle.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entries' triples as `clang-offload-bundler -list` gives them
    /// (host entry included), sorted: the bundler lists in hash order.
    pub fn triples(&self) -> BTreeSet<String> {
        let stdout = crate::run(
            crate::tool(PROGRAM)
                .args(["-list", "-type=o"])
                .arg(format!("-input={}", self.path.display())),
        );
        stdout.lines().map(str::to_owned).collect()
    }

    /// The code object of `triple`, as `clang-offload-bundler -unbundle`
    /// extracts it.
    pub fn unbundle(&self, triple: &str) -> Vec<u8> {
        let output = self.path.with_file_name("unbundled");
        crate::run(
            crate::tool(PROGRAM)
                .args(["-unbundle", "-type=o"])
                .arg(format!("-targets={triple}"))
                .arg(format!("-input={}", self.path.display()))
                .arg(format!("-output={}", output.display())),
        );
        let bytes = fs::read(&output).unwrap();
        fs::remove_file(&output).unwrap();
        bytes
    }
}

/// The bundles of `elf`'s `.hip_fatbin` section, in section order.
pub fn bundles(elf: &Path) -> Vec<OffloadBundle> {
    fatbin_bundles(&fatbin(elf))
        .into_iter()
        .map(OffloadBundle::new)
        .collect()
}

/// The bytes of `elf`'s `.hip_fatbin` section.
pub fn fatbin(elf: &Path) -> Vec<u8> {
    let data = fs::read(elf).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let section = file
        .section_by_name(".hip_fatbin")
        .unwrap_or_else(|| panic!("{} has no .hip_fatbin section", elf.display()));
    section.data().unwrap().to_vec()
}

/// Splits a `.hip_fatbin` section into its bundles, padding left out.
pub fn fatbin_bundles(section: &[u8]) -> Vec<&[u8]> {
    let mut bundles = Vec::new();
    let mut at = 0;
    while let Some(skip) = section[at..].iter().position(|&b| b != 0) {
        at += skip;
        let len = bundle_len(&section[at..]);
        bundles.push(&section[at..at + len]);
        at += len;
    }
    bundles
}

/// The length of the uncompressed bundle at the start of `bytes`.
fn bundle_len(bytes: &[u8]) -> usize {
    assert!(
        bytes.starts_with(MAGIC),
        "not an uncompressed offload bundle: {:?}",
        &bytes[..bytes.len().min(8)]
    );
    let u64_at = |at: usize| -> usize {
        let field = bytes.get(at..at + 8).expect("truncated bundle header");
        usize::try_from(u64::from_le_bytes(field.try_into().unwrap())).unwrap()
    };
    let count = u64_at(MAGIC.len());
    let mut at = MAGIC.len() + 8;
    let mut end = 0;
    for _ in 0..count {
        end = end.max(u64_at(at) + u64_at(at + 8));
        at += 24 + u64_at(at + 16);
    }
    let len = end.max(at);
    assert!(
        len <= bytes.len(),
        "bundle of {len} bytes overruns the section"
    );
    len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(entries: &[(&str, u64, u64)]) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend((entries.len() as u64).to_le_bytes());
        for (triple, offset, size) in entries {
            bytes.extend(offset.to_le_bytes());
            bytes.extend(size.to_le_bytes());
            bytes.extend((triple.len() as u64).to_le_bytes());
            bytes.extend(triple.as_bytes());
        }
        bytes
    }

    #[test]
    fn a_bundle_ends_at_its_last_entry_and_padding_is_skipped() {
        let mut first = bundle(&[
            ("host-x86_64-unknown-linux", 0, 0),
            ("hipv4-a--gfx1030", 128, 4),
        ]);
        first.resize(132, 7);
        let second = bundle(&[("host-x86_64-unknown-linux", 0, 0)]);
        let mut section = first.clone();
        section.resize(256, 0);
        section.extend(&second);
        section.resize(section.len() + 16, 0);
        assert_eq!(fatbin_bundles(&section), [&first[..], &second[..]]);
    }
}

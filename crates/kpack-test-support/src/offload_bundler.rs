//! LLVM's `clang-offload-bundler` (Debian 12's `clang-tools-15`) as an
//! independent reader of the offload bundles in an ELF file's
//! `.hip_fatbin` section or a PE image's `.hip_fat`.
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
//!
//! clang-offload-bundler 15 stops reading a header at the first entry
//! whose offset is 0 and then lists nothing, successfully: a host entry
//! needs a non-zero offset, as clang writes it ([`clang_bundle`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use fs_err as fs;
use object::{Object, ObjectSection};

/// The program, as `clang-tools-15` installs it on `$PATH`.
pub const PROGRAM: &str = "clang-offload-bundler-15";

/// The first bytes of an uncompressed offload bundle.
const MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";

/// The host entry's triple in clang 15's HIP bundles (Debian's rocRAND).
pub const HOST_TRIPLE: &str = "host-x86_64-unknown-linux";

/// Code objects start at multiples of this from the bundle's start.
const CODE_OBJECT_ALIGN: usize = 4096;

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
    /// (host entry included), sorted: the bundler lists in hash order. An
    /// empty list fails the test: every bundle has a host entry.
    pub fn triples(&self) -> BTreeSet<String> {
        let stdout = crate::run(
            crate::tool(PROGRAM)
                .args(["-list", "-type=o"])
                .arg(format!("-input={}", self.path.display())),
        );
        let triples: BTreeSet<String> = stdout.lines().map(str::to_owned).collect();
        assert!(
            !triples.is_empty(),
            "{PROGRAM} lists no entries in {}, though every bundle has a host entry \
             (it reads no entries once one has offset 0)",
            self.path.display()
        );
        triples
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

/// An uncompressed bundle laid out as clang's HIP toolchain writes one:
/// the host entry first, of size 0 at the first code object's offset, then
/// `entries` (triple, code object) at 4096-byte aligned offsets.
pub fn clang_bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let triples = std::iter::once(HOST_TRIPLE).chain(entries.iter().map(|(t, _)| *t));
    let header_len = MAGIC.len() + 8 + triples.clone().map(|t| 24 + t.len()).sum::<usize>();
    let first = header_len.next_multiple_of(CODE_OBJECT_ALIGN);
    let mut extents = vec![(first, 0)];
    let mut at = first;
    for (_, bytes) in entries {
        extents.push((at, bytes.len()));
        at = (at + bytes.len()).next_multiple_of(CODE_OBJECT_ALIGN);
    }
    let mut out = MAGIC.to_vec();
    out.extend((extents.len() as u64).to_le_bytes());
    for (triple, (offset, size)) in triples.zip(&extents) {
        for field in [*offset, *size, triple.len()] {
            out.extend((field as u64).to_le_bytes());
        }
        out.extend(triple.as_bytes());
    }
    for ((_, bytes), (offset, _)) in entries.iter().zip(&extents[1..]) {
        out.resize(*offset, 0);
        out.extend(*bytes);
    }
    out
}

/// The bundles of `binary`'s device code section, in section order.
pub fn bundles(binary: &Path) -> Vec<OffloadBundle> {
    fatbin_bundles(&fatbin(binary))
        .into_iter()
        .map(OffloadBundle::new)
        .collect()
}

/// The bytes of `binary`'s device code section, as `object` reads it:
/// `.hip_fatbin` in an ELF file, `.hip_fat` in a PE image.
pub fn fatbin(binary: &Path) -> Vec<u8> {
    let data = fs::read(binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let section = file
        .section_by_name(".hip_fatbin")
        .or_else(|| file.section_by_name(".hip_fat"))
        .unwrap_or_else(|| panic!("{} has no device code section", binary.display()));
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

    #[test]
    fn clang_bundles_align_code_objects_and_place_the_host_entry_at_the_first() {
        let (a, b) = (vec![1u8; 5000], vec![2u8; 10]);
        let bytes = clang_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1030", &a), ("t2", &b)]);
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        assert_eq!(u64_at(24), 3);
        let host = 32;
        assert_eq!((u64_at(host), u64_at(host + 8)), (4096, 0));
        let first = host + 24 + HOST_TRIPLE.len();
        assert_eq!((u64_at(first), u64_at(first + 8)), (4096, 5000));
        let second = first + 24 + "hipv4-amdgcn-amd-amdhsa--gfx1030".len();
        assert_eq!((u64_at(second), u64_at(second + 8)), (12288, 10));
        assert_eq!(&bytes[4096..9096], &a[..]);
        assert_eq!(&bytes[12288..], &b[..]);
        assert_eq!(fatbin_bundles(&bytes), [&bytes[..]]);
    }
}

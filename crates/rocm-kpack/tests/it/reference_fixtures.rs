//! The reference tooling's archives: read them, and reproduce them byte
//! for byte from the same inputs.

use crate::common::*;
use fs_err as fs;
use rocm_kpack::{Archive, Compression, Scheme};

fn check_contents(archive: &Archive, contents: &[(&str, &str, Vec<u8>)]) {
    assert_eq!(archive.kernel_count(), contents.len());
    for (key, target, data) in contents {
        let kernel = archive.kernel(key, &t(target)).unwrap();
        assert_eq!(&*kernel, &data[..], "{key} {target}");
    }
}

#[test]
fn reads_reference_noop_archive() {
    let archive = Archive::open(reference("test_noop.kpack")).unwrap();
    assert_eq!(archive.group(), "test");
    assert_eq!(archive.family(), "gfx900X");
    assert_eq!(archive.scheme(), Scheme::None);
    assert_eq!(archive.architectures(), [t("gfx900"), t("gfx906")]);
    assert_eq!(
        archive.binaries().collect::<Vec<_>>(),
        ["lib/libtest.so#0", "bin/testapp#0"]
    );
    check_contents(&archive, &noop_contents());
}

#[test]
fn reads_reference_zstd_archive() {
    let archive = Archive::open(reference("test_zstd.kpack")).unwrap();
    assert_eq!(archive.family(), "gfx110X");
    assert_eq!(archive.scheme(), Scheme::ZstdPerKernel);
    assert_eq!(archive.architectures(), [t("gfx1100"), t("gfx1101")]);
    assert_eq!(archive.stored_count(), 3);
    check_contents(&archive, &zstd_contents());
}

#[test]
fn writer_reproduces_reference_noop_archive() {
    let written = write_archive(
        Compression::None,
        "gfx900X",
        &["gfx900", "gfx906"],
        &noop_contents(),
    );
    let reference = fs::read(reference("test_noop.kpack")).unwrap();
    assert_eq!(written.len(), 903);
    assert_eq!(written, reference);
}

#[test]
fn writer_reproduces_reference_zstd_archive() {
    let written = write_archive(
        Compression::Zstd { level: 3 },
        "gfx110X",
        &["gfx1100", "gfx1101"],
        &zstd_contents(),
    );
    let reference = fs::read(reference("test_zstd.kpack")).unwrap();
    assert_eq!(written.len(), 518);
    assert_eq!(written, reference);
}

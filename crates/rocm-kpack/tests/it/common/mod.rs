//! What the runtime's integration tests share: the test context (a
//! temporary directory of archives and the mask that makes messages about
//! them snapshots), archives written in memory, the reference fixtures.

use std::path::PathBuf;

use fs_err as fs;
pub use kpack_test_support::fixtures;
use rocm_kpack::{capi, ArchiveOptions, ArchiveWriter, BinaryKey, Compression, ErrorCode, Target};

/// The one context a runtime test works in, as uv's `TestContext`: a
/// temporary directory for archives and the binaries that name them.
pub struct TestContext {
    pub dir: tempfile::TempDir,
}

impl TestContext {
    pub fn new() -> TestContext {
        TestContext {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    /// `relative` under the directory.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// An archive at `relative` for `arches` (the first names its family)
    /// holding `"TEXT ARCH"` as `lib/libx.so#0` for each; its path.
    pub fn archive(&self, relative: &str, arches: &[&str], text: &str) -> PathBuf {
        let contents: Vec<_> = arches
            .iter()
            .map(|a| ("lib/libx.so#0", *a, format!("{text} {a}").into_bytes()))
            .collect();
        let path = self.path(relative);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let bytes = write_archive(Compression::DEFAULT, arches[0], arches, &contents);
        fs::write(&path, bytes).unwrap();
        path
    }

    /// `text` with the directory masked as `<DIR>`.
    pub fn mask(&self, text: &str) -> String {
        text.replace(&self.dir.path().display().to_string(), "<DIR>")
    }

    /// `error` with its causes, the directory masked.
    pub fn error(&self, error: &dyn std::error::Error) -> String {
        let dir = self.dir.path().display().to_string();
        kpack_test_support::error_chain(error, &[(&dir, "<DIR>")])
    }
}

pub fn reference(name: &str) -> PathBuf {
    fixtures().join("reference").join(name)
}

pub fn t(s: &str) -> Target {
    Target::parse(s).unwrap()
}

/// The code objects of `test_noop.kpack`, as 01-archive-format.md lists them.
pub fn noop_contents() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    vec![
        (
            "lib/libtest.so#0",
            "gfx900",
            padded(b"KERNEL1_GFX900_DATA", &[(0, 100)]),
        ),
        (
            "lib/libtest.so#0",
            "gfx906",
            padded(b"KERNEL2_GFX906_DATA", &[(0, 200)]),
        ),
        (
            "bin/testapp#0",
            "gfx900",
            padded(b"KERNEL3_APP_GFX900", &[(0xff, 150)]),
        ),
    ]
}

/// The code objects of `test_zstd.kpack`.
pub fn zstd_contents() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    vec![
        (
            "lib/libhip.so#0",
            "gfx1100",
            padded(b"HIP_KERNEL_GFX1100_", &[(b'A', 500), (b'B', 500)]),
        ),
        (
            "lib/libhip.so#0",
            "gfx1101",
            padded(b"HIP_KERNEL_GFX1101_", &[(b'X', 300), (b'Y', 300)]),
        ),
        (
            "bin/hiptest#0",
            "gfx1100",
            padded(b"TEST_APP_KERNEL___", &[(0x42, 1000)]),
        ),
    ]
}

fn padded(prefix: &[u8], runs: &[(u8, usize)]) -> Vec<u8> {
    let mut data = prefix.to_vec();
    for &(byte, count) in runs {
        data.extend(std::iter::repeat_n(byte, count));
    }
    data
}

/// Writes an archive of `(binary key, target, bytes)` in memory.
pub fn write_archive(
    compression: Compression,
    family: &str,
    arches: &[&str],
    contents: &[(&str, &str, Vec<u8>)],
) -> Vec<u8> {
    let options = ArchiveOptions {
        group: "test".into(),
        family: family.into(),
        arches: arches.iter().map(|a| t(a)).collect(),
        compression,
    };
    let mut writer = ArchiveWriter::new(std::io::Cursor::new(Vec::new()), options).unwrap();
    for (key, target, data) in contents {
        let (path, index) = key.rsplit_once('#').unwrap();
        writer
            .add(
                &BinaryKey::new(path, index.parse().unwrap()),
                &t(target),
                data,
            )
            .unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// Opens the archive file at `path` through the C API and asks it for
/// `binary` and `arch`, as a library would: the error code, and the bytes
/// on success (no buffer is handed out on failure).
pub fn c_get_kernel(path: &std::path::Path, binary: &str, arch: &str) -> (ErrorCode, Vec<u8>) {
    use std::ffi::CString;
    let c_path = CString::new(path.to_str().unwrap()).unwrap();
    let (binary, arch) = (CString::new(binary).unwrap(), CString::new(arch).unwrap());
    let mut handle = std::ptr::null_mut();
    let (mut data, mut size) = (std::ptr::null_mut(), 0usize);
    // SAFETY: valid C strings and out-pointers; the buffer and the handle
    // are freed once.
    unsafe {
        let opened = capi::kpack_open(c_path.as_ptr(), &mut handle);
        assert_eq!(opened, ErrorCode::Success);
        let code =
            capi::kpack_get_kernel(handle, binary.as_ptr(), arch.as_ptr(), &mut data, &mut size);
        let bytes = if data.is_null() {
            Vec::new()
        } else {
            let bytes = std::slice::from_raw_parts(data.cast::<u8>(), size).to_vec();
            capi::kpack_free_kernel(data);
            bytes
        };
        assert!(code == ErrorCode::Success || data.is_null());
        capi::kpack_close(handle);
        (code, bytes)
    }
}

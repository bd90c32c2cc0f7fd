//! Every malformed archive of 01-archive-format.md, generated here, gives a
//! typed error naming what is wrong and where, and the reference's error
//! number through the C API. None panics.

use std::ffi::CString;
use std::path::Path;

use crate::common::*;
use fs_err as fs;
use rmpv::Value;
use rocm_kpack::capi;
use rocm_kpack::error::{DecompressionProblem, FormatProblem};
use rocm_kpack::{Archive, Error, ErrorCode};

fn noop() -> Vec<u8> {
    fs::read(reference("test_noop.kpack")).unwrap()
}

fn zstd() -> Vec<u8> {
    fs::read(reference("test_zstd.kpack")).unwrap()
}

fn toc_offset(bytes: &[u8]) -> usize {
    u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize
}

/// Re-encodes the archive's TOC after `edit`.
fn with_toc(bytes: &[u8], edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let at = toc_offset(bytes);
    let mut toc = rmpv::decode::read_value(&mut &bytes[at..]).unwrap();
    edit(&mut toc);
    let mut out = bytes[..at].to_vec();
    rmpv::encode::write_value(&mut out, &toc).unwrap();
    out
}

fn map(value: &mut Value) -> &mut Vec<(Value, Value)> {
    match value {
        Value::Map(map) => map,
        other => panic!("not a map: {other}"),
    }
}

fn array(value: &mut Value) -> &mut Vec<Value> {
    match value {
        Value::Array(array) => array,
        other => panic!("not an array: {other}"),
    }
}

fn entry<'a>(value: &'a mut Value, key: &str) -> &'a mut Value {
    let map = map(value);
    &mut map
        .iter_mut()
        .find(|(k, _)| k.as_str() == Some(key))
        .unwrap()
        .1
}

fn remove(value: &mut Value, key: &str) {
    map(value).retain(|(k, _)| k.as_str() != Some(key));
}

/// Opens `bytes` from a real file through the Rust API and the C API and
/// checks both give `code`; returns the Rust error.
fn open_fails(bytes: &[u8], code: ErrorCode) -> Error {
    let context = TestContext::new();
    let path = context.path("bad.kpack");
    fs::write(&path, bytes).unwrap();
    let error = Archive::open(&path).expect_err("malformed archive opened");
    assert_eq!(error.code(), code, "{error}");
    assert!(error.to_string().contains("bad.kpack"), "{error}");
    assert_eq!(c_open(&path), code);
    error
}

fn c_open(path: &Path) -> ErrorCode {
    let path = CString::new(path.to_str().unwrap()).unwrap();
    let mut handle = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path and a place for the handle.
    let code = unsafe { capi::kpack_open(path.as_ptr(), &mut handle) };
    // SAFETY: the handle is null or the one `kpack_open` gave, closed once.
    unsafe { capi::kpack_close(handle) };
    code
}

fn problem(error: Error) -> (u64, FormatProblem) {
    match error {
        Error::Format {
            offset, problem, ..
        } => (offset, problem),
        other => panic!("not a format error: {other:?}"),
    }
}

#[test]
fn rejects_empty_file() {
    let (_, p) = problem(open_fails(&[], ErrorCode::InvalidFormat));
    assert_eq!(p, FormatProblem::TooShort { len: 0 });
}

#[test]
fn rejects_truncated_header() {
    let (_, p) = problem(open_fails(&noop()[..12], ErrorCode::InvalidFormat));
    assert_eq!(p, FormatProblem::TooShort { len: 12 });
}

#[test]
fn rejects_wrong_magic() {
    let mut bytes = noop();
    bytes[..4].copy_from_slice(b"PKZP");
    let (offset, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert_eq!(offset, 0);
    assert_eq!(p, FormatProblem::BadMagic { found: *b"PKZP" });
}

#[test]
fn rejects_version_2() {
    let mut bytes = zstd();
    bytes[4] = 2;
    let (offset, p) = problem(open_fails(&bytes, ErrorCode::UnsupportedVersion));
    assert_eq!(offset, 4);
    assert_eq!(p, FormatProblem::UnsupportedVersion { version: 2 });
}

#[test]
fn rejects_toc_offset_at_end() {
    let mut bytes = noop();
    let len = bytes.len() as u64;
    bytes[8..16].copy_from_slice(&len.to_le_bytes());
    let (offset, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert_eq!(offset, 8);
    assert_eq!(
        p,
        FormatProblem::TocOffsetOutOfRange {
            toc_offset: len,
            file_len: len
        }
    );
}

#[test]
fn rejects_toc_offset_past_end() {
    let mut bytes = noop();
    bytes[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let (_, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert!(matches!(p, FormatProblem::TocOffsetOutOfRange { .. }));
}

#[test]
fn rejects_toc_offset_inside_header() {
    let mut bytes = noop();
    bytes[8..16].copy_from_slice(&16u64.to_le_bytes());
    let (_, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert!(matches!(p, FormatProblem::TocOffsetOutOfRange { .. }));
}

#[test]
fn rejects_toc_that_is_not_a_map() {
    let bytes = with_toc(&noop(), |toc| *toc = Value::Array(vec![Value::from(1)]));
    let (offset, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert_eq!(offset, toc_offset(&bytes) as u64);
    assert!(
        matches!(
            p,
            FormatProblem::WrongType {
                expected: "map",
                found: "array",
                ..
            }
        ),
        "{p:?}"
    );
}

#[test]
fn rejects_string_where_an_ordinal_belongs() {
    let bytes = with_toc(&noop(), |toc| {
        let binary = entry(entry(toc, "toc"), "lib/libtest.so#0");
        *entry(entry(binary, "gfx906"), "ordinal") = Value::from("1");
    });
    let error = open_fails(&bytes, ErrorCode::InvalidFormat);
    let message = error.to_string();
    assert!(message.contains("ordinal"), "{message}");
    assert!(message.contains("gfx906"), "{message}");
    let (offset, p) = problem(error);
    assert!(offset > toc_offset(&bytes) as u64);
    assert!(
        matches!(
            p,
            FormatProblem::WrongType {
                found: "string",
                ..
            }
        ),
        "{p:?}"
    );
}

#[test]
fn rejects_ordinal_past_the_frame_count() {
    let bytes = with_toc(&zstd(), |toc| {
        let binary = entry(entry(toc, "toc"), "bin/hiptest#0");
        *entry(entry(binary, "gfx1100"), "ordinal") = Value::from(3);
    });
    let (_, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert!(
        matches!(
            p,
            FormatProblem::OrdinalOutOfRange {
                ordinal: 3,
                count: 3,
                ..
            }
        ),
        "{p:?}"
    );
}

#[test]
fn rejects_ordinal_past_the_blob_count() {
    let bytes = with_toc(&noop(), |toc| {
        let binary = entry(entry(toc, "toc"), "bin/testapp#0");
        *entry(entry(binary, "gfx900"), "ordinal") = Value::from(1000);
    });
    let (_, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert!(
        matches!(p, FormatProblem::OrdinalOutOfRange { ordinal: 1000, .. }),
        "{p:?}"
    );
}

#[test]
fn rejects_frame_size_past_the_region() {
    let mut bytes = zstd();
    // First frame's size prefix, right after the frame count.
    bytes[68..72].copy_from_slice(&10_000u32.to_le_bytes());
    let (offset, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert_eq!(offset, 68);
    assert!(
        matches!(p, FormatProblem::OutsideBlobRegion { .. }),
        "{p:?}"
    );
}

#[test]
fn rejects_frame_count_past_the_region() {
    let mut bytes = zstd();
    bytes[64..68].copy_from_slice(&4u32.to_le_bytes());
    let (_, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert!(
        matches!(p, FormatProblem::OutsideBlobRegion { .. }),
        "{p:?}"
    );
}

#[test]
fn rejects_zstd_region_outside_the_file() {
    let bytes = with_toc(&zstd(), |toc| {
        *entry(toc, "zstd_size") = Value::from(1u64 << 40)
    });
    let (_, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert!(
        matches!(p, FormatProblem::OutsideBlobRegion { .. }),
        "{p:?}"
    );
}

#[test]
fn rejects_blob_range_outside_the_region() {
    let bytes = with_toc(&noop(), |toc| {
        let blobs = array(entry(toc, "blobs"));
        *entry(&mut blobs[2], "offset") = Value::from(500);
    });
    let (_, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert!(
        matches!(
            p,
            FormatProblem::OutsideBlobRegion {
                start: 500,
                end: 668,
                region_end: 570,
                ..
            }
        ),
        "{p:?}"
    );
}

#[test]
fn rejects_unknown_compression_scheme() {
    let bytes = with_toc(&zstd(), |toc| {
        *entry(toc, "compression_scheme") = Value::from("lz4-per-kernel")
    });
    let (_, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert_eq!(
        p,
        FormatProblem::UnknownScheme {
            scheme: "lz4-per-kernel".into()
        }
    );
}

#[test]
fn rejects_missing_keys() {
    for key in [
        "format_version",
        "gfx_arches",
        "toc",
        "compression_scheme",
        "zstd_size",
    ] {
        let bytes = with_toc(&zstd(), |toc| remove(toc, key));
        let (_, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
        assert!(
            matches!(p, FormatProblem::MissingKey { key: k, .. } if k == key),
            "{key}: {p:?}"
        );
    }
}

#[test]
fn rejects_newer_toc_format_version() {
    let bytes = with_toc(&zstd(), |toc| {
        *entry(toc, "format_version") = Value::from(2)
    });
    let (_, p) = problem(open_fails(&bytes, ErrorCode::UnsupportedVersion));
    assert_eq!(p, FormatProblem::UnsupportedTocVersion { version: 2 });
}

#[test]
fn rejects_truncated_toc_as_msgpack_error() {
    let bytes = noop();
    let (offset, p) = problem(open_fails(
        &bytes[..bytes.len() - 3],
        ErrorCode::MsgpackParseFailed,
    ));
    assert!(offset >= toc_offset(&bytes) as u64);
    assert!(matches!(p, FormatProblem::Msgpack(_)), "{p:?}");
}

#[test]
fn rejects_bytes_after_the_toc() {
    let mut bytes = zstd();
    bytes.extend_from_slice(b"junk");
    let (_, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert_eq!(p, FormatProblem::TrailingBytes { count: 4 });
}

#[test]
fn rejects_malformed_target_names() {
    let bytes = with_toc(&zstd(), |toc| {
        array(entry(toc, "gfx_arches"))[0] = Value::from("gfx1100:xnack");
    });
    let (_, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert!(matches!(p, FormatProblem::BadTarget { .. }), "{p:?}");
}

#[test]
fn ignores_unknown_keys() {
    let bytes = with_toc(&zstd(), |toc| {
        map(toc).push((Value::from("signature"), Value::Binary(vec![1, 2, 3])));
        let binary = entry(entry(toc, "toc"), "lib/libhip.so#0");
        map(entry(binary, "gfx1101")).push((
            Value::from("metadata"),
            Value::Map(vec![(Value::from("x"), Value::Nil)]),
        ));
    });
    let archive = Archive::from_bytes("extended", &bytes).unwrap();
    assert_eq!(
        &*archive.kernel("lib/libhip.so#0", &t("gfx1101")).unwrap(),
        &zstd_contents()[1].2[..]
    );
}

/// The file opens (ranges are fine) but the code object cannot be read.
fn get_kernel_fails(bytes: &[u8], binary: &str, target: &str) -> Error {
    let archive = Archive::from_bytes("bad", bytes).unwrap();
    let error = archive
        .kernel(binary, &t(target))
        .expect_err("bad frame decompressed");
    assert_eq!(error.code(), ErrorCode::DecompressionFailed, "{error}");

    let context = TestContext::new();
    let path = context.path("bad.kpack");
    fs::write(&path, bytes).unwrap();
    let (code, data) = c_get_kernel(&path, binary, target);
    assert_eq!(code, ErrorCode::DecompressionFailed);
    assert!(data.is_empty());
    error
}

#[test]
fn rejects_frame_that_decompresses_to_a_different_size() {
    let bytes = with_toc(&zstd(), |toc| {
        let binary = entry(entry(toc, "toc"), "lib/libhip.so#0");
        *entry(entry(binary, "gfx1101"), "original_size") = Value::from(620);
    });
    match get_kernel_fails(&bytes, "lib/libhip.so#0", "gfx1101") {
        Error::Decompression {
            problem, ordinal, ..
        } => {
            assert_eq!(ordinal, 1);
            assert_eq!(
                problem,
                DecompressionProblem::SizeMismatch {
                    expected: 620,
                    actual: 619
                }
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn rejects_corrupt_frame_payload() {
    let mut bytes = zstd();
    // Second frame: count (4) + size (4) + frame 0 (41) + size (4). Its
    // first block header follows magic (4), descriptor (1) and content
    // size (2); block type 3 is reserved, which no decoder accepts.
    let frame = 64 + 4 + 4 + 41 + 4;
    assert_eq!(&bytes[frame..frame + 4], &[0x28, 0xb5, 0x2f, 0xfd]);
    bytes[frame + 7] |= 0b110;
    get_kernel_fails(&bytes, "lib/libhip.so#0", "gfx1101");
}

#[test]
fn rejects_blob_size_disagreeing_with_original_size() {
    let bytes = with_toc(&noop(), |toc| {
        let binary = entry(entry(toc, "toc"), "lib/libtest.so#0");
        *entry(entry(binary, "gfx900"), "original_size") = Value::from(120);
    });
    let (_, p) = problem(open_fails(&bytes, ErrorCode::InvalidFormat));
    assert!(
        matches!(
            p,
            FormatProblem::Mismatch {
                expected: 119,
                actual: 120,
                ..
            }
        ),
        "{p:?}"
    );
}

#[test]
fn missing_file_is_file_not_found() {
    let error = Archive::open("/nonexistent/x.kpack").unwrap_err();
    assert_eq!(error.code(), ErrorCode::FileNotFound);
    assert_eq!(
        c_open(Path::new("/nonexistent/x.kpack")),
        ErrorCode::FileNotFound
    );
}

#[test]
fn directory_is_an_io_error() {
    let context = TestContext::new();
    assert_eq!(c_open(context.dir.path()), ErrorCode::IoError);
}

/// Runs `open` on another thread and gives its result, failing (rather
/// than hanging) when it has not returned within ten seconds.
fn promptly<T: Send + 'static>(open: impl FnOnce() -> T + Send + 'static) -> T {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || send.send(open()));
    receive
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("still blocked after 10 s")
}

/// A FIFO in a fresh context (returned with it).
fn fifo() -> (TestContext, std::path::PathBuf) {
    let context = TestContext::new();
    let path = context.path("rocm_gfx1100.kpack");
    let c_path = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path; mkfifo reads nothing else.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    (context, path)
}

/// A FIFO would block a plain open until a writer comes, for ever; it is
/// refused at once as an I/O error, like a directory: the path exists (not
/// FILE_NOT_FOUND) but is no archive file.
#[test]
fn a_fifo_is_refused_promptly_as_an_io_error() {
    let (context, path) = fifo();
    let opened = path.clone();
    let error = promptly(move || Archive::open(&opened).map(|_| ())).unwrap_err();
    assert_eq!(error.code(), ErrorCode::IoError, "{error}");
    insta::assert_snapshot!(context.error(&error));

    let opened = path.clone();
    assert_eq!(promptly(move || c_open(&opened)), ErrorCode::IoError);

    let c_path = CString::new(path.to_str().unwrap()).unwrap();
    let code = promptly(move || {
        extern "C" fn keep_going(_: *const std::ffi::c_char, _: *mut std::ffi::c_void) -> bool {
            true
        }
        let data = std::ptr::null_mut();
        let callback = keep_going as unsafe extern "C" fn(_, _) -> bool;
        // SAFETY: a NUL-terminated path, a callback of the declared type and a null user pointer it never reads.
        unsafe { capi::kpack_enumerate_architectures(c_path.as_ptr(), Some(callback), data) }
    });
    assert_eq!(code, ErrorCode::IoError);
}

/// Found while setting up the fuzzers: a 524-byte archive whose TOC claims a 4 GiB code
/// object made `kernel` reserve 4 GiB before noticing the frame holds 1019
/// bytes. The size is checked against the frame header first, so even a
/// size no allocation could satisfy is a decompression error, not an
/// out-of-memory one.
#[test]
fn rejects_a_huge_original_size_without_allocating_it() {
    let bytes = with_toc(&zstd(), |toc| {
        let binary = entry(entry(toc, "toc"), "lib/libhip.so#0");
        *entry(entry(binary, "gfx1100"), "original_size") = Value::from(1u64 << 50);
    });
    match get_kernel_fails(&bytes, "lib/libhip.so#0", "gfx1100") {
        Error::Decompression { problem, .. } => assert_eq!(
            problem,
            DecompressionProblem::SizeMismatch {
                expected: 1 << 50,
                actual: 1019
            }
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn entry_metadata_keeps_string_values_and_skips_others() {
    let bytes = with_toc(&noop(), |toc| {
        let binary = entry(entry(toc, "toc"), "lib/libtest.so#0");
        map(entry(binary, "gfx900")).push((
            Value::from("metadata"),
            Value::Map(vec![
                (Value::from("library"), Value::from("rocblas")),
                (Value::from("length"), Value::from(1024)),
                (Value::from("factors"), Value::Array(vec![Value::from(2)])),
                (Value::from("path"), Value::from("lib/rocblas/library/x.co")),
            ]),
        ));
    });
    let archive = Archive::from_bytes("meta", &bytes).unwrap();
    let kernel = archive.find("lib/libtest.so#0", &t("gfx900")).unwrap();
    let metadata = kernel.metadata().unwrap().unwrap();
    let fields: Vec<_> = metadata.iter().collect();
    assert_eq!(
        fields,
        [("library", "rocblas"), ("path", "lib/rocblas/library/x.co")]
    );
    let other = archive.find("lib/libtest.so#0", &t("gfx906")).unwrap();
    assert_eq!(other.metadata().unwrap(), None);
}

#[test]
fn metadata_that_is_not_a_map_fails_only_when_read() {
    let bytes = with_toc(&noop(), |toc| {
        let binary = entry(entry(toc, "toc"), "bin/testapp#0");
        map(entry(binary, "gfx900")).push((Value::from("metadata"), Value::from(7)));
    });
    let archive = Archive::from_bytes("meta", &bytes).unwrap();
    let kernel = archive.find("bin/testapp#0", &t("gfx900")).unwrap();
    assert_eq!(kernel.bytes().unwrap().len(), 168);
    let (offset, problem) = problem(kernel.metadata().unwrap_err());
    assert!(offset > toc_offset(&bytes) as u64, "{offset}");
    assert!(
        matches!(
            problem,
            FormatProblem::WrongType {
                expected: "map",
                ..
            }
        ),
        "{problem}"
    );
}

/// `toc["lib/libtest.so#0"]` of the noop fixture with `count` distinct
/// targets, each an entry for the fixture's first code object.
fn with_targets(count: usize) -> Vec<u8> {
    with_toc(&noop(), |toc| {
        let binary = entry(entry(toc, "toc"), "lib/libtest.so#0");
        let first = map(binary)[0].1.clone();
        *binary = Value::Map(
            (0..count)
                .map(|n| (Value::from(format!("gfx{:x}", 0x10000 + n)), first.clone()))
                .collect(),
        );
    })
}

/// A TOC naming more targets than any archive needs is refused at the
/// limit (parsing it stays linear: thousands of targets open at once).
#[test]
fn rejects_more_targets_than_an_archive_may_name() {
    let context = TestContext::new();
    let path = context.path("many.kpack");
    // With `bin/testapp#0`'s gfx900, 4096 targets in all.
    fs::write(&path, with_targets(rocm_kpack::format::MAX_TARGETS - 1)).unwrap();
    let archive = Archive::open(&path).unwrap();
    assert_eq!(
        archive.targets_of("lib/libtest.so#0").unwrap().count(),
        4095
    );

    let (_, p) = problem(open_fails(
        &with_targets(rocm_kpack::format::MAX_TARGETS),
        ErrorCode::InvalidFormat,
    ));
    assert_eq!(
        p,
        FormatProblem::TooManyTargets {
            what: "toc",
            limit: 4096
        }
    );
    let too_many_arches = with_toc(&noop(), |toc| {
        *entry(toc, "gfx_arches") = Value::Array(
            (0..=rocm_kpack::format::MAX_TARGETS)
                .map(|n| Value::from(format!("gfx{:x}", 0x10000 + n)))
                .collect(),
        );
    });
    let (_, p) = problem(open_fails(&too_many_arches, ErrorCode::InvalidFormat));
    assert!(
        matches!(
            p,
            FormatProblem::TooManyTargets {
                what: "gfx_arches",
                ..
            }
        ),
        "{p:?}"
    );
}

//! The loader's Rust API: configuration as a value, candidate order, lazy
//! opening, the cache, and its debug log.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::common::*;
use fs_err as fs;
use rocm_kpack::{Compression, Error, ErrorCode, Loader, LoaderConfig, Marker};

fn marker(paths: &[&str]) -> Marker {
    Marker {
        search_paths: paths.iter().map(|p| p.to_string()).collect(),
        kernel_name: "lib/libx.so".into(),
    }
}

/// A loader whose debug lines are collected.
fn loader(config: LoaderConfig) -> (Loader, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    let config = LoaderConfig {
        log: Some(Arc::new(move |line: &str| {
            sink.lock().unwrap().push(line.to_owned())
        })),
        ..config
    };
    (Loader::new(config), lines)
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap()
}

#[test]
fn candidates_are_prefix_then_marker_paths_expanded_per_compatible_target() {
    let config = LoaderConfig {
        path_prefix: vec![PathBuf::from("/prefix/a.kpack")],
        ..LoaderConfig::default()
    };
    let loader = Loader::new(config);
    let candidates = loader.candidates(
        &marker(&["../.kpack/rocm_@GFXARCH@.kpack", "/abs/fixed.kpack"]),
        Path::new("/opt/rocm/lib/libx.so"),
        &[t("gfx942:sramecc+:xnack-"), t("gfx9-4-generic")],
    );
    let expected = [
        "/prefix/a.kpack",
        "/opt/rocm/lib/../.kpack/rocm_gfx942:sramecc+:xnack-.kpack",
        "/opt/rocm/lib/../.kpack/rocm_gfx942:sramecc+.kpack",
        "/opt/rocm/lib/../.kpack/rocm_gfx942:xnack-.kpack",
        "/opt/rocm/lib/../.kpack/rocm_gfx942.kpack",
        "/opt/rocm/lib/../.kpack/rocm_gfx9-4-generic.kpack",
        "/abs/fixed.kpack",
    ];
    assert_eq!(candidates, expected.map(PathBuf::from));
}

#[test]
fn rocm_kpack_path_replaces_every_other_candidate() {
    let loader = Loader::new(LoaderConfig {
        path: Some(vec![
            PathBuf::from("only.kpack"),
            PathBuf::from("only.kpack"),
        ]),
        path_prefix: vec![PathBuf::from("/prefix.kpack")],
        ..LoaderConfig::default()
    });
    let candidates = loader.candidates(
        &marker(&["x_@GFXARCH@.kpack"]),
        Path::new("/lib/libx.so"),
        &[t("gfx1100")],
    );
    assert_eq!(candidates, [PathBuf::from("only.kpack")]);
}

#[test]
fn opens_candidates_lazily_and_caches_archives() {
    let context = TestContext::new();
    context.archive(".kpack/k_gfx1100.kpack", &["gfx1100"], "first");
    context.archive(".kpack/k_gfx1101.kpack", &["gfx1101"], "second");
    let binary = context.path("libx.so");
    let m = marker(&[".kpack/k_@GFXARCH@.kpack"]);
    let (loader, lines) = loader(LoaderConfig::default());

    let got = loader
        .load(&m, &binary, 0, &[t("gfx1100"), t("gfx1101")])
        .unwrap();
    assert_eq!(text(got), "first gfx1100");
    let opened = |lines: &[String]| lines.iter().filter(|l| l.starts_with("opened ")).count();
    // The gfx1101 archive was never needed, so never opened.
    assert_eq!(opened(&lines.lock().unwrap()), 1);

    let got = loader.load(&m, &binary, 0, &[t("gfx1100")]).unwrap();
    assert_eq!(text(got), "first gfx1100");
    assert_eq!(
        opened(&lines.lock().unwrap()),
        1,
        "reopened a cached archive"
    );

    let got = loader.load(&m, &binary, 0, &[t("gfx1101")]).unwrap();
    assert_eq!(text(got), "second gfx1101");
    assert_eq!(opened(&lines.lock().unwrap()), 2);
}

#[test]
fn finds_an_archive_installed_after_a_failed_load() {
    let context = TestContext::new();
    fs::create_dir(context.path("lib")).unwrap();
    let binary = context.path("lib/libx.so");
    let m = marker(&["../.kpack/k_@GFXARCH@.kpack"]);
    let loader = Loader::new(LoaderConfig::default());
    let error = loader.load(&m, &binary, 0, &[t("gfx1030")]).unwrap_err();
    assert_eq!(error.code(), ErrorCode::ArchiveNotFound);
    insta::assert_snapshot!(context.error(&error));

    context.archive(".kpack/k_gfx1030.kpack", &["gfx1030"], "late");
    assert_eq!(
        text(loader.load(&m, &binary, 0, &[t("gfx1030")]).unwrap()),
        "late gfx1030"
    );
}

#[test]
fn arch_not_found_lists_what_the_archives_offer() {
    let context = TestContext::new();
    context.archive("fixed.kpack", &["gfx90a:xnack+"], "plus");
    let loader = Loader::new(LoaderConfig::default());
    let error = loader
        .load(
            &marker(&["fixed.kpack"]),
            &context.path("libx.so"),
            0,
            &[t("gfx90a:xnack-")],
        )
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::ArchNotFound);
    insta::assert_snapshot!(context.error(&error));
}

#[test]
fn a_corrupt_candidate_is_skipped_and_logged() {
    let context = TestContext::new();
    fs::write(context.path("a.kpack"), b"KPAK but not really an archive").unwrap();
    context.archive("b.kpack", &["gfx1100"], "good");
    let (loader, lines) = loader(LoaderConfig::default());
    let got = loader
        .load(
            &marker(&["a.kpack", "b.kpack"]),
            &context.path("libx.so"),
            0,
            &[t("gfx1100")],
        )
        .unwrap();
    assert_eq!(text(got), "good gfx1100");
    let logged = context.mask(&lines.lock().unwrap().join("\n"));
    insta::assert_snapshot!(logged);
}

/// A FIFO where an archive is expected (a plain open of it would block
/// until a writer came) is skipped at once for the next candidate.
#[test]
fn a_fifo_candidate_is_skipped_for_the_next() {
    let context = TestContext::new();
    let fifo = context.path("a.kpack");
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path; mkfifo reads nothing else.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    context.archive("b.kpack", &["gfx1100"], "good");
    let (loader, lines) = loader(LoaderConfig::default());
    let binary = context.path("libx.so");
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let got = loader.load(
            &marker(&["a.kpack", "b.kpack"]),
            &binary,
            0,
            &[t("gfx1100")],
        );
        send.send(got.map(text))
    });
    let got = receive
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("the loader still blocks on the FIFO after 10 s");
    assert_eq!(got.unwrap(), "good gfx1100");
    let lines = lines.lock().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("a.kpack") && l.contains("not a regular file")),
        "{lines:?}"
    );
}

#[test]
fn disabled_loader_refuses_and_empty_arch_list_is_invalid() {
    let loader = Loader::new(LoaderConfig {
        disabled: true,
        ..LoaderConfig::default()
    });
    let m = marker(&["x.kpack"]);
    assert!(matches!(
        loader.load(&m, Path::new("/x"), 0, &[t("gfx1100")]),
        Err(Error::Disabled)
    ));
    let loader = Loader::new(LoaderConfig::default());
    assert_eq!(
        loader.load(&m, Path::new("/x"), 0, &[]).unwrap_err().code(),
        ErrorCode::InvalidArgument
    );
}

#[test]
fn archives_beside_the_expanded_paths_are_searched_last() {
    let context = TestContext::new();
    // A family archive matches the marker's pattern without being named by
    // any expansion for gfx1101.
    context.archive(
        ".kpack/rocm_gfx110X-all.kpack",
        &["gfx1100", "gfx1101"],
        "family",
    );
    context.archive(".kpack/rocm_gfx90a.kpack", &["gfx90a:xnack-"], "mi210");
    fs::write(context.path(".kpack/notes.txt"), b"not an archive").unwrap();
    let binary = context.path("libx.so");
    let m = marker(&[".kpack/rocm_@GFXARCH@.kpack"]);
    let loader = Loader::new(LoaderConfig::default());
    assert_eq!(
        text(loader.load(&m, &binary, 0, &[t("gfx1101")]).unwrap()),
        "family gfx1101"
    );
    // A GPU the package has no code for: arch not found, naming what exists.
    let error = loader.load(&m, &binary, 0, &[t("gfx1201")]).unwrap_err();
    assert_eq!(error.code(), ErrorCode::ArchNotFound);
    let message = error.to_string();
    assert!(
        message.contains("rocm_gfx90a.kpack has [gfx90a:xnack-]"),
        "{message}"
    );
    assert!(
        message.contains("rocm_gfx110X-all.kpack has [gfx1100, gfx1101]"),
        "{message}"
    );
}

/// TheRock's torch layout: a small overlay for `gfx90a:xnack+` holding two
/// of ten kernels, an empty archive for `gfx90a:xnack-`, the full `gfx90a`
/// archive; the marker names `torch_@GFXARCH@.kpack`.
fn overlay_layout(context: &TestContext) {
    let kernels: Vec<String> = (0..10).map(|n| format!("lib/libx.so#{n}")).collect();
    let write = |name: &str, arch: &str, keys: &[String], text: &str| {
        let contents: Vec<_> = keys
            .iter()
            .map(|key| (key.as_str(), arch, format!("{text} {key}").into_bytes()))
            .collect();
        let bytes = write_archive(Compression::DEFAULT, arch, &[arch], &contents);
        fs::create_dir_all(context.path(".kpack")).unwrap();
        fs::write(context.path(&format!(".kpack/{name}")), bytes).unwrap();
    };
    write(
        "torch_gfx90a:xnack+.kpack",
        "gfx90a:xnack+",
        &kernels[..2],
        "overlay",
    );
    write("torch_gfx90a:xnack-.kpack", "gfx90a:xnack-", &[], "empty");
    write("torch_gfx90a.kpack", "gfx90a", &kernels, "full");
}

#[test]
fn a_partial_or_empty_overlay_archive_falls_through_to_the_full_one() {
    let context = TestContext::new();
    overlay_layout(&context);
    let m = marker(&[".kpack/torch_@GFXARCH@.kpack"]);
    let binary = context.path("libx.so");
    let loader = Loader::new(LoaderConfig::default());
    for bundle in 0..10 {
        let plus = text(
            loader
                .load(&m, &binary, bundle, &[t("gfx90a:sramecc+:xnack+")])
                .unwrap(),
        );
        let expected = if bundle < 2 { "overlay" } else { "full" };
        assert_eq!(plus, format!("{expected} lib/libx.so#{bundle}"));
        let minus = text(
            loader
                .load(&m, &binary, bundle, &[t("gfx90a:sramecc+:xnack-")])
                .unwrap(),
        );
        assert_eq!(minus, format!("full lib/libx.so#{bundle}"));
    }
}

#[test]
fn the_debug_log_names_each_archive_that_lacked_the_kernel() {
    let context = TestContext::new();
    overlay_layout(&context);
    let (loader, lines) = loader(LoaderConfig::default());
    loader
        .load(
            &marker(&[".kpack/torch_@GFXARCH@.kpack"]),
            &context.path("libx.so"),
            7,
            &[t("gfx90a:xnack+")],
        )
        .unwrap();
    let logged = context.mask(&lines.lock().unwrap().join("\n"));
    insta::assert_snapshot!(logged);
}

#[test]
fn kernel_not_found_only_when_every_candidate_lacks_the_kernel() {
    let context = TestContext::new();
    overlay_layout(&context);
    let loader = Loader::new(LoaderConfig::default());
    let error = loader
        .load(
            &marker(&[".kpack/torch_@GFXARCH@.kpack"]),
            &context.path("libx.so"),
            10,
            &[t("gfx90a:xnack+")],
        )
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::KernelNotFound);
    insta::assert_snapshot!(context.error(&error));
}

#[test]
fn an_error_other_than_a_miss_ends_the_search() {
    let context = TestContext::new();
    overlay_layout(&context);
    // The overlay lists the target and holds the key, but its code object
    // does not decompress: returned as is, never papered over by the full
    // archive.
    let path = context.path(".kpack/torch_gfx90a:xnack+.kpack");
    let mut bytes = fs::read(&path).unwrap();
    let at = bytes
        .windows(4)
        .position(|w| w == [0x28, 0xb5, 0x2f, 0xfd])
        .expect("a zstd frame");
    bytes[at + 4..at + 12].fill(0xff);
    fs::write(&path, bytes).unwrap();
    let loader = Loader::new(LoaderConfig::default());
    let error = loader
        .load(
            &marker(&[".kpack/torch_@GFXARCH@.kpack"]),
            &context.path("libx.so"),
            0,
            &[t("gfx90a:xnack+")],
        )
        .unwrap_err();
    assert_eq!(error.code(), ErrorCode::DecompressionFailed);
}

/// The reference's fall-through fixtures (`generate_test_data.py`):
/// `test_fallthrough_xnack.kpack` lists only `gfx90a:xnack-` and holds only
/// `lib/libother.so#0`; `test_fallthrough_generic.kpack` lists only
/// `gfx90a` and holds `lib/libtest.so#0`; both uncompressed.
fn reference_fallthrough(context: &TestContext) {
    let padded = |text: &str| {
        let mut data = text.as_bytes().to_vec();
        data.resize(text.len() + 50, 0);
        data
    };
    for (name, arch, key, data) in [
        (
            "test_fallthrough_xnack.kpack",
            "gfx90a:xnack-",
            "lib/libother.so#0",
            "OTHER_KERNEL_XNACK_MINUS",
        ),
        (
            "test_fallthrough_generic.kpack",
            "gfx90a",
            "lib/libtest.so#0",
            "GENERIC_GFX90A_KERNEL_DATA",
        ),
    ] {
        let bytes = write_archive(
            Compression::None,
            "gfx90aX",
            &[arch],
            &[(key, arch, padded(data))],
        );
        fs::write(context.path(name), bytes).unwrap();
    }
    fs::copy(
        reference("test_noop.kpack"),
        context.path("test_noop.kpack"),
    )
    .unwrap();
}

/// One loader case: search paths, kernel name, bundle, arches, and the
/// result's code or its first bytes.
type Case<'a> = (
    &'a [&'a str],
    &'a str,
    u32,
    &'a [&'a str],
    Result<&'a str, ErrorCode>,
);

/// The reference's loader test for rocm-systems#9953 and the error-code
/// cases around it, re-expressed.
#[test]
fn the_reference_loader_cases_for_fall_through() {
    let context = TestContext::new();
    reference_fallthrough(&context);
    let xnack = "test_fallthrough_xnack.kpack";
    let generic = "test_fallthrough_generic.kpack";
    let noop = "test_noop.kpack";
    let cases: &[Case] = &[
        // LoadCodeObject_FallsThroughToNextArchiveOnKernelNotFound.
        (
            &[xnack, generic],
            "lib/libtest.so",
            0,
            &["gfx90a:xnack-"],
            Ok("GENERIC_GFX90A_KERNEL_DATA"),
        ),
        // The generic archive listed first: targets come first, archives second.
        (
            &[generic, xnack],
            "lib/libtest.so",
            0,
            &["gfx90a:xnack-"],
            Ok("GENERIC_GFX90A_KERNEL_DATA"),
        ),
        // Both miss: kernel not found, not arch not found.
        (
            &[xnack, generic],
            "lib/missing.so",
            0,
            &["gfx90a:xnack-"],
            Err(ErrorCode::KernelNotFound),
        ),
        // Only the overlay, which lacks the key.
        (
            &[xnack],
            "lib/libtest.so",
            0,
            &["gfx90a:xnack-"],
            Err(ErrorCode::KernelNotFound),
        ),
        // The hit is for the second requested arch.
        (
            &[xnack, generic, noop],
            "lib/libtest.so",
            1,
            &["gfx90a:xnack-", "gfx900"],
            Err(ErrorCode::KernelNotFound),
        ),
        (
            &[xnack, noop],
            "lib/libtest.so",
            0,
            &["gfx90a:xnack-", "gfx900"],
            Ok("KERNEL1_GFX900_DATA"),
        ),
        // An xnack+ agent never takes the xnack- overlay.
        (
            &[xnack, generic],
            "lib/libtest.so",
            0,
            &["gfx90a:xnack+"],
            Ok("GENERIC_GFX90A_KERNEL_DATA"),
        ),
        // LoadCodeObject_KernelNotFound, _ArchNotFound, _ArchNotInArchive,
        // _ArchiveNotFound, _ArchitecturePriority, _TargetTripleStripping.
        (
            &[noop],
            "lib/libtest.so",
            999,
            &["gfx900"],
            Err(ErrorCode::KernelNotFound),
        ),
        (
            &[noop],
            "lib/libtest.so",
            0,
            &["gfx9999"],
            Err(ErrorCode::ArchNotFound),
        ),
        (
            &["nonexistent.kpack"],
            "lib/libtest.so",
            0,
            &["gfx900"],
            Err(ErrorCode::ArchiveNotFound),
        ),
        (
            &[noop],
            "lib/libtest.so",
            0,
            &["gfx906", "gfx900"],
            Ok("KERNEL2_GFX906_DATA"),
        ),
        (
            &[noop],
            "lib/libtest.so",
            0,
            &["amdgcn-amd-amdhsa--gfx900"],
            Ok("KERNEL1_GFX900_DATA"),
        ),
    ];
    let loader = Loader::new(LoaderConfig::default());
    for (paths, kernel_name, bundle, arches, expected) in cases {
        let marker = Marker {
            search_paths: paths.iter().map(|p| p.to_string()).collect(),
            kernel_name: kernel_name.to_string(),
        };
        let arches: Vec<_> = arches.iter().map(|a| t(a)).collect();
        let got = loader.load(&marker, &context.path("fake_binary.so"), *bundle, &arches);
        let case = format!("{paths:?} {kernel_name}#{bundle} for {arches:?}");
        match (got, expected) {
            (Ok(bytes), Ok(prefix)) => assert!(bytes.starts_with(prefix.as_bytes()), "{case}"),
            (Err(error), Err(code)) => assert_eq!(error.code(), *code, "{case}: {error}"),
            (got, expected) => panic!("{case}: got {got:?}, expected {expected:?}"),
        }
    }
}

/// One archive listing both `gfx90a:xnack-` and `gfx90a` with the key only
/// under `gfx90a`: its second (archive, target) pair answers.
#[test]
fn one_archive_is_tried_once_per_target_it_lists() {
    let context = TestContext::new();
    let bytes = write_archive(
        Compression::DEFAULT,
        "gfx90a",
        &["gfx90a:xnack-", "gfx90a"],
        &[("lib/libx.so#0", "gfx90a", b"bare".to_vec())],
    );
    fs::write(context.path("both.kpack"), bytes).unwrap();
    let loader = Loader::new(LoaderConfig::default());
    let got = loader
        .load(
            &marker(&["both.kpack"]),
            &context.path("libx.so"),
            0,
            &[t("gfx90a:xnack-")],
        )
        .unwrap();
    assert_eq!(text(got), "bare");
}

//! The loader's Rust API: configuration as a value, candidate order, lazy
//! opening, the cache, and its debug log.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::common::*;
use fs_err as fs;
use rocm_kpack::{Error, ErrorCode, Loader, LoaderConfig, Marker};

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

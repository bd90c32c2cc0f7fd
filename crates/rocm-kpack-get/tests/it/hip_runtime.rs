//! Which HIP runtime installed libraries would load, whether it is
//! kpack-aware, and the layout that follows: on small runtimes and
//! libraries built with `cc`, with every search place pointed at the
//! test's own directories; and the fat layout installed, checked against
//! Debian's real HIP runtime.

use std::path::{Path, PathBuf};

use crate::common::runtimes::{
    build_library, build_library_named, build_library_without_runtime, build_runtime,
    build_runtime_named, ld_cache, ldconfig, FakeRuntime,
};
use crate::common::{fat_targets, output, success, Env};
use kpack_test_support::context::TestContext;
use kpack_test_support::real_hip::{HIPF, HIPK};
use kpack_test_support::transcript;
use rocm_kpack_get::layout::hip_runtime::ld_cache::LdCache;
use rocm_kpack_get::layout::hip_runtime::{
    classify, CompressedBundles, Evidence, FoundIn, RuntimeSearch, SearchRoots, Searcher,
};
use rocm_kpack_get::layout::{decide, Layout, LayoutChoice};

/// Search places that are all empty directories of `dir`.
fn roots(dir: &Path) -> SearchRoots {
    SearchRoots {
        ld_library_path: None,
        rocm_path: None,
        rocm_default: dir.join("no-rocm"),
        ld_cache: dir.join("no-ld.so.cache"),
        default_dirs: vec![dir.join("no-lib")],
    }
}

fn auto_layout(search: &RuntimeSearch) -> Layout {
    decide(LayoutChoice::Auto, &[search]).layout
}

#[test]
fn each_kind_of_evidence_decides_whether_the_runtime_is_kpack_aware() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            FakeRuntime::NeedsKpackLibrary,
            vec![Evidence::NeedsKpackLibrary {
                name: "librocm_kpack.so.0".into(),
            }],
            true,
        ),
        (
            FakeRuntime::ImportsLoadCodeObject,
            vec![Evidence::ImportsLoadCodeObject],
            true,
        ),
        (
            FakeRuntime::HoldsSearchPathsKey,
            vec![Evidence::HoldsSearchPathsKey],
            true,
        ),
        (
            FakeRuntime::BuiltWithoutKpack,
            vec![
                Evidence::NeedsKpackLibrary {
                    name: "librocm_kpack.so.0".into(),
                },
                Evidence::ImportsLoadCodeObject,
                Evidence::HoldsSearchPathsKey,
                Evidence::KpackDisabled,
            ],
            false,
        ),
        (FakeRuntime::Plain, vec![], false),
    ];
    for (kind, evidence, aware) in cases {
        let system = dir.path().join(format!("{kind:?}"));
        let runtime = build_runtime(&system, kind);
        let roots = SearchRoots {
            default_dirs: vec![system],
            ..roots(dir.path())
        };
        let search = Searcher::new(&roots).for_new_library();
        let found = search.runtime.as_ref().expect("a runtime");
        assert_eq!(found.path, runtime, "{kind:?}");
        assert_eq!(found.name, "libamdhip64.so.5");
        assert_eq!(found.found_in, FoundIn::DefaultDirectory);
        assert_eq!(found.evidence, evidence, "{kind:?}");
        assert_eq!(found.kpack_aware(), aware, "{kind:?}");
        let layout = if aware { Layout::Kpack } else { Layout::Fat };
        assert_eq!(auto_layout(&search), layout, "{kind:?}");
    }
}

#[test]
fn runtimes_loading_compressed_bundles_are_told_by_their_soname_or_hip_version() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "libamdhip64.so.7",
            FakeRuntime::Plain,
            Some("soname libamdhip64.so.7"),
        ),
        (
            "libamdhip64.so.6",
            FakeRuntime::HipVersion("6.2.41133"),
            Some("HIP 6.2.41133"),
        ),
        (
            "libamdhip64.so.6",
            FakeRuntime::HipVersion("6.1.40091"),
            None,
        ),
        (
            "libamdhip64.so.5",
            FakeRuntime::HipVersion("5.7.31921"),
            None,
        ),
        ("libamdhip64.so.5", FakeRuntime::Plain, None),
    ];
    for (n, (name, kind, expected)) in cases.into_iter().enumerate() {
        let system = dir.path().join(format!("{n}"));
        let runtime = build_runtime_named(&system, kind, name);
        let found = classify(&runtime).unwrap().compressed_bundles;
        let shown = found.as_ref().map(|evidence| match evidence {
            CompressedBundles::Soname { soname } => format!("soname {soname}"),
            CompressedBundles::HipVersion { version } => format!("HIP {version}"),
        });
        assert_eq!(shown.as_deref(), expected, "{name} {kind:?}");
    }
    // Debian 12's real runtime (HIP 5.2) loads plain bundles only.
    let debian = std::path::Path::new("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5");
    let classified = classify(debian).unwrap();
    assert_eq!(classified.compressed_bundles, None);
}

#[test]
fn with_a_runtime_loading_compressed_bundles_the_fat_layout_compresses_them() {
    let dir = tempfile::tempdir().unwrap();
    let system = dir.path().join("lib");
    build_runtime_named(
        &system,
        FakeRuntime::HipVersion("6.4.43482"),
        "libamdhip64.so.6",
    );
    build_runtime(&system, FakeRuntime::Plain);
    let search = |name: &str| {
        let roots = SearchRoots {
            default_dirs: vec![system.clone()],
            ..roots(dir.path())
        };
        let library =
            build_library_named(&dir.path().join(format!("user-{name}.so")), &system, name);
        Searcher::new(&roots)
            .for_library(&library)
            .unwrap()
            .unwrap()
    };
    assert_eq!(
        auto_layout(&search("libamdhip64.so.6")),
        Layout::FatCompressed
    );
    assert_eq!(auto_layout(&search("libamdhip64.so.5")), Layout::Fat);
}

#[test]
fn no_runtime_anywhere_is_none_and_the_layout_is_fat() {
    let dir = tempfile::tempdir().unwrap();
    let search = Searcher::new(&roots(dir.path())).for_new_library();
    assert_eq!(search, RuntimeSearch::default());
    assert_eq!(auto_layout(&search), Layout::Fat);
}

#[test]
fn a_runpath_with_origin_finds_the_runtime_beside_the_library_before_the_system() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("prefix");
    let ours = build_runtime(&prefix.join("lib64"), FakeRuntime::HoldsSearchPathsKey);
    let system = dir.path().join("system");
    build_runtime(&system, FakeRuntime::Plain);
    let library = build_library(
        &prefix.join("lib/libuser.so"),
        &prefix.join("lib64"),
        &["-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib64"],
    );
    let roots = SearchRoots {
        default_dirs: vec![system],
        ..roots(dir.path())
    };
    let search = Searcher::new(&roots)
        .for_library(&library)
        .unwrap()
        .unwrap();
    let found = search.runtime.as_ref().unwrap();
    assert_eq!(found.found_in, FoundIn::Runpath);
    assert_eq!(found.path, prefix.join("lib/../lib64/libamdhip64.so.5"));
    assert_eq!(
        fs_err::canonicalize(&found.path).unwrap(),
        fs_err::canonicalize(ours).unwrap()
    );
    assert_eq!(auto_layout(&search), Layout::Kpack);
}

#[test]
fn an_installed_library_reaching_the_runtime_through_others_finds_it_through_its_own_runpath() {
    // A Python distribution's extension module beside TheRock's ROCm: its
    // run path names `_rocm_sdk_core/lib`, whose runtime is ROCm 7's.
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site-packages");
    let core = site.join("_rocm_sdk_core/lib");
    let ours = build_runtime_named(&core, FakeRuntime::NeedsKpackLibrary, "libamdhip64.so.7");
    let system = dir.path().join("system");
    build_runtime(&system, FakeRuntime::Plain);
    let roots = SearchRoots {
        default_dirs: vec![system.clone()],
        ..roots(dir.path())
    };
    let searcher = Searcher::new(&roots);
    // As long as TheRock's (7 KB: every Python version's site-packages),
    // past what a string read through `object`'s read cache may be.
    let elsewhere: Vec<String> = (0..300)
        .map(|n| format!("$ORIGIN/../../python3.{n}/site-packages/_rocm_sdk_core/lib"))
        .collect();
    let runpath = format!(
        "-Wl,--enable-new-dtags,-rpath,{}:$ORIGIN/../_rocm_sdk_core/lib",
        elsewhere.join(":")
    );
    assert!(runpath.len() > 8192);
    let runpath = runpath.as_str();
    let module = build_library_without_runtime(&site.join("pkg/_linalg.so"), &[runpath]);
    assert_eq!(searcher.for_library(&module).unwrap(), None);
    let search = searcher.for_installed_library(&module).unwrap();
    let found = search.runtime.as_ref().unwrap();
    assert_eq!(found.found_in, FoundIn::Runpath);
    assert_eq!(found.name, "libamdhip64.so.7");
    assert_eq!(
        fs_err::canonicalize(&found.path).unwrap(),
        fs_err::canonicalize(&ours).unwrap()
    );
    assert_eq!(auto_layout(&search), Layout::Kpack);

    // One that names the runtime looks for that name: the system's
    // `libamdhip64.so.5`, not ROCm 7's beside it.
    let named = build_library(&site.join("pkg/_prng.so"), &system, &[runpath]);
    let search = searcher.for_installed_library(&named).unwrap();
    let found = search.runtime.as_ref().unwrap();
    assert_eq!(found.path, system.join("libamdhip64.so.5"));
    assert_eq!(found.found_in, FoundIn::DefaultDirectory);
    assert_eq!(auto_layout(&search), Layout::Fat);

    // Without a run path, any runtime of the system.
    let bare = build_library_without_runtime(&site.join("other/_ext.so"), &[]);
    let search = searcher.for_installed_library(&bare).unwrap();
    assert_eq!(
        search.runtime.unwrap().path,
        system.join("libamdhip64.so.5")
    );
}

#[test]
fn ld_library_path_comes_before_the_runpath_and_after_an_rpath() {
    let dir = tempfile::tempdir().unwrap();
    let near = dir.path().join("near");
    build_runtime(&near, FakeRuntime::ImportsLoadCodeObject);
    let env_dir = dir.path().join("env");
    build_runtime(&env_dir, FakeRuntime::Plain);
    let roots = SearchRoots {
        ld_library_path: Some(format!("relative:{}", env_dir.display()).into()),
        ..roots(dir.path())
    };
    let searcher = Searcher::new(&roots);

    let runpath = build_library(
        &dir.path().join("a/libuser.so"),
        &near,
        &["-Wl,--enable-new-dtags,-rpath,${ORIGIN}/../near"],
    );
    let search = searcher.for_library(&runpath).unwrap().unwrap();
    let found = search.runtime.as_ref().unwrap();
    assert_eq!(found.found_in, FoundIn::LdLibraryPath);
    assert_eq!(found.path, env_dir.join("libamdhip64.so.5"));
    assert_eq!(auto_layout(&search), Layout::Fat);

    let rpath = build_library(
        &dir.path().join("b/libuser.so"),
        &near,
        &["-Wl,--disable-new-dtags,-rpath,$ORIGIN/../near"],
    );
    let search = searcher.for_library(&rpath).unwrap().unwrap();
    assert_eq!(search.runtime.as_ref().unwrap().found_in, FoundIn::Rpath);
    assert_eq!(auto_layout(&search), Layout::Kpack);
}

#[test]
fn rocm_path_and_opt_rocm_come_before_the_cache_and_the_default_directories() {
    let dir = tempfile::tempdir().unwrap();
    let rocm = dir.path().join("rocm");
    build_runtime(&rocm.join("lib"), FakeRuntime::NeedsKpackLibrary);
    let default_rocm = dir.path().join("opt-rocm");
    build_runtime(&default_rocm.join("lib"), FakeRuntime::Plain);
    let system = dir.path().join("system");
    build_runtime(&system, FakeRuntime::Plain);
    let cache = dir.path().join("ld.so.cache");
    fs_err::write(
        &cache,
        ld_cache(&[("libamdhip64.so.5", &system.join("libamdhip64.so.5"))]),
    )
    .unwrap();
    let mut roots = SearchRoots {
        rocm_path: Some(rocm.clone()),
        rocm_default: default_rocm.clone(),
        ld_cache: cache,
        default_dirs: vec![system.clone()],
        ..roots(dir.path())
    };
    let found = |roots: &SearchRoots| Searcher::new(roots).for_new_library().runtime.unwrap();
    assert_eq!(found(&roots).path, rocm.join("lib/libamdhip64.so.5"));
    assert_eq!(found(&roots).found_in, FoundIn::RocmPath);
    roots.rocm_path = None;
    assert_eq!(found(&roots).found_in, FoundIn::RocmDefault);
    roots.rocm_default = dir.path().join("nowhere");
    assert_eq!(found(&roots).found_in, FoundIn::LdCache);
    roots.ld_cache = dir.path().join("nowhere");
    assert_eq!(found(&roots).found_in, FoundIn::DefaultDirectory);
}

#[test]
fn a_malformed_runtime_is_skipped_as_the_loader_skips_it() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad");
    fs_err::create_dir_all(&bad).unwrap();
    let system = dir.path().join("system");
    let good = build_runtime(&system, FakeRuntime::HoldsSearchPathsKey);
    let bytes = fs_err::read(&good).unwrap();
    let mut roots = SearchRoots {
        ld_library_path: Some(bad.clone().into()),
        default_dirs: vec![system],
        ..roots(dir.path())
    };
    // Garbage, empty, truncated and header-only files: skipped, named in
    // the notes, and the next place is searched.
    for contents in [
        b"not a library".to_vec(),
        Vec::new(),
        bytes[..64].to_vec(),
        bytes[..bytes.len() / 2].to_vec(),
    ] {
        fs_err::write(bad.join("libamdhip64.so.5"), &contents).unwrap();
        let search = Searcher::new(&roots).for_new_library();
        assert_eq!(search.runtime.as_ref().unwrap().path, good);
        assert!(
            search.notes[0].contains(&bad.display().to_string()),
            "{:?}",
            search.notes
        );
    }
    fs_err::write(bad.join("libamdhip64.so.5"), b"not a library").unwrap();
    roots.default_dirs.clear();
    let search = Searcher::new(&roots).for_new_library();
    assert_eq!(search.runtime, None);
    assert!(
        search.notes[0].starts_with("skipped: "),
        "{:?}",
        search.notes
    );
    assert_eq!(auto_layout(&search), Layout::Fat);
}

#[test]
fn a_malformed_library_is_an_error_and_one_without_hip_needs_no_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let roots = roots(dir.path());
    let searcher = Searcher::new(&roots);
    let garbage = dir.path().join("libgarbage.so");
    fs_err::write(&garbage, b"\x7fELF\x02\x01\x01\0garbage").unwrap();
    let error = searcher.for_library(&garbage).unwrap_err().to_string();
    assert!(error.contains("libgarbage.so"), "{error}");
    let runtime = build_runtime(&dir.path().join("rt"), FakeRuntime::Plain);
    // The runtime itself needs no HIP runtime.
    assert_eq!(searcher.for_library(&runtime).unwrap(), None);
}

#[test]
fn a_malformed_cache_is_a_note_and_the_search_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let system = dir.path().join("system");
    build_runtime(&system, FakeRuntime::Plain);
    let cache = dir.path().join("ld.so.cache");
    let good = ld_cache(&[("libamdhip64.so.5", &system.join("libamdhip64.so.5"))]);
    let roots = SearchRoots {
        ld_cache: cache.clone(),
        default_dirs: vec![system],
        ..roots(dir.path())
    };
    let mut wrong_count = good.clone();
    wrong_count[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut wrong_string = good.clone();
    wrong_string[52..56].copy_from_slice(&u32::MAX.to_le_bytes());
    for bytes in [
        b"garbage".to_vec(),
        good[..30].to_vec(),
        good[..good.len() - 3].to_vec(),
        wrong_count,
        wrong_string,
    ] {
        fs_err::write(&cache, &bytes).unwrap();
        let search = Searcher::new(&roots).for_new_library();
        assert_eq!(
            search.runtime.unwrap().found_in,
            FoundIn::DefaultDirectory,
            "{:?}",
            search.notes
        );
        assert!(
            search.notes[0].contains("ld.so.cache"),
            "{:?}",
            search.notes
        );
    }
}

#[test]
fn the_cache_reader_reads_what_ldconfig_writes() {
    let dir = tempfile::tempdir().unwrap();
    let libs = dir.path().join("libs");
    build_runtime(&libs, FakeRuntime::Plain);
    let conf = dir.path().join("ld.so.conf");
    fs_err::write(&conf, format!("{}\n", libs.display())).unwrap();
    let cache = dir.path().join("ld.so.cache");
    kpack_test_support::run(
        ldconfig()
            .arg("-X")
            .arg("-C")
            .arg(&cache)
            .arg("-f")
            .arg(&conf),
    );
    let parsed = LdCache::read(&cache).unwrap();
    assert!(
        parsed
            .entries()
            .iter()
            .any(|e| e.name == "libamdhip64.so.5" && e.path == libs.join("libamdhip64.so.5")),
        "{:?}",
        parsed.entries()
    );
    // Every x86-64 entry `ldconfig -p` lists, in its order.
    let listed = kpack_test_support::run(ldconfig().arg("-p").arg("-C").arg(&cache));
    let expected: Vec<(String, PathBuf)> = listed
        .lines()
        .filter(|line| line.contains("(libc6,x86-64"))
        .filter_map(|line| {
            let (name, rest) = line.trim().split_once(' ')?;
            let (_, path) = rest.split_once(" => ")?;
            Some((name.to_owned(), PathBuf::from(path)))
        })
        .collect();
    let ours: Vec<(String, PathBuf)> = parsed
        .entries()
        .iter()
        .map(|e| (e.name.clone(), e.path.clone()))
        .collect();
    assert_eq!(ours, expected);
}

/// The test system's default library directories replaced by `dirs`.
fn system_dirs(command: &mut std::process::Command, dirs: &[&Path]) {
    command.env(
        "KPACK_GET_DEFAULT_LIBRARY_DIRS",
        std::env::join_paths(dirs).unwrap(),
    );
}

#[test]
fn detect_says_which_runtime_was_found_and_the_layout_that_follows() {
    let env = Env::new();
    let home = env.home.path().display().to_string();
    let cached = env.home.path().join("cached");
    build_runtime(&cached, FakeRuntime::ImportsLoadCodeObject);
    let cache = env.home.path().join("ld.so.cache");
    fs_err::write(
        &cache,
        ld_cache(&[("libamdhip64.so.5", &cached.join("libamdhip64.so.5"))]),
    )
    .unwrap();
    let run = |args: &[&str], ld_library_path: Option<&Path>| {
        let mut command = env.command();
        command
            .args(["--target", "gfx1030"])
            .args(args)
            .env("KPACK_GET_LD_CACHE", &cache)
            .env_remove("KPACK_GET_LAYOUT");
        if let Some(dir) = ld_library_path {
            command.env("LD_LIBRARY_PATH", dir);
        }
        transcript(&output(&mut command), &[(home.as_str(), "<HOME>")])
    };
    insta::assert_snapshot!("detect_cached_runtime", run(&["detect"], None));
    let without_kpack = env.home.path().join("without-kpack");
    build_runtime(&without_kpack, FakeRuntime::BuiltWithoutKpack);
    insta::assert_snapshot!(
        "detect_forced_kpack_on_a_runtime_without_kpack",
        run(&["--layout", "kpack", "detect"], Some(&without_kpack))
    );
    let json: serde_json::Value = serde_json::from_str(&success(
        env.command()
            .args(["--json", "--target", "gfx1030", "detect"])
            .env("KPACK_GET_LD_CACHE", &cache)
            .env_remove("KPACK_GET_LAYOUT"),
    ))
    .unwrap();
    assert_eq!(json["hip_runtime"]["found_in"], "ld-cache");
    assert_eq!(json["hip_runtime"]["kpack_aware"], true);
    assert_eq!(
        json["hip_runtime"]["evidence"],
        serde_json::json!([{ "kind": "imports-load-code-object" }])
    );
    assert_eq!(json["layout"]["layout"], "kpack");
    let mut none = env.command();
    none.env_remove("KPACK_GET_LAYOUT");
    system_dirs(&mut none, &[&env.home.path().join("empty")]);
    let json: serde_json::Value = serde_json::from_str(&success(
        none.args(["--json", "--target", "gfx1030", "detect"]),
    ))
    .unwrap();
    assert_eq!(json["hip_runtime"]["path"], serde_json::Value::Null);
    assert_eq!(json["layout"]["layout"], "fat");
}

#[test]
fn the_layout_comes_from_the_flag_the_environment_and_the_configuration_file() {
    let context = TestContext::new();
    let (env, server, repo) = (&context.env, &context.server, &context.repo);
    let system = env.home.path().join("system");
    build_runtime(&system, FakeRuntime::HoldsSearchPathsKey);
    let plan = |args: &[&str], layout_env: Option<&str>| -> serde_json::Value {
        let mut all = vec!["--target", "gfx1030", "--json"];
        all.extend_from_slice(args);
        all.extend(["install", "rocm-rand", "--dry-run"]);
        let mut command = env.with_repo(&server.url(), &repo.public_key, &all);
        system_dirs(&mut command, &[&system]);
        match layout_env {
            Some(layout) => command.env("KPACK_GET_LAYOUT", layout),
            None => command.env_remove("KPACK_GET_LAYOUT"),
        };
        serde_json::from_str(&success(&mut command)).unwrap()
    };
    let auto = plan(&[], None);
    assert_eq!(
        auto["hip_runtime"]["path"],
        system.join("libamdhip64.so.5").display().to_string()
    );
    assert_eq!(auto["layout"]["choice"], "auto");
    assert_eq!(auto["layout"]["layout"], "kpack");
    assert_eq!(plan(&["--layout", "fat"], None)["layout"]["layout"], "fat");
    assert_eq!(plan(&[], Some("fat"))["layout"]["layout"], "fat");
    let config = env.home.path().join("config.toml");
    fs_err::write(&config, "layout = \"fat\"\n").unwrap();
    let config = config.display().to_string();
    let from_file = plan(&["--config", &config], None);
    assert_eq!(from_file["layout"]["choice"], "fat");
    // The flag outweighs the file.
    let flag = plan(&["--config", &config, "--layout", "auto"], None);
    assert_eq!(flag["layout"]["layout"], "kpack");
}

/// What Debian's real HIP runtime answers each wrapper of `library`.
fn registered(library: &Path) -> Vec<(u32, bool)> {
    kpack_test_support::real_hip::registrations(library)
        .iter()
        .map(|r| (r.magic, r.handle))
        .collect()
}

const LIBRARY: &str = "lib/librocrand.so.1.1";
const GFX90A: &str = "gfx90a:sramecc+:xnack-";

/// With Debian's own HIP runtime (5.2.3, no kpack support) as the only
/// one, `auto` installs rocRAND fat: the real runtime returns a handle for
/// its wrapper, no archive is installed, and `verify` checks the file
/// written. A second GPU, the kpack layout and a remove each rewrite it.
#[test]
fn with_debians_runtime_auto_installs_rocrand_fat_and_the_real_runtime_registers_it() {
    let runtime = PathBuf::from(kpack_test_support::real_hip::RUNTIME);
    let context = TestContext::new();
    let (env, server, repo) = (&context.env, &context.server, &context.repo);
    let library = env.prefix.join(LIBRARY);
    let kpack_get = |args: &[&str]| {
        let mut all = vec!["--no-progress"];
        all.extend_from_slice(args);
        let mut command = env.with_repo(&server.url(), &repo.public_key, &all);
        command.env_remove("KPACK_GET_LAYOUT");
        system_dirs(&mut command, &[runtime.parent().unwrap()]);
        command
    };
    let installed: serde_json::Value = serde_json::from_str(&success(&mut kpack_get(&[
        "--json",
        "--target",
        "gfx1030",
        "install",
        "rocm-rand",
    ])))
    .unwrap();
    assert_eq!(
        installed["hip_runtime"]["path"],
        runtime.display().to_string()
    );
    assert_eq!(installed["hip_runtime"]["kpack_aware"], false);
    assert_eq!(installed["layout"]["layout"], "fat");
    assert_eq!(registered(&library), [(HIPF, true)]);
    assert_eq!(fat_targets(&library).unwrap(), ["gfx1030"]);
    assert!(
        !env.prefix.join(".kpack/rocrand_gfx1030.kpack").exists(),
        "the fat layout installs no archive"
    );
    insta::assert_snapshot!("list_fat", context.run(&mut kpack_get(&["list"])));
    success(&mut kpack_get(&["verify"]));

    // A second GPU: the library is written again with both.
    let two = format!("gfx1030,{GFX90A}");
    success(&mut kpack_get(&["--target", &two, "install", "rocm-rand"]));
    assert_eq!(registered(&library), [(HIPF, true)]);
    assert_eq!(
        fat_targets(&library).unwrap(),
        ["gfx1030", "gfx90a:xnack+", "gfx90a:xnack-"]
    );
    success(&mut kpack_get(&["verify"]));

    // A changed file is found by verify.
    let fat = fs_err::read(&library).unwrap();
    let mut changed = fat.clone();
    let last = changed.len() - 1;
    changed[last] ^= 1;
    fs_err::write(&library, &changed).unwrap();
    let verified = context.run(&mut kpack_get(&["verify"]));
    insta::assert_snapshot!("verify_of_a_changed_fat_file", verified);
    fs_err::write(&library, &fat).unwrap();

    // The kpack layout, asked for: split again, with its archives.
    success(&mut kpack_get(&[
        "--layout",
        "kpack",
        "--target",
        &two,
        "install",
        "rocm-rand",
    ]));
    assert_eq!(registered(&library), [(HIPK, false)]);
    assert!(fat_targets(&library).is_none());
    assert!(env.prefix.join(".kpack/rocrand_gfx1030.kpack").exists());
    success(&mut kpack_get(&["verify"]));

    // Back to auto: fat again, the archives gone.
    success(&mut kpack_get(&["--target", &two, "install", "rocm-rand"]));
    assert_eq!(registered(&library), [(HIPF, true)]);
    assert!(!env.prefix.join(".kpack/rocrand_gfx1030.kpack").exists());
    assert_eq!(
        fs_err::read(&library).unwrap(),
        fat,
        "the same inputs, the same bytes"
    );

    success(&mut kpack_get(&["remove", "rocm-rand"]));
    let left = crate::common::snapshot(&env.prefix);
    assert!(
        left.keys().all(|path| path.starts_with(".kpack")),
        "left after remove: {left:#?}"
    );
}

/// The download cache cleaned, rewriting the fat library for another GPU
/// fetches the host tree and the archives again.
#[test]
fn a_cleaned_cache_is_filled_again_to_rewrite_a_fat_library() {
    let context = TestContext::new();
    let (env, server, repo) = (&context.env, &context.server, &context.repo);
    let kpack_get = |args: &[&str]| {
        let mut all = vec!["--no-progress", "--layout", "fat"];
        all.extend_from_slice(args);
        env.with_repo(&server.url(), &repo.public_key, &all)
    };
    success(&mut kpack_get(&[
        "--target",
        "gfx1030",
        "install",
        "rocm-rand",
    ]));
    fs_err::remove_dir_all(&env.cache).unwrap();
    let out = success(&mut kpack_get(&[
        "--target",
        &format!("gfx1030,{GFX90A}"),
        "install",
        "rocm-rand",
    ]));
    assert!(out.contains("host part"), "{out}");
    let targets = fat_targets(&env.prefix.join(LIBRARY)).unwrap();
    assert!(
        targets.iter().any(|t| t.starts_with("gfx90a")),
        "{targets:?}"
    );
    success(&mut kpack_get(&["verify"]));
}

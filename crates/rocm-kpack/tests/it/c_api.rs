//! The C library as a C program sees it: the header compiles as C11 (with
//! -Wall -Werror) and C++17, the shared library exports exactly the
//! header's functions under its soname, and a C program built against it
//! exercises every function, including the loader's environment handling.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use fs_err as fs;
use rocm_kpack::Compression;

/// Where `librocm_kpack.{so,a}` are, freshly built from this source (by a
/// nested cargo: `cargo test` builds the library only as an rlib).
fn build_dir() -> PathBuf {
    kpack_test_support::hip::runtime_lib_dir()
}

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

fn test_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name)
}

fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    stdout
}

/// A directory holding the shared library under its file and soname names,
/// as an installed copy would.
struct Lib {
    dir: tempfile::TempDir,
}

impl Lib {
    fn new() -> Lib {
        let dir = tempfile::tempdir().unwrap();
        let so = build_dir().join("librocm_kpack.so");
        assert!(so.exists(), "{} not built", so.display());
        for name in ["librocm_kpack.so", "librocm_kpack.so.0"] {
            fs::os::unix::fs::symlink(&so, dir.path().join(name)).unwrap();
        }
        Lib { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Compiles and links `sources` against the shared library.
    fn compile(&self, compiler: &str, flags: &[&str], sources: &[PathBuf], out: &Path) {
        let mut command = kpack_test_support::tool(compiler);
        command
            .args(flags)
            .args(["-Wall", "-Wextra", "-Werror", "-pedantic", "-g"])
            .arg("-I")
            .arg(include_dir())
            .args(sources)
            .arg("-o")
            .arg(out)
            .arg(format!("-L{}", self.path().display()))
            .arg(format!("-Wl,-rpath,{}", self.path().display()))
            .args(["-lrocm_kpack", "-ldl"]);
        run(&mut command);
    }
}

/// The C test program, built once per test.
struct Program {
    _lib: Lib,
    _dir: tempfile::TempDir,
    exe: PathBuf,
}

impl Program {
    fn build(extra_flags: &[&str]) -> Program {
        let lib = Lib::new();
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("kpack_api_test");
        let mut flags = vec!["-std=c11"];
        flags.extend_from_slice(extra_flags);
        lib.compile("cc", &flags, &[test_source("kpack_api_test.c")], &exe);
        Program {
            _lib: lib,
            _dir: dir,
            exe,
        }
    }

    /// A command with none of the loader's variables inherited.
    fn command(&self) -> Command {
        let mut command = Command::new(&self.exe);
        for name in [
            "ROCM_KPACK_PATH",
            "ROCM_KPACK_PATH_PREFIX",
            "ROCM_KPACK_DISABLE",
            "ROCM_KPACK_DEBUG",
        ] {
            command.env_remove(name);
        }
        command
    }
}

#[test]
fn shared_library_has_the_soname_and_exports_exactly_the_header_functions() {
    let so = build_dir().join("librocm_kpack.so");
    let dynamic = run(kpack_test_support::tool("readelf").arg("-d").arg(&so));
    assert!(
        dynamic.contains("Library soname: [librocm_kpack.so.0]"),
        "{dynamic}"
    );

    let symbols = run(kpack_test_support::tool("nm")
        .args(["-D", "--defined-only"])
        .arg(&so));
    let exported: BTreeSet<&str> = symbols
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
            matches!(kind, "T" | "D" | "B" | "R" | "W").then_some(name)
        })
        .collect();

    let header = fs::read_to_string(include_dir().join("rocm_kpack/kpack.h")).unwrap();
    // Every identifier directly followed by '(' that names a kpack function.
    let declared: BTreeSet<&str> = header
        .match_indices('(')
        .filter_map(|(at, _)| {
            let before = &header[..at];
            let start = before
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            Some(&before[start..]).filter(|name| name.starts_with("kpack_"))
        })
        .collect();
    assert_eq!(declared.len(), 14, "{declared:?}");
    assert_eq!(exported, declared);
}

#[test]
fn header_compiles_as_cpp17_and_links() {
    let lib = Lib::new();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("header_test");
    lib.compile(
        "c++",
        &["-std=c++17"],
        &[test_source("header_test.cpp")],
        &exe,
    );
    let out = run(&mut Command::new(&exe));
    assert!(out.contains("14 functions"), "{out}");
}

#[test]
fn c_program_exercises_the_archive_api_on_reference_fixtures() {
    let program = Program::build(&[]);
    let out = run(program
        .command()
        .arg("archive")
        .arg(reference("test_noop.kpack"))
        .arg(reference("test_zstd.kpack")));
    assert_eq!(out, "archive ok\n");
}

#[test]
fn c_program_runs_clean_under_address_sanitizer() {
    let program = Program::build(&["-fsanitize=address", "-fno-omit-frame-pointer"]);
    let out = run(program
        .command()
        .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0")
        .arg("archive")
        .arg(reference("test_noop.kpack"))
        .arg(reference("test_zstd.kpack")));
    assert_eq!(out, "archive ok\n");
}

#[test]
fn discovers_binary_paths_through_proc_self_maps() {
    let program = Program::build(&[]);
    // A library in a directory whose name has spaces.
    let dir = tempfile::tempdir().unwrap();
    let lib_dir = dir.path().join("dir with spaces");
    fs::create_dir(&lib_dir).unwrap();
    let source = dir.path().join("probe.c");
    fs::write(&source, "int kpack_probe_symbol = 7;\n").unwrap();
    let library = lib_dir.join("libprobe one.so");
    run(kpack_test_support::tool("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source));
    let out = run(program
        .command()
        .arg("discover")
        .arg(&library)
        .arg("kpack_probe_symbol"));
    assert_eq!(out, "discover ok\n");
}

/// Archives laid out for the loader tests:
/// - `app/lib/libfake.so` is the binary; its marker points at
///   `../.kpack/test_@GFXARCH@.kpack`;
/// - `app/.kpack/test_gfx90a.kpack` has `gfx90a:xnack+` and `gfx90a:xnack-`;
///   `app/.kpack/test_gfx1100.kpack` has `gfx1100`;
/// - `bare/test_gfx90a.kpack` has plain `gfx90a`;
/// - `plus/test_gfx90a.kpack` has only `gfx90a:xnack+`;
/// - `override/all.kpack` has `gfx90a:xnack-` and `gfx1100`;
/// - `overlay/`, TheRock's torch layout: `torch_gfx90a:xnack+.kpack` holds
///   bundles 0 and 1 of ten, `torch_gfx90a:xnack-.kpack` none,
///   `torch_gfx90a.kpack` (plain `gfx90a`) all ten.
struct Layout {
    dir: tempfile::TempDir,
}

impl Layout {
    fn new() -> Layout {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for sub in [
            "app/lib",
            "app/.kpack",
            "bare",
            "plus",
            "override",
            "overlay",
        ] {
            fs::create_dir_all(root.join(sub)).unwrap();
        }
        fs::write(root.join("app/lib/libfake.so"), b"host only").unwrap();
        let archive = |path: &str, arches: &[&str], entries: &[(&str, &str, &str)]| {
            let contents: Vec<_> = entries
                .iter()
                .map(|(key, target, text)| (*key, *target, text.as_bytes().to_vec()))
                .collect();
            let bytes = write_archive(Compression::DEFAULT, arches[0], arches, &contents);
            fs::write(root.join(path), bytes).unwrap();
        };
        archive(
            "app/.kpack/test_gfx90a.kpack",
            &["gfx90a:xnack+", "gfx90a:xnack-"],
            &[
                ("lib/libfake.so#0", "gfx90a:xnack+", "app gfx90a:xnack+ #0"),
                ("lib/libfake.so#0", "gfx90a:xnack-", "app gfx90a:xnack- #0"),
                ("lib/libfake.so#1", "gfx90a:xnack-", "app gfx90a:xnack- #1"),
            ],
        );
        archive(
            "app/.kpack/test_gfx1100.kpack",
            &["gfx1100"],
            &[("lib/libfake.so#0", "gfx1100", "app gfx1100 #0")],
        );
        archive(
            "bare/test_gfx90a.kpack",
            &["gfx90a"],
            &[("lib/libfake.so#0", "gfx90a", "bare gfx90a #0")],
        );
        archive(
            "plus/test_gfx90a.kpack",
            &["gfx90a:xnack+"],
            &[("lib/libfake.so#0", "gfx90a:xnack+", "plus gfx90a:xnack+ #0")],
        );
        archive(
            "override/all.kpack",
            &["gfx90a:xnack-", "gfx1100"],
            &[
                (
                    "lib/libfake.so#0",
                    "gfx90a:xnack-",
                    "override gfx90a:xnack- #0",
                ),
                ("lib/libfake.so#0", "gfx1100", "override gfx1100 #0"),
            ],
        );
        let bundles: Vec<(String, String)> = (0..10)
            .map(|n| (format!("lib/libfake.so#{n}"), format!("#{n}")))
            .collect();
        for (name, arch, count, text) in [
            ("torch_gfx90a:xnack+", "gfx90a:xnack+", 2, "overlay"),
            ("torch_gfx90a:xnack-", "gfx90a:xnack-", 0, "empty"),
            ("torch_gfx90a", "gfx90a", 10, "full"),
        ] {
            let entries: Vec<(&str, &str, String)> = bundles[..count]
                .iter()
                .map(|(key, n)| (key.as_str(), arch, format!("{text} {arch} {n}")))
                .collect();
            let entries: Vec<_> = entries
                .iter()
                .map(|(key, arch, text)| (*key, *arch, text.as_str()))
                .collect();
            archive(&format!("overlay/{name}.kpack"), &[arch], &entries);
        }
        Layout { dir }
    }

    fn path(&self, relative: &str) -> String {
        self.dir.path().join(relative).to_str().unwrap().to_owned()
    }
}

/// Runs `load` for bundle `bundle` with `paths` in the marker.
fn load(
    program: &Program,
    layout: &Layout,
    env: &[(&str, String)],
    paths: &str,
    bundle: u32,
    arches: &[&str],
) -> String {
    let mut command = program.command();
    command
        .arg("load")
        .arg(layout.path("app/lib/libfake.so"))
        .arg("lib/libfake.so")
        .arg(bundle.to_string())
        .arg(paths)
        .args(arches);
    for (name, value) in env {
        command.env(name, value);
    }
    run(&mut command).trim_end().to_owned()
}

const MARKER_PATH: &str = "../.kpack/test_@GFXARCH@.kpack";

#[test]
fn loader_expands_gfxarch_and_falls_back_across_feature_variants() {
    let (program, layout) = (Program::build(&[]), Layout::new());
    let l = |arches: &[&str]| load(&program, &layout, &[], MARKER_PATH, 0, arches);
    assert_eq!(l(&["gfx90a:xnack-"]), "OK app gfx90a:xnack- #0");
    assert_eq!(l(&["gfx90a:xnack+"]), "OK app gfx90a:xnack+ #0");
    assert_eq!(
        l(&["amdgcn-amd-amdhsa--gfx90a:xnack-"]),
        "OK app gfx90a:xnack- #0"
    );
    assert_eq!(l(&["gfx90a:sramecc+:xnack-"]), "OK app gfx90a:xnack- #0");
    assert_eq!(l(&["gfx1100"]), "OK app gfx1100 #0");
    assert_eq!(
        load(&program, &layout, &[], MARKER_PATH, 1, &["gfx90a:xnack-"]),
        "OK app gfx90a:xnack- #1"
    );
}

#[test]
fn loader_follows_arch_priority() {
    let (program, layout) = (Program::build(&[]), Layout::new());
    let l = |arches: &[&str]| load(&program, &layout, &[], MARKER_PATH, 0, arches);
    assert_eq!(l(&["gfx1100", "gfx90a:xnack-"]), "OK app gfx1100 #0");
    assert_eq!(l(&["gfx90a:xnack-", "gfx1100"]), "OK app gfx90a:xnack- #0");
    assert_eq!(
        l(&["gfx1201", "gfx11-generic", "gfx1100"]),
        "OK app gfx1100 #0"
    );
}

#[test]
fn loader_finds_featureless_code_for_an_xnack_minus_agent() {
    let (program, layout) = (Program::build(&[]), Layout::new());
    let paths = layout.path("bare/test_@GFXARCH@.kpack");
    assert_eq!(
        load(&program, &layout, &[], &paths, 0, &["gfx90a:xnack-"]),
        "OK bare gfx90a #0"
    );
}

#[test]
fn loader_never_returns_xnack_plus_code_to_an_xnack_minus_agent() {
    let (program, layout) = (Program::build(&[]), Layout::new());
    let paths = layout.path("plus/test_@GFXARCH@.kpack");
    assert_eq!(
        load(&program, &layout, &[], &paths, 0, &["gfx90a:xnack-"]),
        "ERR 14"
    );
    assert_eq!(
        load(&program, &layout, &[], &paths, 0, &["gfx90a:xnack+"]),
        "OK plus gfx90a:xnack+ #0"
    );
}

#[test]
fn loader_falls_through_partial_and_empty_overlay_archives() {
    let (program, layout) = (Program::build(&[]), Layout::new());
    let paths = layout.path("overlay/torch_@GFXARCH@.kpack");
    let l = |bundle: u32, arch: &str| load(&program, &layout, &[], &paths, bundle, &[arch]);
    for bundle in 0..10 {
        let from = if bundle < 2 {
            "overlay gfx90a:xnack+"
        } else {
            "full gfx90a"
        };
        assert_eq!(
            l(bundle, "gfx90a:sramecc+:xnack+"),
            format!("OK {from} #{bundle}")
        );
        assert_eq!(
            l(bundle, "gfx90a:sramecc+:xnack-"),
            format!("OK full gfx90a #{bundle}")
        );
    }
    assert_eq!(
        load(&program, &layout, &[], &paths, 10, &["gfx90a:xnack+"]),
        "ERR 5"
    );
}

#[test]
fn loader_reports_archive_and_arch_not_found() {
    let (program, layout) = (Program::build(&[]), Layout::new());
    assert_eq!(
        load(
            &program,
            &layout,
            &[],
            "../.kpack/none_@GFXARCH@.kpack,/nowhere/x.kpack",
            0,
            &["gfx90a:xnack-"]
        ),
        "ERR 13"
    );
    // No gfx1030 archive, but the package's archives for other GPUs sit
    // beside where it would be: the GPU is not supported, not the package
    // missing.
    assert_eq!(
        load(&program, &layout, &[], MARKER_PATH, 0, &["gfx1030"]),
        "ERR 14"
    );
    // gfx90a's archive exists and opens, but serves no gfx1030.
    let both = format!("{MARKER_PATH},../.kpack/test_gfx90a.kpack");
    assert_eq!(
        load(&program, &layout, &[], &both, 0, &["gfx1030"]),
        "ERR 14"
    );
    // The archive matched the target but has no bundle 7.
    assert_eq!(
        load(&program, &layout, &[], MARKER_PATH, 7, &["gfx90a:xnack-"]),
        "ERR 5"
    );
}

#[test]
fn rocm_kpack_path_replaces_the_search_list_literally() {
    let (program, layout) = (Program::build(&[]), Layout::new());
    let env = [(
        "ROCM_KPACK_PATH",
        format!(":{}:", layout.path("override/all.kpack")),
    )];
    assert_eq!(
        load(&program, &layout, &env, MARKER_PATH, 0, &["gfx90a:xnack-"]),
        "OK override gfx90a:xnack- #0"
    );
    // No @GFXARCH@ expansion in ROCM_KPACK_PATH.
    let env = [(
        "ROCM_KPACK_PATH",
        layout.path("app/.kpack/test_@GFXARCH@.kpack"),
    )];
    assert_eq!(
        load(&program, &layout, &env, MARKER_PATH, 0, &["gfx90a:xnack-"]),
        "ERR 13"
    );
    // An empty value is as if unset.
    let env = [("ROCM_KPACK_PATH", String::new())];
    assert_eq!(
        load(&program, &layout, &env, MARKER_PATH, 0, &["gfx90a:xnack-"]),
        "OK app gfx90a:xnack- #0"
    );
}

#[test]
fn rocm_kpack_path_prefix_is_searched_first_unless_path_is_set() {
    let (program, layout) = (Program::build(&[]), Layout::new());
    let prefix = ("ROCM_KPACK_PATH_PREFIX", layout.path("override/all.kpack"));
    assert_eq!(
        load(
            &program,
            &layout,
            std::slice::from_ref(&prefix),
            MARKER_PATH,
            0,
            &["gfx90a:xnack-"]
        ),
        "OK override gfx90a:xnack- #0"
    );
    // The prefix archive lacks xnack+, so the marker's archive serves it.
    assert_eq!(
        load(
            &program,
            &layout,
            std::slice::from_ref(&prefix),
            MARKER_PATH,
            0,
            &["gfx90a:xnack+"]
        ),
        "OK app gfx90a:xnack+ #0"
    );
    let path = ("ROCM_KPACK_PATH", layout.path("bare/test_gfx90a.kpack"));
    assert_eq!(
        load(
            &program,
            &layout,
            &[prefix, path],
            MARKER_PATH,
            0,
            &["gfx90a:xnack-"]
        ),
        "OK bare gfx90a #0"
    );
}

#[test]
fn rocm_kpack_disable_turns_loading_off() {
    let (program, layout) = (Program::build(&[]), Layout::new());
    for (value, expected) in [
        ("1", "ERR 8"),
        ("yes", "ERR 8"),
        ("0", "OK app gfx1100 #0"),
        ("", "OK app gfx1100 #0"),
    ] {
        let env = [("ROCM_KPACK_DISABLE", value.to_owned())];
        assert_eq!(
            load(&program, &layout, &env, MARKER_PATH, 0, &["gfx1100"]),
            expected,
            "{value:?}"
        );
    }
}

#[test]
fn rocm_kpack_debug_tells_which_paths_were_tried() {
    let (program, layout) = (Program::build(&[]), Layout::new());
    let output = program
        .command()
        .env("ROCM_KPACK_DEBUG", "1")
        .arg("load")
        .arg(layout.path("app/lib/libfake.so"))
        .arg("lib/libfake.so")
        .arg("0")
        .arg(MARKER_PATH)
        .arg("gfx90a:xnack-")
        .output()
        .unwrap();
    let root = layout.path("");
    let transcript = kpack_test_support::transcript(&output, &[(root.as_str(), "<DIR>/")]);
    insta::assert_snapshot!(transcript);
    // Silent without the variable.
    let quiet = program
        .command()
        .arg("load")
        .arg(layout.path("app/lib/libfake.so"))
        .args(["lib/libfake.so", "0", MARKER_PATH, "gfx90a:xnack-"])
        .output()
        .unwrap();
    assert!(quiet.stderr.is_empty());
}

#[test]
fn loader_rejects_invalid_markers_with_invalid_metadata() {
    let (program, layout) = (Program::build(&[]), Layout::new());
    let raw = |hex: &str| {
        run(program
            .command()
            .arg("load-raw")
            .arg(layout.path("app/lib/libfake.so"))
            .arg("0")
            .arg(hex)
            .arg("gfx1100"))
        .trim_end()
        .to_owned()
    };
    // An array, a map without paths, a truncated map, a reserved byte.
    for hex in ["9100", "81ab6b65726e656c5f6e616d65a178", "82b2", "c1"] {
        assert_eq!(raw(hex), "ERR 12", "{hex}");
    }
}

/// `install.sh` lays out the libraries, header and pkg-config file; a C
/// program builds with `pkg-config` flags alone, linked both dynamically
/// and statically.
#[test]
fn installed_library_builds_with_pkg_config_shared_and_static() {
    let prefix = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh");
    run(Command::new("bash")
        .arg(&script)
        .arg(prefix.path())
        .arg(build_dir()));
    let lib = prefix.path().join("lib");
    assert!(lib.join("librocm_kpack.so.0").exists());
    assert!(lib.join("librocm_kpack.a").exists());

    let pkg_config = |args: &[&str]| -> Vec<String> {
        let out = run(kpack_test_support::tool("pkg-config")
            .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
            .args(args)
            .arg("rocm_kpack"));
        out.split_whitespace().map(str::to_owned).collect()
    };
    let cflags = pkg_config(&["--cflags"]);
    let libs = pkg_config(&["--libs"]);
    let static_libs = pkg_config(&["--libs", "--static"]);
    let fixtures = |command: &mut Command| {
        command
            .arg("archive")
            .arg(reference("test_noop.kpack"))
            .arg(reference("test_zstd.kpack"));
    };

    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    run(kpack_test_support::tool("cc")
        .args(["-std=c11", "-Wall", "-Werror"])
        .args(&cflags)
        .arg(test_source("kpack_api_test.c"))
        .arg("-o")
        .arg(&shared)
        .args(&libs)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-ldl"));
    let mut command = Command::new(&shared);
    fixtures(&mut command);
    assert_eq!(run(&mut command), "archive ok\n");

    let fully_static = dir.path().join("static");
    let rest: Vec<&String> = static_libs
        .iter()
        .filter(|a| *a != "-lrocm_kpack")
        .collect();
    run(kpack_test_support::tool("cc")
        .args(["-std=c11", "-Wall", "-Werror"])
        .args(&cflags)
        .arg(test_source("kpack_api_test.c"))
        .arg("-o")
        .arg(&fully_static)
        .arg(lib.join("librocm_kpack.a"))
        .args(rest));
    let needed = run(kpack_test_support::tool("readelf")
        .arg("-d")
        .arg(&fully_static));
    assert!(!needed.contains("librocm_kpack"), "{needed}");
    let mut command = Command::new(&fully_static);
    fixtures(&mut command);
    assert_eq!(run(&mut command), "archive ok\n");
}

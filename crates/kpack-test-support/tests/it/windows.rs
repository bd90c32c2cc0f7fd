//! The Windows harness itself: wine runs the host program, which loads a
//! DLL away from its preferred base and says clearly when it cannot.

use kpack_test_support::run;
use kpack_test_support::windows::{self, load_dll_command, Image};

/// Builds `name.dll` exporting `name_value` in `dir`, importing from
/// `imports` (DLL paths) when given.
fn dll(
    dir: &std::path::Path,
    name: &str,
    body: &str,
    imports: &[&std::path::Path],
) -> std::path::PathBuf {
    let source = dir.join(format!("{name}.c"));
    fs_err::write(&source, body).unwrap();
    let dll = dir.join(format!("{name}.dll"));
    run(windows::mingw_cc()
        .args(["-shared", "-Wall", "-Werror", "-o"])
        .arg(&dll)
        .arg(&source)
        .args(imports));
    dll
}

#[test]
fn the_host_loads_a_dll_away_from_its_preferred_base() {
    let dir = tempfile::tempdir().unwrap();
    let dll = dll(dir.path(), "plain", "int plain_value = 7;\n", &[]);
    let preferred = Image::read(&dll).image_base;
    let out = run(&mut load_dll_command(dir.path(), &dll));
    let loaded = out
        .trim()
        .strip_prefix("loaded at 0x")
        .and_then(|rest| rest.split_once(' '))
        .map(|(address, _)| u64::from_str_radix(address, 16).unwrap())
        .unwrap_or_else(|| panic!("{out}"));
    assert_ne!(loaded, preferred, "{out}");
    assert!(
        out.contains(&format!("(preferred {preferred:#x})")),
        "{out}"
    );
}

#[test]
fn the_host_says_why_a_dll_does_not_load() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    // Imports from a DLL that is not beside the program.
    let missing = dll(
        elsewhere.path(),
        "kpack_missing",
        "int missing_value(void) { return 1; }\n",
        &[],
    );
    let dll = dll(
        dir.path(),
        "needy",
        "__declspec(dllimport) int missing_value(void);\nint needy_value(void) { return missing_value(); }\n",
        &[&missing],
    );
    let output = load_dll_command(dir.path(), &dll).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("LoadLibraryW"), "{stderr}");
    // wine names the DLL it could not find (WINEDEBUG keeps err+module).
    assert!(stderr.contains("kpack_missing.dll"), "{stderr}");
}

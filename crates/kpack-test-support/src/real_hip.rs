//! Debian 12's own HIP runtime (`libamdhip64-5`, 5.2.3), which has no kpack
//! support: what it answers when a library registers its device code.
//!
//! An interposer (`c/hip_register_probe.c`, loaded with `LD_PRELOAD`)
//! forwards `__hipRegisterFatBinary` to the real one and records each
//! wrapper's magic and whether a handle came back. No GPU and no
//! environment is needed: without `/dev/kfd` and with no `HIP_*` variable
//! set, 5.2.3 returns a handle for a `HIPF` wrapper and null for a `HIPK`
//! one (its check is on the wrapper; code objects are chosen later, at the
//! first launch).

use std::path::{Path, PathBuf};
use std::process::Command;

use fs_err as fs;

use crate::tools::{MissingTool, Origin};

/// The real runtime, as Debian 12 installs it.
pub const RUNTIME: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

/// A fat binary's wrapper magic, `HIPF` (CLR's `__hipFatMAGIC2`).
pub const HIPF: u32 = 0x4849_5046;
/// A split binary's wrapper magic, `HIPK`.
pub const HIPK: u32 = 0x4B50_4948;

/// One call of `__hipRegisterFatBinary`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    /// The wrapper's magic.
    pub magic: u32,
    /// Whether the runtime returned a non-null handle.
    pub handle: bool,
}

/// The real runtime's path; a missing runtime fails the test, naming its
/// package and the set-up command.
pub fn runtime() -> PathBuf {
    let path = PathBuf::from(RUNTIME);
    if !path.is_file() {
        panic!("{}", missing_runtime());
    }
    path
}

fn missing_runtime() -> MissingTool {
    MissingTool {
        program: RUNTIME.to_owned(),
        origin: Origin::of(RUNTIME),
        searched: vec![PathBuf::from(RUNTIME)],
    }
}

/// Builds the interposer into `dir`, linked to the real runtime so that
/// preloading it loads the runtime right after it.
pub fn build_probe(dir: &Path) -> PathBuf {
    let runtime = runtime();
    let version_script = dir.join("probe.map");
    fs::write(
        &version_script,
        "hip_4.2 { global: __hipRegisterFatBinary; local: *; };\n",
    )
    .unwrap();
    let probe = dir.join("hip_register_probe.so");
    crate::run(
        crate::tool("cc")
            .args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
            .arg(&probe)
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("c/hip_register_probe.c"))
            .arg(format!("-Wl,--version-script={}", version_script.display()))
            .arg("-Wl,--no-as-needed")
            .arg(runtime)
            .arg("-ldl"),
    );
    probe
}

/// Loads `library` (with `dlopen`) on the real runtime; returns its
/// registrations in call order. Fails the test if the program fails or a
/// registration was answered by another runtime.
pub fn registrations(library: &Path) -> Vec<Registration> {
    let dir = tempfile::tempdir().unwrap();
    let probe = build_probe(dir.path());
    let dlopen = crate::hip::build_dlopen(dir.path());
    let out = dir.path().join("registrations");
    crate::run(
        Command::new(dlopen)
            .arg(library)
            .env("LD_PRELOAD", &probe)
            .env("KPACK_HIP_PROBE_OUT", &out)
            .env_remove("LD_LIBRARY_PATH"),
    );
    let text = fs::read_to_string(&out).unwrap_or_default();
    text.lines().map(parse_line).collect()
}

/// One line of the interposer's record: `magic handle runtime`.
fn parse_line(line: &str) -> Registration {
    let mut words = line.splitn(3, ' ');
    let (Some(magic), Some(handle), Some(file)) = (words.next(), words.next(), words.next()) else {
        panic!("malformed registration record {line:?}");
    };
    let answered_by = fs::canonicalize(file).unwrap();
    assert_eq!(
        answered_by,
        fs::canonicalize(runtime()).unwrap(),
        "a registration was answered by {file}, not the real runtime"
    );
    Registration {
        magic: u32::from_str_radix(magic, 16).unwrap(),
        handle: handle == "1",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_runtime_names_its_package_and_the_setup_command() {
        let message = missing_runtime().to_string();
        assert!(
            message.contains(&format!(
                "this test needs `{RUNTIME}` (Debian package `libamdhip64-5`)"
            )),
            "{message}"
        );
        assert!(message.contains("./test.sh"), "{message}");
    }

    #[test]
    fn records_parse_into_magic_and_handle() {
        let line = format!("4b504948 0 {RUNTIME}");
        assert_eq!(
            parse_line(&line),
            Registration {
                magic: HIPK,
                handle: false
            }
        );
    }
}

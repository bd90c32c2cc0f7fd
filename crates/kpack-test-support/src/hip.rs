//! The stand-in HIP runtime (`c/hip_standin.c`): a `libamdhip64.so.5`
//! that registers binaries and writes each code object it chooses to a
//! directory, so tests check what a real HIP runtime would load, without a
//! GPU. A split binary's code object comes through the runtime's C
//! library; a fat binary's from the offload bundle its wrapper points at.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use fs_err as fs;
use object::read::elf::ElfFile64;
use object::{Endianness, Object, ObjectSymbol};

use crate::run;

/// `librocm_kpack.so`, built from this checkout by a nested cargo with its
/// own target directory (the outer cargo holds the main one's lock).
pub fn runtime_lib_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let target_dir = crate::target_dir().join("capi");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        run(Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "rocm-kpack",
                "--lib",
                "--target-dir",
            ])
            .arg(&target_dir)
            .current_dir(crate::workspace()));
        let dir = target_dir.join("debug");
        let soname = dir.join("librocm_kpack.so.0");
        if !soname.exists() {
            fs::os::unix::fs::symlink("librocm_kpack.so", &soname).unwrap();
        }
        dir
    })
    .clone()
}

pub fn runtime_include_dir() -> PathBuf {
    crate::workspace().join("crates/rocm-kpack/include")
}

/// The `hip*`/`__hip*` functions `library` imports, with their versions.
pub fn hip_imports(library: &Path) -> BTreeSet<(String, Option<String>)> {
    let data = fs::read(library).unwrap();
    let file = ElfFile64::<Endianness>::parse(&*data).unwrap();
    let endian = file.endian();
    let versions = file.elf_section_table().versions(endian, &*data).unwrap();
    file.dynamic_symbols()
        .filter(|symbol| symbol.is_undefined())
        .filter_map(|symbol| {
            let name = symbol.name().ok()?.to_owned();
            if !(name.starts_with("hip") || name.starts_with("__hip")) {
                return None;
            }
            let version = versions.as_ref().and_then(|table| {
                let index = table.version_index(endian, symbol.index()).index();
                table
                    .version(index)
                    .ok()
                    .flatten()
                    .map(|v| String::from_utf8_lossy(v.name()).into_owned())
            });
            Some((name, version))
        })
        .collect()
}

/// Builds the stand-in `libamdhip64.so.5` exporting `imports` into `dir`.
pub fn build_standin(dir: &Path, imports: &BTreeSet<(String, Option<String>)>) -> PathBuf {
    let handwritten = ["__hipRegisterFatBinary", "__hipUnregisterFatBinary"];
    let mut stubs = String::from("/* Generated no-op stubs. */\n");
    for (name, _) in imports {
        if !handwritten.contains(&name.as_str()) {
            stubs.push_str(&format!("int {name}(void) {{ return 0; }}\n"));
        }
    }
    let stub_source = dir.join("stubs.c");
    fs::write(&stub_source, stubs).unwrap();
    let versions: BTreeSet<&str> = imports.iter().filter_map(|(_, v)| v.as_deref()).collect();
    let mut script = String::new();
    for version in &versions {
        script.push_str(&format!("{version} {{ global: *; }};\n"));
    }
    if versions.is_empty() {
        script.push_str("{ global: *; };\n");
    }
    let version_script = dir.join("hip.map");
    fs::write(&version_script, script).unwrap();
    let library = dir.join("libamdhip64.so.5");
    let runtime = runtime_lib_dir();
    run(crate::tool("cc")
        .args([
            "-shared",
            "-fPIC",
            "-Wall",
            "-Werror",
            "-DSTANDIN_CCOB",
            "-o",
        ])
        .arg(&library)
        .arg("-Wl,-soname,libamdhip64.so.5")
        .arg(format!("-Wl,--version-script={}", version_script.display()))
        .arg("-I")
        .arg(runtime_include_dir())
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("c/hip_standin.c"))
        .arg(&stub_source)
        .arg(format!("-L{}", runtime.display()))
        .arg(format!("-Wl,-rpath,{}", runtime.display()))
        .arg("-lrocm_kpack")
        .arg("-lzstd"));
    library
}

/// Builds into `dir` (made if needed) the stand-in HIP runtime exporting
/// what `library` imports, and the program that dlopens it; returns the
/// program (run it with [`run_with_standin`] and `dir`).
pub fn standin_for(dir: &Path, library: &Path) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let standin = build_standin(dir, &hip_imports(library));
    // A library built against another runtime version (jax's plugins need
    // libamdhip64.so.7) finds the stand-in under that name.
    for needed in hip_needed(library) {
        let link = dir.join(&needed);
        if !link.exists() {
            fs::os::unix::fs::symlink(standin.file_name().unwrap(), link).unwrap();
        }
    }
    build_dlopen(dir)
}

/// The `libamdhip64.so*` names in `library`'s `DT_NEEDED` entries.
fn hip_needed(library: &Path) -> Vec<String> {
    use object::read::elf::FileHeader;
    let data = fs::read(library).unwrap();
    let header = object::elf::FileHeader64::<Endianness>::parse(&*data).unwrap();
    let endian = header.endian().unwrap();
    let sections = header.sections(endian, &*data).unwrap();
    let table = sections.dynamic_table(endian, &*data).unwrap();
    table
        .iter()
        .filter(|entry| entry.tag == object::elf::DT_NEEDED)
        .filter_map(|entry| table.string(entry).ok())
        .map(|name| String::from_utf8_lossy(name).into_owned())
        .filter(|name| name.starts_with("libamdhip64.so"))
        .collect()
}

/// A program that dlopens its argument and reports dlerror.
pub fn build_dlopen(dir: &Path) -> PathBuf {
    let source = dir.join("dlopen.c");
    fs::write(
        &source,
        "#include <dlfcn.h>\n#include <stdio.h>\nint main(int argc, char** argv) {\n  void* h = argc > 1 ? dlopen(argv[1], RTLD_NOW) : 0;\n  if (!h) { fprintf(stderr, \"%s\\n\", dlerror()); return 1; }\n  return 0;\n}\n",
    )
    .unwrap();
    let exe = dir.join("dlopen");
    run(crate::tool("cc")
        .arg("-o")
        .arg(&exe)
        .arg(&source)
        .arg("-ldl"));
    exe
}

/// Results of the stand-in's registrations, in order: `Ok(code object)` or
/// `Err(error number)`.
pub fn registrations(out: &Path) -> Vec<Result<Vec<u8>, i32>> {
    (0..)
        .map_while(|n| {
            if let Ok(bytes) = fs::read(out.join(format!("{n}.co"))) {
                Some(Ok(bytes))
            } else {
                fs::read_to_string(out.join(format!("{n}.err")))
                    .ok()
                    .map(|text| Err(text.trim().parse().unwrap()))
            }
        })
        .collect()
}

/// Runs `command` (a program using the stand-in HIP runtime: an executable,
/// or the dlopen tool on a library) with the stand-in in `standin_dir` and
/// agent targets `arches`, none of the loader's variables inherited;
/// returns the registration results.
pub fn run_with_standin(
    mut command: Command,
    standin_dir: &Path,
    arches: &str,
) -> Vec<Result<Vec<u8>, i32>> {
    let out = tempfile::tempdir().unwrap();
    let result = command
        .env("LD_LIBRARY_PATH", standin_dir)
        .env("KPACK_STANDIN_ARCHES", arches)
        .env("KPACK_STANDIN_OUT", out.path())
        .env_remove("ROCM_KPACK_PATH")
        .env_remove("ROCM_KPACK_PATH_PREFIX")
        .env_remove("ROCM_KPACK_DISABLE")
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    registrations(out.path())
}

/// A command that dlopens `library` with the tool from [`build_dlopen`].
pub fn dlopen_command(dlopen: &Path, library: &Path) -> Command {
    let mut command = Command::new(dlopen);
    command.arg(library);
    command
}

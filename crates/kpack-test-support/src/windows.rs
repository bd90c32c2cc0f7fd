//! Windows binaries, built and run on Linux: the one place tests get the
//! compiler, the PE loader and the Windows programs they need from.
//!
//! - [`mingw_cc`] (`x86_64-w64-mingw32-gcc`) builds DLLs and programs;
//!   [`FatDll`] builds a DLL as HIP code is compiled for Windows (bundles
//!   in `.hip_fat`, wrappers in `.hipFatB`, a constructor registering
//!   them), the PE twin of [`crate::fat::FatLibrary`].
//! - [`wine`] runs them: wine 8.0 (`/usr/lib/wine/wine64`) is a real PE
//!   loader, which applies base relocations and searches the application's
//!   directory for DLLs first, so a test puts a program and the DLLs it
//!   loads in one directory. [`host_exe`] loads a DLL away from its
//!   preferred base, so the relocations must be right.
//! - [`runtime_dll`] is `rocm_kpack.dll` built from this checkout for
//!   [`RUST_TARGET`]; [`standin_dll`] is the stand-in HIP runtime
//!   (`c/hip_standin.c`, as on Linux) built as `amdhip64_7.dll` against
//!   it, recording what each registration would load ([`Registration`]).
//! - [`prng_shim_dll`] is what any Rust-built DLL needs beside it under
//!   wine 8.0 (see `c/prng_shim.c`).
//! - [`Image::read`] reads an image's headers, sections and base
//!   relocations with `llvm-readobj-15`, a reader independent of ours.
//!
//! A missing tool or Rust target fails the test, naming what to install.
//! The C programs and DLLs are built once for all test processes, in a
//! directory named for a hash of their inputs under the target directory;
//! the wine prefix too is made once there (it takes seconds and 700 MB).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use fs_err as fs;
use sha2::{Digest, Sha256};

use crate::{run, tool, tool_path};

/// The cross compiler, from Debian's `gcc-mingw-w64-x86-64`.
pub const MINGW_CC: &str = "x86_64-w64-mingw32-gcc";
/// The PE loader, from Debian's `wine64` (8.0 in Debian 12).
pub const WINE: &str = "/usr/lib/wine/wine64";
/// The server every wine process of a prefix talks to (`libwine`).
pub const WINESERVER: &str = "/usr/lib/wine/wineserver";
/// An independent reader of PE images, from Debian's `llvm-15`.
pub const READOBJ: &str = "llvm-readobj-15";
/// The Rust target the runtime DLL is built for.
pub const RUST_TARGET: &str = "x86_64-pc-windows-gnu";
/// The runtime's DLL.
pub const RUNTIME_DLL: &str = "rocm_kpack.dll";
/// The HIP runtime's DLL on Windows (ROCm 7), as HIP DLLs import it.
pub const STANDIN_DLL: &str = "amdhip64_7.dll";
/// The DLL Rust's standard library imports `ProcessPrng` from.
pub const PRNG_SHIM_DLL: &str = "bcryptprimitives.dll";
/// The program that loads a DLL away from its preferred base.
pub const HOST_EXE: &str = "load_dll.exe";

/// The section of the offload bundles in a PE image (8 bytes, the most a
/// section name in an image's section table holds).
pub const FAT_SECTION: &str = ".hip_fat";
/// The section of the 24-byte wrappers in a PE image.
pub const WRAPPER_SECTION: &str = ".hipFatB";
/// Where clang puts each bundle in `.hip_fat`: a multiple of this.
pub const BUNDLE_ALIGN: usize = 4096;

/// `x86_64-w64-mingw32-gcc`, found as [`tool`] finds programs.
pub fn mingw_cc() -> Command {
    tool(MINGW_CC)
}

/// `llvm-readobj-15`.
pub fn readobj() -> Command {
    tool(READOBJ)
}

/// A command running `wine64` in the tests' wine prefix (made on first
/// use), with no display, wine's own messages off except for modules that
/// fail to load (which name the missing DLL), and the DLL overrides the
/// tests rely on: no Mono or Gecko installer (`mscoree,mshtml=`), and the
/// [`prng_shim_dll`] beside a program before any `bcryptprimitives.dll` of
/// wine's (`n,b`). Its working directory is the prefix's parent: wine
/// cannot start in a directory whose Windows path is longer than 260
/// characters. Add the program (a path wine maps through `Z:`) and its
/// arguments.
pub fn wine() -> Command {
    let prefix = prefix();
    let mut command = wine_in(prefix);
    command.current_dir(prefix.parent().unwrap_or(prefix));
    command
}

/// `wine64` in `prefix`, with the tests' settings.
fn wine_in(prefix: &Path) -> Command {
    let mut command = Command::new(tool_path(WINE));
    command
        .env("WINEPREFIX", prefix)
        .env("WINEDEBUG", "-all,err+module")
        .env("WINEDLLOVERRIDES", "mscoree,mshtml=;bcryptprimitives=n,b")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY");
    command
}

/// The tests' wine prefix, `wine-prefix` in the target directory: made
/// once (about ten seconds) under a file lock, so concurrent test
/// processes wait for the first instead of making half a prefix each.
///
/// Each test process then makes sure a wineserver runs for it that stays
/// 30 seconds after its last client, and starts wine's services once with
/// no output attached. Otherwise the first program run after the server
/// stops would start them with its own stdout and stderr, which they keep
/// open for seconds after it exits: `Command::output` would wait for them.
pub fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let target = crate::target_dir();
        let prefix = target.join("wine-prefix");
        let lock = fs::File::create(target.join("wine-prefix.lock")).unwrap();
        lock.lock().unwrap();
        let ready = prefix.join(".kpack-ready");
        if !ready.exists() {
            // A prefix left half made by a process that was killed.
            if prefix.exists() {
                fs::remove_dir_all(&prefix).unwrap();
            }
            quiet(wine_in(&prefix).args(["wineboot", "--init"]));
            quiet(wineserver(&prefix).arg("-w"));
            fs::write(&ready, "made by kpack-test-support's windows::prefix\n").unwrap();
        }
        // Fails (already running) when another process started it.
        let _ = wineserver(&prefix)
            .arg("-p30")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        quiet(wine_in(&prefix).args(["cmd", "/c", "exit"]));
        drop(lock);
        prefix
    })
}

fn wineserver(prefix: &Path) -> Command {
    let mut command = Command::new(tool_path(WINESERVER));
    command.env("WINEPREFIX", prefix);
    command
}

/// Runs `command` with no terminal or pipe attached (what it starts in
/// the background keeps nothing of the test's open), failing the test if
/// it fails.
fn quiet(command: &mut Command) {
    let status = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(status.success(), "{command:?} failed ({status})");
}

/// `path` as a Windows program under wine sees it: `Z:` (the Linux root)
/// followed by the path with `\` separators.
pub fn windows_path(path: &Path) -> String {
    let path = std::path::absolute(path).unwrap();
    format!("Z:{}", path.display()).replace('/', "\\")
}

/// Copies `built` into `dir` (made if needed) under its own name; the copy.
fn place(built: &Path, dir: &Path) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let copy = dir.join(built.file_name().unwrap());
    fs::copy(built, &copy).unwrap();
    copy
}

/// A C source of this crate's `c/` directory.
fn c_source(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("c")
        .join(name)
}

/// `file`, built by `build` (which writes it into the directory it is
/// given) once for all test processes: in a directory under the target
/// directory named for a hash of `inputs`, made under a temporary name and
/// renamed into place, so no process sees half a build.
fn built_once(file: &str, inputs: &[&[u8]], build: impl FnOnce(&Path)) -> PathBuf {
    let mut hash = Sha256::new();
    for input in inputs {
        hash.update((input.len() as u64).to_le_bytes());
        hash.update(input);
    }
    let key: String = hash.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let root = crate::target_dir().join("windows-test-support");
    let dir = root.join(format!("{file}-{key}"));
    let path = dir.join(file);
    if path.is_file() {
        return path;
    }
    fs::create_dir_all(&root).unwrap();
    let staging = tempfile::tempdir_in(&root).unwrap();
    build(staging.path());
    assert!(
        staging.path().join(file).is_file(),
        "building {file} made no {file}"
    );
    // Another process may have won the race: its build is as good.
    if let Err(error) = fs::rename(staging.path(), &dir) {
        assert!(path.is_file(), "{error}");
    }
    path
}

/// Builds the C file `source` into `file` with mingw and `flags` (after
/// the sources: libraries), once for all processes; `inputs` are what
/// else the result depends on (headers).
fn mingw_built(file: &str, source: &Path, flags: &[&str], inputs: &[&[u8]]) -> PathBuf {
    let text = fs::read(source).unwrap();
    let mut all: Vec<&[u8]> = vec![file.as_bytes(), &text];
    all.extend(flags.iter().map(|flag| flag.as_bytes()));
    all.extend_from_slice(inputs);
    built_once(file, &all, |dir| {
        run(mingw_cc()
            .args(["-Wall", "-Wextra", "-Werror", "-O2", "-s", "-o"])
            .arg(dir.join(file))
            .arg(source)
            .args(flags));
    })
}

/// Puts the `ProcessPrng` shim `bcryptprimitives.dll` (`c/prng_shim.c`)
/// into `dir`, beside the programs that load Rust-built DLLs: wine 8.0 has
/// none, and Rust's std imports it. Wine searches the application's
/// directory first; [`wine`]'s `bcryptprimitives=n,b` makes sure the shim
/// wins over a builtin one. Returns its path.
pub fn prng_shim_dll(dir: &Path) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        mingw_built(
            PRNG_SHIM_DLL,
            &c_source("prng_shim.c"),
            &["-shared", "-ladvapi32"],
            &[],
        )
    });
    place(built, dir)
}

/// `rocm_kpack.dll`, built from this checkout for [`RUST_TARGET`] once per
/// process by a nested cargo with its own target directory (`capi-windows`
/// in the target directory; the outer cargo holds the main one's lock).
/// Its import library `librocm_kpack.dll.a` is beside it.
pub fn runtime_dll() -> PathBuf {
    static DLL: OnceLock<PathBuf> = OnceLock::new();
    DLL.get_or_init(|| {
        require_rust_target();
        tool_path(MINGW_CC);
        let target_dir = crate::target_dir().join("capi-windows");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        run(Command::new(cargo)
            .args(["build", "--quiet", "-p", "rocm-kpack", "--lib"])
            .args(["--target", RUST_TARGET, "--target-dir"])
            .arg(&target_dir)
            .current_dir(crate::workspace()));
        target_dir.join(RUST_TARGET).join("debug").join(RUNTIME_DLL)
    })
    .clone()
}

/// Fails the test unless Rust's standard library for [`RUST_TARGET`] is
/// installed.
fn require_rust_target() {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let libdir =
        run(Command::new(rustc).args(["--print", "target-libdir", "--target", RUST_TARGET]));
    assert!(
        Path::new(libdir.trim()).is_dir(),
        "this test needs Rust's standard library for {RUST_TARGET}, which is not installed \
         (no {}): run `{}`, which adds it with `rustup target add {RUST_TARGET}`",
        libdir.trim(),
        crate::SETUP_COMMAND
    );
}

/// The stand-in HIP runtime (`c/hip_standin.c`) built as `amdhip64_7.dll`
/// against [`runtime_dll`], once for all processes.
fn standin_built() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let runtime = runtime_dll();
        let include = crate::hip::runtime_include_dir();
        let header = fs::read(include.join("rocm_kpack/kpack.h")).unwrap();
        let include_flag = format!("-I{}", include.display());
        let runtime_dir = format!("-L{}", runtime.parent().unwrap().display());
        mingw_built(
            STANDIN_DLL,
            &c_source("hip_standin.c"),
            &["-shared", &include_flag, &runtime_dir, "-lrocm_kpack"],
            &[&header],
        )
    })
}

/// Puts the stand-in HIP runtime `amdhip64_7.dll` into `dir` with what it
/// loads: `rocm_kpack.dll` ([`runtime_dll`]) and the [`prng_shim_dll`].
/// Each `__hipRegisterFatBinary` call writes what it would load into
/// `$KPACK_STANDIN_OUT` (read back by [`registrations`]). Returns its path.
pub fn standin_dll(dir: &Path) -> PathBuf {
    let standin = place(standin_built(), dir);
    place(&runtime_dll(), dir);
    prng_shim_dll(dir);
    standin
}

/// Puts `load_dll.exe` (`c/load_dll.c`) into `dir`: `load_dll.exe DLL`
/// reserves the DLL's preferred address range and loads it, failing
/// (exit code and message) if it cannot or if it lands at its preferred
/// base anyway. Returns its path.
pub fn host_exe(dir: &Path) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let built =
        BUILT.get_or_init(|| mingw_built(HOST_EXE, &c_source("load_dll.c"), &["-municode"], &[]));
    place(built, dir)
}

/// A command running [`host_exe`] in `dir` on `dll` under wine.
pub fn load_dll_command(dir: &Path, dll: &Path) -> Command {
    let host = host_exe(dir);
    let mut command = wine();
    command.arg(&host).arg(windows_path(dll));
    command
}

/// One call of the stand-in's `__hipRegisterFatBinary`, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// The wrapper's magic ([`crate::real_hip::HIPF`] or `HIPK`).
    pub magic: u32,
    /// The wrapper's pointer minus the base of the module holding the
    /// wrapper: the relative virtual address it lands on once relocated
    /// (`None` if below the base, or no module holds the wrapper).
    pub pointer_rva: Option<u64>,
    /// The code object chosen, or the error number (as [`crate::hip::registrations`]).
    pub code: Result<Vec<u8>, i32>,
}

/// The stand-in's registrations recorded in `out`: for each N,
/// `N.wrapper` (two lines, `magic 0x48495046` and `pointer_rva 0x5000`
/// or `pointer_rva none`) and `N.co` or `N.err`, as on Linux.
pub fn registrations(out: &Path) -> Vec<Registration> {
    let codes = crate::hip::registrations(out);
    let mut found = Vec::new();
    for n in 0.. {
        let Ok(text) = fs::read_to_string(out.join(format!("{n}.wrapper"))) else {
            break;
        };
        let field = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
                .unwrap_or_else(|| panic!("{n}.wrapper has no {name}: {text:?}"))
        };
        let hex = |value: &str| u64::from_str_radix(value.trim_start_matches("0x"), 16).unwrap();
        let pointer_rva = field("pointer_rva");
        found.push(Registration {
            magic: u32::try_from(hex(field("magic"))).unwrap(),
            pointer_rva: (pointer_rva != "none").then(|| hex(pointer_rva)),
            code: codes
                .get(n)
                .cloned()
                .unwrap_or_else(|| panic!("registration {n} wrote no {n}.co or {n}.err")),
        });
    }
    assert_eq!(
        found.len(),
        codes.len(),
        "every registration writes N.wrapper first"
    );
    found
}

/// Runs `command` (a program under [`wine`] whose DLLs register with the
/// stand-in, e.g. [`load_dll_command`]) with agent targets `arches`
/// (comma-separated) and none of the loader's variables inherited; fails
/// the test with its output if it fails; returns the registrations.
pub fn run_with_standin(mut command: Command, arches: &str) -> Vec<Registration> {
    let out = tempfile::tempdir().unwrap();
    let result = command
        .env("KPACK_STANDIN_ARCHES", arches)
        .env("KPACK_STANDIN_OUT", windows_path(out.path()))
        .env_remove("ROCM_KPACK_PATH")
        .env_remove("ROCM_KPACK_PATH_PREFIX")
        .env_remove("ROCM_KPACK_DISABLE")
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{command:?} failed ({}):\n{}\n{}",
        result.status,
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr)
    );
    registrations(out.path())
}

/// A DLL as HIP code is built for Windows, compiled with mingw: bundles
/// back to back in `.hip_fat`, each at a multiple of 4096 as clang lays
/// them out; 24-byte wrappers (`magic` HIPF, `version` 1, `binary`,
/// `reserved` 0) in `.hipFatB` whose `binary` is an absolute pointer to
/// one bundle, so the linker writes an `IMAGE_REL_BASED_DIR64` base
/// relocation for each; optionally a constructor registering every
/// wrapper with `amdhip64_7.dll`, in order.
#[derive(Debug, Clone, Default)]
pub struct FatDll {
    bundles: Vec<Vec<u8>>,
    wrappers: Vec<usize>,
    registered: bool,
}

impl FatDll {
    pub fn new() -> FatDll {
        FatDll::default()
    }

    /// Adds a bundle after the others.
    pub fn bundle(mut self, bytes: Vec<u8>) -> FatDll {
        self.bundles.push(bytes);
        self
    }

    /// Adds a wrapper after the others, pointing at bundle `index` (in
    /// the order added; any order, one bundle may have several wrappers).
    pub fn wrapper(mut self, index: usize) -> FatDll {
        self.wrappers.push(index);
        self
    }

    /// Registers the wrappers when loaded, as HIP code does: a constructor
    /// calls `__hipRegisterFatBinary` for each, imported from the stand-in
    /// `amdhip64_7.dll` (a test puts it beside with [`standin_dll`]).
    pub fn registered(mut self) -> FatDll {
        self.registered = true;
        self
    }

    /// Where each bundle starts in `.hip_fat`.
    pub fn bundle_offsets(&self) -> Vec<usize> {
        let mut at = 0;
        self.bundles
            .iter()
            .map(|bundle| {
                let offset = at;
                at = (at + bundle.len()).next_multiple_of(BUNDLE_ALIGN);
                offset
            })
            .collect()
    }

    /// The C source: one array of the bundles, padded, as the section.
    fn source(&self) -> String {
        let offsets = self.bundle_offsets();
        let mut fat = Vec::new();
        for (bundle, offset) in self.bundles.iter().zip(&offsets) {
            fat.resize(*offset, 0);
            fat.extend_from_slice(bundle);
        }
        if fat.is_empty() {
            fat.push(0);
        }
        let bytes: Vec<String> = fat.iter().map(u8::to_string).collect();
        let wrappers: Vec<String> = self
            .wrappers
            .iter()
            .map(|&index| {
                let offset = offsets.get(index).unwrap_or_else(|| {
                    panic!("a wrapper points at bundle {index} of {}", offsets.len())
                });
                format!("  {{0x48495046u, 1u, fat + {offset}, 0}},\n")
            })
            .collect();
        let mut source = format!(
            "#include <stdint.h>\n\
             struct wrapper {{ uint32_t magic; uint32_t version; const void* binary; uint64_t reserved; }};\n\
             __attribute__((section(\"{FAT_SECTION}\"), aligned({BUNDLE_ALIGN}), used))\n\
             static const unsigned char fat[] = {{{}}};\n\
             __attribute__((section(\"{WRAPPER_SECTION}\"), aligned(8), used))\n\
             static const struct wrapper wrappers[] = {{\n{}}};\n",
            bytes.join(","),
            wrappers.concat()
        );
        if self.registered {
            source.push_str(
                "__declspec(dllimport) void** __hipRegisterFatBinary(const void*);\n\
                 __attribute__((constructor)) static void register_code(void) {\n\
                 \x20 for (unsigned i = 0; i < sizeof wrappers / sizeof wrappers[0]; i++) {\n\
                 \x20   __hipRegisterFatBinary(&wrappers[i]);\n\
                 \x20 }\n\
                 }\n",
            );
        }
        source
    }

    /// Compiles the DLL to `dll`.
    pub fn compile(&self, dll: &Path) {
        assert!(!self.wrappers.is_empty(), "a fat DLL needs a wrapper");
        let source_path = dll.with_extension("fat.c");
        fs::write(&source_path, self.source()).unwrap();
        let mut cc = mingw_cc();
        cc.args(["-shared", "-Wall", "-Werror", "-s", "-o"])
            .arg(dll)
            .arg(&source_path);
        if self.registered {
            cc.arg(standin_built());
        }
        run(&mut cc);
        fs::remove_file(&source_path).unwrap();
    }
}

/// A PE image as `llvm-readobj-15 --file-headers --sections
/// --coff-basereloc` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The optional header's preferred base.
    pub image_base: u64,
    /// Every `Key: value` of the file header, the optional header and its
    /// data directories (`SizeOfImage`, `CheckSum`,
    /// `BaseRelocationTableRVA`, ...), as readobj prints the value; the
    /// first of a repeated key (`Magic`).
    pub headers: BTreeMap<String, String>,
    pub sections: Vec<ImageSection>,
    /// The base relocation table's entries, in order.
    pub base_relocations: Vec<BaseRelocation>,
}

/// A section table entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSection {
    /// As readobj prints it: a long name (`/4` in the table) is looked up
    /// in the string table.
    pub name: String,
    pub virtual_address: u64,
    pub virtual_size: u64,
    pub raw_data_size: u64,
    pub pointer_to_raw_data: u64,
    pub characteristics: u32,
}

/// A base relocation: its type as readobj names it (`DIR64`, `ABSOLUTE`
/// for padding) and the RVA it patches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseRelocation {
    pub kind: String,
    pub rva: u64,
}

impl Image {
    /// Reads `path` with `llvm-readobj-15`, which must succeed and warn
    /// of nothing (a warning means it found the image malformed).
    pub fn read(path: &Path) -> Image {
        let output = readobj()
            .args(["--file-headers", "--sections", "--coff-basereloc"])
            .arg(path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && stderr.trim().is_empty(),
            "{READOBJ} on {}: {}\n{stderr}",
            path.display(),
            output.status
        );
        Image::parse(&String::from_utf8_lossy(&output.stdout))
    }

    fn parse(text: &str) -> Image {
        let number = parse_number;
        let mut headers = BTreeMap::new();
        let mut sections: Vec<ImageSection> = Vec::new();
        let mut base_relocations: Vec<BaseRelocation> = Vec::new();
        let mut in_relocations = false;
        for line in text.lines().map(str::trim) {
            if line == "BaseReloc [" {
                in_relocations = true;
            } else if line == "Section {" {
                sections.push(ImageSection {
                    name: String::new(),
                    virtual_address: 0,
                    virtual_size: 0,
                    raw_data_size: 0,
                    pointer_to_raw_data: 0,
                    characteristics: 0,
                });
            } else if let Some(flags) = line.strip_prefix("Characteristics [ (") {
                // A section's flags (the file header's come before any).
                if let Some(section) = sections.last_mut() {
                    section.characteristics =
                        u32::try_from(number(flags.trim_end_matches(')'))).unwrap();
                }
            }
            let Some((key, value)) = line.split_once(": ") else {
                continue;
            };
            if in_relocations {
                match key {
                    "Type" => base_relocations.push(BaseRelocation {
                        kind: value.to_owned(),
                        rva: 0,
                    }),
                    "Address" => {
                        if let Some(last) = base_relocations.last_mut() {
                            last.rva = number(value);
                        }
                    }
                    _ => {}
                }
                continue;
            }
            let Some(section) = sections.last_mut() else {
                headers
                    .entry(key.to_owned())
                    .or_insert_with(|| value.to_owned());
                continue;
            };
            match key {
                "Name" => {
                    value
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .clone_into(&mut section.name);
                }
                "VirtualAddress" => section.virtual_address = number(value),
                "VirtualSize" => section.virtual_size = number(value),
                "RawDataSize" => section.raw_data_size = number(value),
                "PointerToRawData" => section.pointer_to_raw_data = number(value),
                _ => {}
            }
        }
        let image_base = number(
            headers
                .get("ImageBase")
                .expect("readobj printed no ImageBase"),
        );
        Image {
            image_base,
            headers,
            sections,
            base_relocations,
        }
    }

    /// A header field's number (`0x` hexadecimal or decimal); fails the
    /// test if there is no such field.
    pub fn header(&self, key: &str) -> u64 {
        let value = self
            .headers
            .get(key)
            .unwrap_or_else(|| panic!("no {key} in {:?}", self.headers));
        parse_number(value)
    }

    /// The section named `name`; fails the test if there is none.
    pub fn section(&self, name: &str) -> &ImageSection {
        self.sections
            .iter()
            .find(|section| section.name == name)
            .unwrap_or_else(|| panic!("no section {name} in {:?}", self.sections))
    }

    /// The RVAs `IMAGE_REL_BASED_DIR64` entries patch.
    pub fn dir64(&self) -> BTreeSet<u64> {
        self.base_relocations
            .iter()
            .filter(|relocation| relocation.kind == "DIR64")
            .map(|relocation| relocation.rva)
            .collect()
    }
}

/// A number as readobj prints it: `0x` and hexadecimal digits, or decimal.
fn parse_number(value: &str) -> u64 {
    let value = value.trim();
    match value.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => value.parse(),
    }
    .unwrap_or_else(|_| panic!("not a number in readobj's output: {value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parts of `llvm-readobj-15 --file-headers --sections
    /// --coff-basereloc` on a mingw DLL.
    const READOBJ: &str = "
File: fat.dll
Format: COFF-x86-64
ImageFileHeader {
  Machine: IMAGE_FILE_MACHINE_AMD64 (0x8664)
  SectionCount: 2
  Characteristics [ (0x2026)
    IMAGE_FILE_DLL (0x2000)
  ]
}
ImageOptionalHeader {
  Magic: 0x20B
  ImageBase: 0x1F10E0000
  SizeOfImage: 151552
  Characteristics [ (0x160)
    IMAGE_DLL_CHARACTERISTICS_DYNAMIC_BASE (0x40)
  ]
  DataDirectory {
    BaseRelocationTableRVA: 0x12000
  }
}
DOSHeader {
  Magic: MZ
}
Sections [
  Section {
    Number: 1
    Name: .hipFatB (2E 68 69 70 46 61 74 42)
    VirtualSize: 0x48
    VirtualAddress: 0x4000
    RawDataSize: 512
    PointerToRawData: 0x1600
    Characteristics [ (0xC0000040)
      IMAGE_SCN_CNT_INITIALIZED_DATA (0x40)
    ]
  }
  Section {
    Number: 2
    Name: .debug_info (2F 31 39 00 00 00 00 00)
    VirtualSize: 0x6E40
    VirtualAddress: 0x14000
    RawDataSize: 28672
    PointerToRawData: 0x8000
    Characteristics [ (0x42000040)
    ]
  }
]
BaseReloc [
  Entry {
    Type: DIR64
    Address: 0x4008
  }
  Entry {
    Type: ABSOLUTE
    Address: 0x4000
  }
]
";

    #[test]
    fn reads_readobj_output() {
        let image = Image::parse(READOBJ);
        assert_eq!(image.image_base, 0x1_F10E_0000);
        assert_eq!(image.header("SizeOfImage"), 151_552);
        assert_eq!(image.header("BaseRelocationTableRVA"), 0x12000);
        assert_eq!(image.headers["Magic"], "0x20B");
        assert_eq!(
            image.section(".hipFatB"),
            &ImageSection {
                name: ".hipFatB".into(),
                virtual_address: 0x4000,
                virtual_size: 0x48,
                raw_data_size: 512,
                pointer_to_raw_data: 0x1600,
                characteristics: 0xC000_0040,
            }
        );
        // A long name, resolved from the string table (`/19`).
        assert_eq!(image.sections[1].name, ".debug_info");
        assert_eq!(image.dir64(), BTreeSet::from([0x4008]));
        assert_eq!(image.base_relocations.len(), 2);
    }

    #[test]
    fn bundles_start_at_multiples_of_4096() {
        let fat = FatDll::new()
            .bundle(vec![1; 10])
            .bundle(vec![2; 4096])
            .bundle(vec![3; 1]);
        assert_eq!(fat.bundle_offsets(), [0, 4096, 8192]);
    }

    #[test]
    fn windows_paths_go_through_drive_z() {
        assert_eq!(
            windows_path(Path::new("/tmp/a b/c.dll")),
            r"Z:\tmp\a b\c.dll"
        );
    }
}

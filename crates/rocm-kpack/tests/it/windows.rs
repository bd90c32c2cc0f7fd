//! Windows, under wine: a fat DLL's wrappers point at their bundles once
//! the loader relocates it away from its preferred base, and
//! `rocm_kpack.dll` (this crate built for x86_64-pc-windows-gnu) opens
//! archives by Windows paths, splits its search path variables at `;`,
//! resolves a marker's relative paths against the binary's directory and
//! finds the module holding an address.
//!
//! The tools (mingw, wine, llvm-readobj, the Rust target) come from
//! `kpack_test_support::windows`; a missing one fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use fs_err as fs;
use kpack_test_support::offload_bundler::clang_bundle;
use kpack_test_support::real_hip::HIPF;
use kpack_test_support::windows::{
    self, load_dll_command, run_with_standin, standin_dll, windows_path, FatDll, Image,
    FAT_SECTION, WRAPPER_SECTION,
};
use object::read::pe::PeFile64;
use object::LittleEndian as LE;
use rocm_kpack::Compression;

const TRIPLE: &str = "hipv4-amdgcn-amd-amdhsa--";

/// A bundle of `(target, code object)` entries as clang writes it.
fn bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let triples: Vec<String> = entries
        .iter()
        .map(|(t, _)| format!("{TRIPLE}{t}"))
        .collect();
    let entries: Vec<(&str, &[u8])> = triples
        .iter()
        .zip(entries)
        .map(|(triple, (_, code))| (triple.as_str(), *code))
        .collect();
    clang_bundle(&entries)
}

/// A section's RVA and its bytes in the file, read with `object`'s PE
/// reader.
fn section(dll: &[u8], name: &str) -> (u64, Vec<u8>) {
    let file = PeFile64::parse(dll).unwrap();
    let section = file
        .section_table()
        .iter()
        .find(|s| s.name == *name.as_bytes().first_chunk::<8>().unwrap())
        .unwrap_or_else(|| panic!("no {name} section"));
    let data = section.pe_data(dll).unwrap();
    (u64::from(section.virtual_address.get(LE)), data.to_vec())
}

#[test]
fn a_fat_dll_loaded_away_from_its_preferred_base_registers_pointers_to_its_bundles() {
    let context = TestContext::new();
    let dir = context.path("app");
    let bundles = [
        bundle(&[
            ("gfx90a", b"bundle 0 for gfx90a"),
            ("gfx1100", b"bundle 0 for gfx1100"),
        ]),
        bundle(&[
            ("gfx90a:xnack+", b"bundle 1 for gfx90a:xnack+"),
            ("gfx90a:xnack-", b"bundle 1 for gfx90a:xnack-"),
            ("gfx1100", b"bundle 1 for gfx1100"),
        ]),
    ];
    // Three wrappers, not in the bundles' order.
    let wrappers = [1, 0, 1];
    let mut fat = FatDll::new().registered();
    for bytes in &bundles {
        fat = fat.bundle(bytes.clone());
    }
    for index in wrappers {
        fat = fat.wrapper(index);
    }
    fs::create_dir_all(&dir).unwrap();
    let dll = dir.join("fat.dll");
    fat.compile(&dll);
    standin_dll(&dir);

    // Where each bundle is, from the file: the RVA where its bytes start.
    let data = fs::read(&dll).unwrap();
    let (fat_rva, fat_bytes) = section(&data, FAT_SECTION);
    let bundle_rvas: Vec<u64> = bundles
        .iter()
        .map(|bundle| {
            let at = (0..fat_bytes.len())
                .step_by(windows::BUNDLE_ALIGN)
                .find(|&at| fat_bytes[at..].starts_with(bundle))
                .expect("each bundle in .hip_fat at a multiple of 4096");
            fat_rva + at as u64
        })
        .collect();
    assert_ne!(bundle_rvas[0], bundle_rvas[1]);

    // Each wrapper's pointer as stored (ImageBase + RVA), with a DIR64
    // base relocation on it, as llvm-readobj reads the image.
    let image = Image::read(&dll);
    let (wrapper_rva, wrapper_bytes) = section(&data, WRAPPER_SECTION);
    assert_eq!(image.section(WRAPPER_SECTION).virtual_address, wrapper_rva);
    let dir64 = image.dir64();
    for (i, &index) in wrappers.iter().enumerate() {
        let record = &wrapper_bytes[24 * i..24 * (i + 1)];
        assert_eq!(u32::from_le_bytes(record[..4].try_into().unwrap()), HIPF);
        let stored = u64::from_le_bytes(record[8..16].try_into().unwrap());
        assert_eq!(stored, image.image_base + bundle_rvas[index], "wrapper {i}");
        let field = wrapper_rva + 24 * i as u64 + 8;
        assert!(
            dir64.contains(&field),
            "no DIR64 relocation at wrapper {i}'s pointer ({field:#x}): {dir64:x?}"
        );
    }

    let registrations = run_with_standin(load_dll_command(&dir, &dll), "gfx90a:xnack-");
    let expected_code: [&[u8]; 2] = [b"bundle 0 for gfx90a", b"bundle 1 for gfx90a:xnack-"];
    assert_eq!(registrations.len(), wrappers.len());
    for (registration, &index) in registrations.iter().zip(&wrappers) {
        assert_eq!(registration.magic, HIPF);
        assert_eq!(registration.pointer_rva, Some(bundle_rvas[index]));
        assert_eq!(
            registration.code.as_deref(),
            Ok(expected_code[index]),
            "{registration:?}"
        );
    }
}

/// `kpack_windows_test.exe` (tests/c/kpack_windows_test.c) in `dir`,
/// beside `rocm_kpack.dll` and the shim Rust's std needs under wine.
struct Program {
    exe: PathBuf,
    dll: PathBuf,
}

impl Program {
    fn build(dir: &Path) -> Program {
        fs::create_dir_all(dir).unwrap();
        let runtime = windows::runtime_dll();
        let exe = dir.join("kpack_windows_test.exe");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/kpack_windows_test.c");
        run(windows::mingw_cc()
            .args([
                "-municode",
                "-std=c11",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-pedantic",
            ])
            .arg("-I")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("include"))
            .arg("-o")
            .arg(&exe)
            .arg(source)
            .arg(format!("-L{}", runtime.parent().unwrap().display()))
            .arg("-lrocm_kpack"));
        let dll = dir.join(windows::RUNTIME_DLL);
        fs::copy(&runtime, &dll).unwrap();
        windows::prng_shim_dll(dir);
        Program { exe, dll }
    }

    /// The program under wine with `args`, none of the loader's variables
    /// inherited and `env` set.
    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut command = windows::wine();
        command.arg(&self.exe).args(args);
        for name in [
            "ROCM_KPACK_PATH",
            "ROCM_KPACK_PATH_PREFIX",
            "ROCM_KPACK_DISABLE",
            "ROCM_KPACK_DEBUG",
        ] {
            command.env_remove(name);
        }
        command.envs(env.iter().copied());
        command
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        run(&mut self.command(args, env)).trim_end().to_owned()
    }
}

fn run(command: &mut Command) -> String {
    kpack_test_support::run(command)
}

/// What the program prints for a loaded code object.
fn ok(bytes: &[u8]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("OK {hex}")
}

/// A code object of every byte value, named for `tag`.
fn code(tag: &str) -> Vec<u8> {
    let mut bytes = tag.as_bytes().to_vec();
    bytes.extend((0..=255u8).cycle().take(3000));
    bytes
}

/// Writes an archive for `arch` holding [`code`]`(tag)` as
/// `lib/libx.dll#0`.
fn archive(path: &Path, compression: Compression, arch: &str, tag: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let bytes = write_archive(
        compression,
        arch,
        &[arch],
        &[("lib/libx.dll#0", arch, code(tag))],
    );
    fs::write(path, bytes).unwrap();
}

#[test]
fn the_runtime_dll_opens_archives_by_windows_paths() {
    let context = TestContext::new();
    let program = Program::build(&context.path("bin"));
    let zstd = context.path("archives/zstd_gfx1100.kpack");
    let plain = context.path("archives/plain_gfx1100.kpack");
    archive(&zstd, Compression::DEFAULT, "gfx1100", "zstd");
    archive(&plain, Compression::None, "gfx1100", "plain");

    let backslashes = windows_path(&zstd);
    assert!(backslashes.starts_with("Z:\\"), "{backslashes}");
    let kernel = |path: &str| program.run(&["kernel", path, "lib/libx.dll#0", "gfx1100"], &[]);
    assert_eq!(kernel(&backslashes), ok(&code("zstd")));
    assert_eq!(kernel(&backslashes.replace('\\', "/")), ok(&code("zstd")));
    assert_eq!(kernel(&windows_path(&plain)), ok(&code("plain")));
    // Missing: FILE_NOT_FOUND. A directory, a device and a FIFO (a Linux
    // one, through Z:) exist but are no archive files: IO_ERROR, at once.
    let missing = windows_path(&context.path("archives/none.kpack"));
    assert_eq!(kernel(&missing), "ERR 2");
    assert_eq!(kernel(&windows_path(&context.path("archives"))), "ERR 9");
    assert_eq!(kernel("NUL"), "ERR 9");
    let fifo = context.path("archives/fifo_gfx1100.kpack");
    let c_fifo = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path; mkfifo reads nothing else.
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0);
    assert_eq!(kernel(&windows_path(&fifo)), "ERR 9");
}

#[test]
fn the_runtime_dll_splits_its_search_paths_at_semicolons() {
    let context = TestContext::new();
    let program = Program::build(&context.path("bin"));
    let first = context.path("first/x_gfx1100.kpack");
    let second = context.path("second dir/x_gfx1100.kpack");
    archive(&first, Compression::DEFAULT, "gfx1100", "first");
    archive(&second, Compression::None, "gfx1100", "second");
    let binary = windows_path(&context.path("app/lib/libx.dll"));
    let missing = windows_path(&context.path("nowhere/x.kpack"));
    let load = |paths: &str, env: &[(&str, &str)]| {
        program.run(
            &["load", &binary, "lib/libx.dll", "0", paths, "gfx1100"],
            env,
        )
    };
    let marker = "../.kpack/none_@GFXARCH@.kpack";

    // Drive letters, both separators, empty entries: the first that opens.
    let path = format!(
        "{missing};;{};{}",
        windows_path(&second).replace('\\', "/"),
        windows_path(&first)
    );
    assert_eq!(
        load(marker, &[("ROCM_KPACK_PATH", &path)]),
        ok(&code("second"))
    );
    let path = format!("{};{}", windows_path(&first), windows_path(&second));
    assert_eq!(
        load(marker, &[("ROCM_KPACK_PATH", &path)]),
        ok(&code("first"))
    );
    // The prefix is searched before the marker's paths.
    let prefix = format!("{missing};{}", windows_path(&second));
    let own = windows_path(&first);
    assert_eq!(
        load(&own, &[("ROCM_KPACK_PATH_PREFIX", &prefix)]),
        ok(&code("second"))
    );
    assert_eq!(load(&own, &[]), ok(&code("first")));
    assert_eq!(load(&missing, &[]), "ERR 13");
}

#[test]
fn the_runtime_dll_resolves_marker_paths_against_the_binary_directory() {
    let context = TestContext::new();
    let program = Program::build(&context.path("bin"));
    archive(
        &context.path("app/.kpack/test_gfx1100.kpack"),
        Compression::DEFAULT,
        "gfx1100",
        "relative",
    );
    let binary = windows_path(&context.path("app/lib/libx.dll"));
    for marker in [
        "../.kpack/test_@GFXARCH@.kpack",
        "..\\.kpack\\test_@GFXARCH@.kpack",
        "..\\.kpack/test_gfx1100.kpack",
    ] {
        assert_eq!(
            program.run(
                &["load", &binary, "lib/libx.dll", "0", marker, "gfx1100"],
                &[]
            ),
            ok(&code("relative")),
            "{marker}"
        );
    }
    // Forward slashes in the binary's path too.
    let binary = binary.replace('\\', "/");
    assert_eq!(
        program.run(
            &[
                "load",
                &binary,
                "lib/libx.dll",
                "0",
                "..\\.kpack\\test_@GFXARCH@.kpack",
                "gfx1100"
            ],
            &[]
        ),
        ok(&code("relative"))
    );
    // Another GPU: the archive beside is found, and says what it has.
    assert_eq!(
        program.run(
            &[
                "load",
                &binary,
                "lib/libx.dll",
                "0",
                "..\\.kpack\\test_@GFXARCH@.kpack",
                "gfx1030"
            ],
            &[]
        ),
        "ERR 14"
    );
}

#[test]
fn the_runtime_dll_discovers_the_module_holding_an_address() {
    let context = TestContext::new();
    // Longer than MAX_PATH (260), with spaces and a character beyond ASCII:
    // the module name buffer grows, and the path comes back as UTF-8.
    let long = format!("{}/{}/dïr with spaces", "a".repeat(120), "b".repeat(120));
    let program = Program::build(&context.path(&long));
    let out = program.run(&["discover"], &[]);
    let exe = windows_path(&program.exe);
    assert!(exe.len() > 260, "{exe}");
    assert_eq!(
        out,
        format!("exe {exe}\ndll {}\ndiscover ok", windows_path(&program.dll))
    );
}

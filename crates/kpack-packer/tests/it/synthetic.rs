//! Fat binaries made here with gcc: `.hip_fatbin` and `.hipFatBinSegment`
//! laid out with `__attribute__((section))`, hand-made bundles and wrappers,
//! as shared libraries, PIE and non-PIE executables, with packed relative
//! relocations, with sections ending on a page boundary or smaller than a
//! page, and with compressed bundles of every version and method. Each is
//! split, checked for health (and executables for the program header rule
//! of RHEL 8's kernel) before and after GNU strip, and run (libraries
//! through dlopen) with the stand-in HIP runtime loading every wrapper's
//! code object through librocm_kpack.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use kpack_binary::bundle::build::{ccob, offload_bundle};
use kpack_binary::bundle::CcobMethod;
use kpack_binary::elf::{check_program_headers, FatElf, PointerSource, ProgramHeaderRule};
use kpack_packer::archive::{processor_archive_pattern, write_processor_archives};
use kpack_packer::split::{split_binary, write_like};
use rocm_kpack::Compression;

const TARGETS: [&str; 3] = ["gfx90a:xnack+", "gfx90a:xnack-", "gfx1100"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    SharedLibrary,
    Pie,
    NonPie,
}

#[derive(Debug, Clone, Copy)]
enum Encoding {
    Plain,
    Ccob(u16, CcobMethod),
}

/// One fat binary to build.
#[derive(Debug, Clone)]
struct Case {
    name: &'static str,
    kind: Kind,
    relr: bool,
    /// Translation units, each with this many bundles.
    units: Vec<usize>,
    /// Alignment of each bundle array; 0 for none.
    align: usize,
    /// Pad the section to end exactly on a page boundary.
    page_end: bool,
    /// Size of each code object.
    code_size: usize,
    encoding: Encoding,
}

impl Case {
    fn new(name: &'static str, kind: Kind) -> Case {
        Case {
            name,
            kind,
            relr: false,
            units: vec![2, 1],
            align: 4096,
            page_end: false,
            code_size: 3000,
            encoding: Encoding::Plain,
        }
    }
}

/// The code object of bundle `bundle` of unit `unit` for `target`: text
/// that names it, padded.
fn code_object(case: &str, unit: usize, bundle: usize, target: &str, size: usize) -> Vec<u8> {
    let mut data = format!("{case} unit {unit} bundle {bundle} for {target};").into_bytes();
    data.extend((0..size).map(|i| (i % 251) as u8 | 1));
    data
}

fn c_array(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 5);
    for (i, b) in bytes.iter().enumerate() {
        if i % 24 == 0 {
            out.push_str("\n  ");
        }
        write!(out, "{b},").unwrap();
    }
    out
}

/// Writes the C sources, one per unit.
fn sources(case: &Case, dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let total_bundles: usize = case.units.iter().sum();
    let mut emitted = 0;
    for (unit, &bundles) in case.units.iter().enumerate() {
        let mut c = String::from(
            "#include <stdint.h>\n\
             struct kpack_wrapper { uint32_t magic; uint32_t version; const void* binary; void* reserved; };\n\
             void** __hipRegisterFatBinary(const void*);\n",
        );
        for bundle in 0..bundles {
            let entries: Vec<(String, Vec<u8>)> = TARGETS
                .iter()
                .map(|t| {
                    (
                        format!("hipv4-amdgcn-amd-amdhsa--{t}"),
                        code_object(case.name, unit, bundle, t, case.code_size),
                    )
                })
                .collect();
            let borrowed: Vec<(&str, &[u8])> = entries
                .iter()
                .map(|(t, b)| (t.as_str(), b.as_slice()))
                .collect();
            let plain = offload_bundle(&borrowed);
            let mut bytes = match case.encoding {
                Encoding::Plain => plain,
                Encoding::Ccob(version, method) => ccob(&plain, version, method),
            };
            emitted += 1;
            if case.page_end && emitted == total_bundles {
                bytes.resize(bytes.len().next_multiple_of(4096), 0);
            }
            let align = if case.align > 0 {
                format!(", aligned({})", case.align)
            } else {
                String::new()
            };
            writeln!(
                c,
                "__attribute__((section(\".hip_fatbin\"){align}, used)) static const unsigned char bundle{unit}_{bundle}[{}] = {{{}\n}};",
                bytes.len(),
                c_array(&bytes)
            )
            .unwrap();
        }
        // Wrappers in reverse bundle order: the mapping must come from the
        // pointers, not the positions.
        let mut register = String::new();
        for bundle in (0..bundles).rev() {
            writeln!(
                c,
                "__attribute__((section(\".hipFatBinSegment\"), aligned(8), used)) static struct kpack_wrapper wrapper{unit}_{bundle} = {{ 0x48495046u, 1u, bundle{unit}_{bundle}, 0 }};"
            )
            .unwrap();
            writeln!(
                register,
                "  __hipRegisterFatBinary(&wrapper{unit}_{bundle});"
            )
            .unwrap();
        }
        writeln!(
            c,
            "__attribute__((constructor)) static void register{unit}(void) {{\n{register}}}"
        )
        .unwrap();
        if unit == 0 && case.kind != Kind::SharedLibrary {
            c.push_str("int main(void) { return 0; }\n");
        }
        let path = dir.join(format!("unit{unit}.c"));
        fs_err::write(&path, c).unwrap();
        files.push(path);
    }
    files
}

fn build(case: &Case, dir: &Path, standin: &Path) -> PathBuf {
    let files = sources(case, dir);
    let output = dir.join(match case.kind {
        Kind::SharedLibrary => format!("lib{}.so", case.name),
        _ => case.name.to_owned(),
    });
    let mut command = kpack_test_support::tool("cc");
    command
        .args(["-O0", "-g", "-fno-toplevel-reorder", "-o"])
        .arg(&output);
    match case.kind {
        Kind::SharedLibrary => command.args(["-shared", "-fPIC"]),
        Kind::Pie => command.args(["-fPIE", "-pie"]),
        Kind::NonPie => command.args(["-fno-pie", "-no-pie"]),
    };
    if case.relr {
        command.arg("-Wl,-z,pack-relative-relocs");
    }
    command
        .args(&files)
        .arg(format!("-L{}", standin.display()))
        .arg("-l:libamdhip64.so.5");
    run(&mut command);
    output
}

/// Runs `binary` (or dlopens it) with the stand-in for `arches`; returns
/// the sorted registration results.
fn load(
    binary: &Path,
    kind: Kind,
    standin: &Path,
    dlopen: &Path,
    arches: &str,
) -> Vec<Result<Vec<u8>, i32>> {
    let command = if kind == Kind::SharedLibrary {
        dlopen_command(dlopen, binary)
    } else {
        Command::new(binary)
    };
    let mut results = run_with_standin(command, standin, arches);
    results.sort();
    results
}

fn check(case: Case) {
    let work = tempfile::tempdir().unwrap();
    let standin = registering_standin(&work.path().join("hip"));
    let dlopen = build_dlopen(&standin);
    let source_dir = work.path().join("src");
    fs_err::create_dir_all(&source_dir).unwrap();
    let original = build(&case, &source_dir, &standin);
    let data = fs_err::read(&original).unwrap();

    let fat = FatElf::parse(&data).unwrap().expect("a fat binary");
    let bundles: usize = case.units.iter().sum();
    assert_eq!(fat.bundles.len(), bundles, "{}", case.name);
    assert_eq!(fat.wrappers.len(), bundles, "{}", case.name);
    if case.page_end {
        assert_eq!(
            (fat.fatbin.address + fat.fatbin.size) % 4096,
            0,
            "{}",
            case.name
        );
    }
    // Wrappers are in reverse bundle order within each unit.
    let order: Vec<usize> = fat.wrappers.iter().map(|w| w.bundle).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_ne!(
        order, sorted,
        "{}: wrappers should not be in bundle order",
        case.name
    );
    assert_eq!(sorted, (0..bundles).collect::<Vec<_>>());
    // The relocation kind each layout uses for the wrapper pointers.
    for wrapper in &fat.wrappers {
        let kind_ok = match (case.kind, case.relr) {
            (Kind::NonPie, _) => matches!(wrapper.pointer, PointerSource::Absolute),
            (_, true) => matches!(wrapper.pointer, PointerSource::Relr { .. }),
            (_, false) => matches!(wrapper.pointer, PointerSource::Rela { r_type: 8, .. }),
        };
        assert!(kind_ok, "{}: {:?}", case.name, wrapper.pointer);
    }

    let out = work.path().join("out");
    fs_err::create_dir_all(&out).unwrap();
    let name = original.file_name().unwrap().to_str().unwrap().to_owned();
    let split = split_binary(
        &data,
        &name,
        vec![format!(".kpack/{}", processor_archive_pattern("syn"))],
    )
    .unwrap()
    .unwrap();
    let host = out.join(&name);
    write_like(&host, &split.host, &original).unwrap();
    write_processor_archives(
        &out.join(".kpack"),
        "syn",
        Compression::DEFAULT,
        &split.entries,
    )
    .unwrap();

    assert_eq!(
        health_warnings(&host),
        Vec::<String>::new(),
        "{}",
        case.name
    );
    assert_eq!(
        gdb_warnings(&host),
        gdb_warnings(&original),
        "{}",
        case.name
    );
    let stripped = out.join(format!("stripped-{name}"));
    strip_copy(&host, &stripped);
    assert_eq!(
        health_warnings(&stripped),
        Vec::<String>::new(),
        "{} stripped",
        case.name
    );
    // Executables keep the program header rule of RHEL 8's kernel.
    let rule = if case.kind == Kind::SharedLibrary {
        ProgramHeaderRule::NotAnExecutable
    } else {
        ProgramHeaderRule::Holds
    };
    for binary in [&host, &stripped] {
        let data = fs_err::read(binary).unwrap();
        assert_eq!(
            check_program_headers(&data),
            Ok(rule),
            "{}",
            binary.display()
        );
    }

    // Every wrapper loads its own bundle's code object.
    for target in ["gfx90a:xnack-", "gfx1100"] {
        let mut expected: Vec<Result<Vec<u8>, i32>> = Vec::new();
        for (unit, &count) in case.units.iter().enumerate() {
            for bundle in 0..count {
                expected.push(Ok(code_object(
                    case.name,
                    unit,
                    bundle,
                    target,
                    case.code_size,
                )));
            }
        }
        expected.sort();
        for binary in [&host, &stripped] {
            let agent = if target == "gfx90a:xnack-" {
                "gfx90a:sramecc+:xnack-"
            } else {
                target
            };
            assert_eq!(
                load(binary, case.kind, &standin, &dlopen, agent),
                expected,
                "{} ({}) for {agent}",
                case.name,
                binary.display()
            );
        }
    }
    let errors = load(&host, case.kind, &standin, &dlopen, "gfx1201");
    assert!(
        errors.iter().all(|r| *r == Err(14)),
        "{}: {errors:?}",
        case.name
    );
}

#[test]
fn shared_library_with_several_units() {
    check(Case::new("shared", Kind::SharedLibrary));
}

#[test]
fn pie_executable() {
    check(Case::new("pie", Kind::Pie));
}

#[test]
fn non_pie_executable() {
    check(Case::new("nopie", Kind::NonPie));
}

#[test]
fn packed_relative_relocations() {
    check(Case {
        relr: true,
        ..Case::new("relrlib", Kind::SharedLibrary)
    });
    check(Case {
        relr: true,
        ..Case::new("relrpie", Kind::Pie)
    });
}

#[test]
fn fatbin_ending_on_a_page_boundary() {
    check(Case {
        page_end: true,
        ..Case::new("pageend", Kind::SharedLibrary)
    });
}

#[test]
fn fatbin_smaller_than_a_page() {
    check(Case {
        units: vec![2],
        align: 0,
        code_size: 100,
        ..Case::new("small", Kind::SharedLibrary)
    });
}

#[test]
fn compressed_bundles_of_every_version_and_method() {
    for (name, version, method) in [
        ("ccob1zstd", 1, CcobMethod::Zstd),
        ("ccob1zlib", 1, CcobMethod::Zlib),
        ("ccob2zstd", 2, CcobMethod::Zstd),
        ("ccob2zlib", 2, CcobMethod::Zlib),
        ("ccob3zstd", 3, CcobMethod::Zstd),
        ("ccob3zlib", 3, CcobMethod::Zlib),
    ] {
        check(Case {
            encoding: Encoding::Ccob(version, method),
            code_size: 20_000,
            ..Case::new(name, Kind::SharedLibrary)
        });
    }
}

/// An aarch64 shared library with 64 KiB pages, cross-compiled: split, it
/// passes readelf and the aarch64 objdump and strip, every wrapper's
/// R_AARCH64_RELATIVE relocation points at the marker, and every wrapper
/// resolves through the loader (it cannot run here).
#[test]
fn aarch64_library_with_64k_pages() {
    // Smaller than a page (nothing cut) and several pages (pages cut).
    for code_size in [3_000, 60_000] {
        check_aarch64(Case {
            code_size,
            ..Case::new("arm", Kind::SharedLibrary)
        });
    }
}

fn check_aarch64(case: Case) {
    use object::read::elf::{ElfFile64, Rela, SectionHeader};
    use object::{Endianness, Object, ObjectSection};

    let work = tempfile::tempdir().unwrap();
    let source_dir = work.path().join("src");
    fs_err::create_dir_all(&source_dir).unwrap();
    let files = sources(&case, &source_dir);
    let original = source_dir.join("libarm.so");
    run(kpack_test_support::tool("aarch64-linux-gnu-gcc")
        .args([
            "-shared",
            "-fPIC",
            "-O0",
            "-fno-toplevel-reorder",
            "-Wl,-z,max-page-size=0x10000",
            "-o",
        ])
        .arg(&original)
        .args(&files));
    let data = fs_err::read(&original).unwrap();
    let fat = FatElf::parse(&data).unwrap().unwrap();
    assert_eq!(fat.machine, kpack_binary::elf::Machine::Aarch64);
    assert_eq!(fat.page_size, 0x10000);
    assert!(fat
        .wrappers
        .iter()
        .all(|w| matches!(w.pointer, PointerSource::Rela { r_type: 1027, .. })));

    let out = work.path().join("out");
    fs_err::create_dir_all(&out).unwrap();
    let split = split_binary(
        &data,
        "libarm.so",
        vec![format!(".kpack/{}", processor_archive_pattern("syn"))],
    )
    .unwrap()
    .unwrap();
    let host = out.join("libarm.so");
    write_like(&host, &split.host, &original).unwrap();
    write_processor_archives(
        &out.join(".kpack"),
        "syn",
        Compression::DEFAULT,
        &split.entries,
    )
    .unwrap();

    let check = |path: &Path| {
        assert_eq!(
            health_warnings_with("aarch64-linux-gnu-objdump", path),
            Vec::<String>::new()
        );
        // Every wrapper is HIPK, and its relocation's addend is the marker.
        let bytes = fs_err::read(path).unwrap();
        let file = ElfFile64::<Endianness>::parse(&*bytes).unwrap();
        let endian = file.endian();
        let marker = file.section_by_name(".rocm_kpack_ref").unwrap().address();
        let wrappers = file.section_by_name(".hipFatBinSegment").unwrap();
        let mut addends = std::collections::HashMap::new();
        for section in file.elf_section_table().iter() {
            if let Some((relas, _)) = section.rela(endian, &*bytes).unwrap() {
                for rela in relas {
                    addends.insert(rela.r_offset(endian), rela.r_addend(endian));
                }
            }
        }
        for (index, wrapper) in wrappers.data().unwrap().chunks_exact(24).enumerate() {
            assert_eq!(
                &wrapper[..4],
                &0x4B50_4948u32.to_le_bytes(),
                "wrapper {index}"
            );
            let at = wrappers.address() + index as u64 * 24 + 8;
            assert_eq!(
                addends.get(&at).copied(),
                Some(marker as i64),
                "wrapper {index}"
            );
        }
    };
    check(&host);
    let stripped = out.join("stripped.so");
    strip_copy_with("aarch64-linux-gnu-strip", &host, &stripped);
    check(&stripped);
    fs_err::remove_file(&stripped).unwrap();

    let verified = run(Command::new(env!("CARGO_BIN_EXE_kpack-pack"))
        .arg("verify")
        .arg(&out));
    assert!(
        verified
            .contains("1 split binary, 3 wrappers, 3 targets: 9 code objects loaded, 0 problems"),
        "{verified}"
    );
}

/// The SHA-256 of each code object `results` (registrations) holds.
fn digests(results: Vec<Result<Vec<u8>, i32>>) -> BTreeSet<[u8; 32]> {
    results
        .into_iter()
        .map(|result| {
            *kpack_hash::Sha256::of(&result.expect("a registered code object")).as_bytes()
        })
        .collect()
}

#[test]
fn two_gibibytes_of_compressed_device_code_split_in_bounded_memory() {
    let work = tempfile::tempdir().unwrap();
    let standin = registering_standin(&work.path().join("hip"));
    let library = work.path().join("libbig.so");
    compile_big_library(&library, &standin);
    let out = work.path().join("out");
    let stdout = split_within_memory_goal(
        Command::new(env!("CARGO_BIN_EXE_kpack-pack"))
            .arg("split")
            .arg(&library)
            .arg("-o")
            .arg(&out),
    );
    assert!(stdout.contains("64 code objects for 4 targets"), "{stdout}");

    // Every wrapper's code object comes back through the runtime, byte
    // for byte, for one target and for another.
    let dlopen = build_dlopen(&standin);
    let split = out.join("libbig.so");
    for (target, name) in [(2, "gfx1100"), (0, "gfx90a")] {
        let loaded = digests(run_with_standin(
            dlopen_command(&dlopen, &split),
            &standin,
            name,
        ));
        let expected: BTreeSet<[u8; 32]> = (0..BIG_BUNDLES)
            .map(|bundle| big_code_sha256(bundle, target))
            .collect();
        assert_eq!(loaded, expected, "{name}");
    }
}

//! Fat binaries and their split forms on what reads device code without a
//! GPU: Debian 12's own HIP runtime (5.2.3, no kpack support) answering
//! `__hipRegisterFatBinary`, LLVM's `clang-offload-bundler` reading the
//! bundles, and the stand-in runtime loading from the fat binary. Debian's
//! rocRAND (one wrapper), and a library made here with several wrappers.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use kpack_binary::bundle::BundleKind;
use kpack_binary::elf::FatElf;
use kpack_gpu::Target;
use kpack_test_support::offload_bundler;
use kpack_test_support::real_hip::{self, Registration, HIPF, HIPK};

/// What the real runtime answers a fat library's wrapper: a handle.
const FAT: Registration = Registration {
    magic: HIPF,
    handle: true,
};

/// What it answers a split library's wrapper: none.
const SPLIT: Registration = Registration {
    magic: HIPK,
    handle: false,
};

/// Debian's `librocrand.so.1.1`, unpacked into `work`.
fn original(work: &Path) -> PathBuf {
    unpack_rocrand(&work.join("deb"))
}

/// `kpack-pack split` of `library` into `work/split`; the host-only library.
fn split(library: &Path, work: &Path) -> PathBuf {
    let out = work.join("split");
    run(Command::new(env!("CARGO_BIN_EXE_kpack-pack"))
        .arg("split")
        .arg(library)
        .arg("-o")
        .arg(&out)
        .args(["--group", "rocrand"]));
    out.join(library.file_name().unwrap())
}

/// The targets of each bundle of [`several_wrappers`].
const TARGETS: [&str; 3] = ["gfx90a:xnack+", "gfx90a:xnack-", "gfx1030"];

/// Bundle `bundle`'s code object for `target`: text naming both, padded.
fn code_object(bundle: usize, target: &str) -> Vec<u8> {
    let mut data = format!("bundle {bundle} for {target};").into_bytes();
    data.resize(3000, b'.');
    data
}

/// `work/libseveral.so`, linked to the real runtime: `count` wrappers,
/// each over its own bundle (4096-aligned, host entry first, [`TARGETS`]),
/// registered by the constructor in bundle order.
fn several_wrappers(work: &Path, count: usize) -> PathBuf {
    let mut c = String::from(
        "#include <stdint.h>\n\
         struct w { uint32_t m; uint32_t v; const void* p; void* r; };\n\
         void** __hipRegisterFatBinary(const void*);\n",
    );
    let mut register = String::new();
    for n in 0..count {
        let entries: Vec<(String, Vec<u8>)> = TARGETS
            .iter()
            .map(|t| (format!("hipv4-amdgcn-amd-amdhsa--{t}"), code_object(n, t)))
            .collect();
        let borrowed: Vec<(&str, &[u8])> =
            entries.iter().map(|(t, b)| (t.as_str(), &b[..])).collect();
        let bytes: Vec<String> = offload_bundler::clang_bundle(&borrowed)
            .iter()
            .map(u8::to_string)
            .collect();
        writeln!(
            c,
            "__attribute__((section(\".hip_fatbin\"), aligned(4096), used)) static const unsigned char b{n}[] = {{{}}};\n\
             __attribute__((section(\".hipFatBinSegment\"), aligned(8), used)) static struct w w{n} = {{ 0x48495046u, 1u, b{n}, 0 }};",
            bytes.join(",")
        )
        .unwrap();
        writeln!(register, "  __hipRegisterFatBinary(&w{n});").unwrap();
    }
    writeln!(
        c,
        "__attribute__((constructor)) static void reg(void) {{\n{register}}}"
    )
    .unwrap();
    let source = work.join("several.c");
    fs_err::write(&source, c).unwrap();
    let library = work.join("libseveral.so");
    run(kpack_test_support::tool("cc")
        .args([
            "-shared",
            "-fPIC",
            "-fno-toplevel-reorder",
            "-Wall",
            "-Werror",
            "-o",
        ])
        .arg(&library)
        .arg(&source)
        .arg(real_hip::runtime()));
    library
}

/// The number of wrappers the packer finds in a fat `library`.
fn wrapper_count(library: &Path) -> usize {
    let data = fs_err::read(library).unwrap();
    FatElf::parse(&data).unwrap().unwrap().wrappers.len()
}

#[test]
fn the_real_runtime_returns_a_handle_for_every_wrapper_of_the_fat_library() {
    let work = tempfile::tempdir().unwrap();
    let library = original(work.path());
    let registrations = real_hip::registrations(&library);
    assert_eq!(registrations.len(), wrapper_count(&library));
    assert!(
        registrations.iter().all(|r| *r == FAT),
        "{registrations:x?}"
    );
}

#[test]
fn the_real_runtime_returns_a_null_handle_for_every_wrapper_of_the_split_library() {
    let work = tempfile::tempdir().unwrap();
    let library = original(work.path());
    let host = split(&library, work.path());
    let registrations = real_hip::registrations(&host);
    assert_eq!(registrations.len(), wrapper_count(&library));
    assert!(
        registrations.iter().all(|r| *r == SPLIT),
        "{registrations:x?}"
    );
}

#[test]
fn clang_offload_bundler_reads_the_bundles_the_packer_reads() {
    let work = tempfile::tempdir().unwrap();
    let library = original(work.path());
    let data = fs_err::read(&library).unwrap();
    let fat = FatElf::parse(&data).unwrap().unwrap();
    let bundles = offload_bundler::bundles(&library);
    assert_eq!(bundles.len(), fat.bundles.len());
    for (bundle, read) in bundles.iter().zip(&fat.bundles) {
        let mut expected: BTreeSet<String> =
            read.entries.iter().map(|c| c.triple.clone()).collect();
        expected.insert(offload_bundler::HOST_TRIPLE.into());
        assert_eq!(bundle.triples(), expected);
        for code_object in &read.code_objects().unwrap() {
            assert!(
                bundle.unbundle(&code_object.triple) == *code_object.bytes,
                "{} differs",
                code_object.triple
            );
        }
    }
}

#[test]
fn the_stand_in_loads_the_matching_code_object_from_the_fat_library() {
    let work = tempfile::tempdir().unwrap();
    let library = original(work.path());
    let data = fs_err::read(&library).unwrap();
    let expected = code_by_bundle(&data).swap_remove(0);
    let standin = work.path().join("hip");
    let dlopen = standin_for(&standin, &library);
    let load = |arches: &str| run_with_standin(dlopen_command(&dlopen, &library), &standin, arches);
    let t = |s: &str| Target::parse(s).unwrap();

    assert_eq!(
        load("gfx90a:sramecc+:xnack-"),
        [Ok(expected[&t("gfx90a:xnack-")].clone())]
    );
    assert_eq!(
        load("gfx90a:xnack+"),
        [Ok(expected[&t("gfx90a:xnack+")].clone())]
    );
    assert_eq!(load("gfx1030"), [Ok(expected[&t("gfx1030")].clone())]);
    assert_eq!(load("gfx1100,gfx803"), [Ok(expected[&t("gfx803")].clone())]);
    assert_eq!(load("gfx1100"), [Err(14)]);
}

#[test]
fn the_real_runtime_answers_each_of_several_wrappers() {
    let work = tempfile::tempdir().unwrap();
    let library = several_wrappers(work.path(), 3);
    assert_eq!(wrapper_count(&library), 3);
    assert_eq!(real_hip::registrations(&library), [FAT; 3]);
    let host = split(&library, work.path());
    assert_eq!(real_hip::registrations(&host), [SPLIT; 3]);
}

#[test]
fn clang_offload_bundler_reads_each_of_several_bundles() {
    let work = tempfile::tempdir().unwrap();
    let library = several_wrappers(work.path(), 3);
    let bundles = offload_bundler::bundles(&library);
    assert_eq!(bundles.len(), 3);
    for (n, bundle) in bundles.iter().enumerate() {
        let mut expected: BTreeSet<String> = TARGETS
            .iter()
            .map(|t| format!("hipv4-amdgcn-amd-amdhsa--{t}"))
            .collect();
        expected.insert(offload_bundler::HOST_TRIPLE.into());
        assert_eq!(bundle.triples(), expected);
        for target in TARGETS {
            let triple = format!("hipv4-amdgcn-amd-amdhsa--{target}");
            assert_eq!(bundle.unbundle(&triple), code_object(n, target), "{triple}");
        }
    }
}

#[test]
fn the_stand_in_loads_each_wrappers_own_bundle_from_a_fat_library() {
    let work = tempfile::tempdir().unwrap();
    let library = several_wrappers(work.path(), 3);
    let standin = work.path().join("hip");
    let dlopen = standin_for(&standin, &library);
    let load = |arches: &str| run_with_standin(dlopen_command(&dlopen, &library), &standin, arches);
    let each = |target: &str| {
        (0..3)
            .map(|n| Ok(code_object(n, target)))
            .collect::<Vec<_>>()
    };
    assert_eq!(load("gfx90a:sramecc+:xnack-"), each("gfx90a:xnack-"));
    assert_eq!(load("gfx1030"), each("gfx1030"));
    assert_eq!(load("gfx1100"), [Err(14), Err(14), Err(14)]);
}

/// `kpack-pack materialize` of the split `host` for `targets`, into
/// `work/<name>`.
fn materialize(host: &Path, targets: &str, work: &Path, name: &str) -> PathBuf {
    let out = work.join(name);
    run(Command::new(env!("CARGO_BIN_EXE_kpack-pack"))
        .arg("materialize")
        .arg(host)
        .arg("-o")
        .arg(&out)
        .args(["--targets", targets]));
    out
}

#[test]
fn the_real_runtime_returns_a_handle_for_every_wrapper_of_the_materialized_library() {
    let work = tempfile::tempdir().unwrap();
    let library = original(work.path());
    let host = split(&library, work.path());
    for (targets, name) in [("gfx1030", "gfx1030.so"), ("gfx90a:xnack-", "gfx90a.so")] {
        let fat = materialize(&host, targets, work.path(), name);
        let registrations = real_hip::registrations(&fat);
        assert_eq!(registrations.len(), wrapper_count(&library), "{targets}");
        assert!(
            registrations.iter().all(|r| *r == FAT),
            "{targets}: {registrations:x?}"
        );
    }
    let several = several_wrappers(work.path(), 3);
    let host = split(&several, &work.path().join("several"));
    let fat = materialize(&host, "gfx1030", work.path(), "several-gfx1030.so");
    let registrations = real_hip::registrations(&fat);
    assert_eq!(registrations.len(), 3);
    assert!(
        registrations.iter().all(|r| *r == FAT),
        "{registrations:x?}"
    );
}

#[test]
fn clang_offload_bundler_reads_exactly_the_installed_targets_from_a_materialized_library() {
    let work = tempfile::tempdir().unwrap();
    let library = original(work.path());
    let data = fs_err::read(&library).unwrap();
    let original = FatElf::parse(&data).unwrap().unwrap();
    let host = split(&library, work.path());
    let fat = materialize(
        &host,
        "gfx90a:sramecc+:xnack-,gfx1030",
        work.path(),
        "fat.so",
    );
    let bundles = offload_bundler::bundles(&fat);
    assert_eq!(bundles.len(), 1);
    let original_code = original.bundles[0].code_objects().unwrap();
    let installed: Vec<_> = original_code
        .iter()
        .filter(|c| ["gfx90a", "gfx1030"].contains(&c.target.processor()))
        .collect();
    assert_eq!(installed.len(), 3);
    let mut expected: BTreeSet<String> = installed.iter().map(|c| c.triple.clone()).collect();
    expected.insert(offload_bundler::HOST_TRIPLE.into());
    assert_eq!(bundles[0].triples(), expected);
    for code_object in installed {
        assert!(
            bundles[0].unbundle(&code_object.triple) == *code_object.bytes,
            "{} differs from the original's",
            code_object.triple
        );
    }

    // Several wrappers, each with its own bundle.
    let several = several_wrappers(work.path(), 3);
    let host = split(&several, &work.path().join("several"));
    let fat = materialize(&host, "gfx90a", work.path(), "several.so");
    let bundles = offload_bundler::bundles(&fat);
    assert_eq!(bundles.len(), 3);
    for (index, bundle) in bundles.iter().enumerate() {
        let triples: Vec<String> = bundle.triples().into_iter().collect();
        assert_eq!(
            triples,
            [
                "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
                "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
                offload_bundler::HOST_TRIPLE,
            ]
        );
        for target in ["gfx90a:xnack+", "gfx90a:xnack-"] {
            assert_eq!(
                bundle.unbundle(&format!("hipv4-amdgcn-amd-amdhsa--{target}")),
                code_object(index, target),
                "bundle {index} for {target}"
            );
        }
    }
}

#[test]
fn the_stand_in_loads_the_right_code_object_from_a_materialized_library() {
    let work = tempfile::tempdir().unwrap();
    let library = original(work.path());
    let data = fs_err::read(&library).unwrap();
    let expected = code_by_bundle(&data).swap_remove(0);
    let host = split(&library, work.path());
    let materialized = materialize(&host, "gfx90a:sramecc+:xnack-", work.path(), "fat.so");
    let standin = work.path().join("hip");
    let dlopen = standin_for(&standin, &materialized);
    let load =
        |arches: &str| run_with_standin(dlopen_command(&dlopen, &materialized), &standin, arches);
    let t = |s: &str| Target::parse(s).unwrap();
    assert_eq!(
        load("gfx90a:sramecc+:xnack-"),
        [Ok(expected[&t("gfx90a:xnack-")].clone())]
    );
    assert_eq!(
        load("gfx90a:xnack+"),
        [Ok(expected[&t("gfx90a:xnack+")].clone())]
    );
    // Only the installed processor's code is there.
    assert_eq!(load("gfx1030"), [Err(14)]);
}

#[test]
fn the_stand_in_loads_compressed_bundles_from_a_compressed_materialization() {
    let work = tempfile::tempdir().unwrap();
    let library = original(work.path());
    let data = fs_err::read(&library).unwrap();
    let expected = code_by_bundle(&data).swap_remove(0);
    let host = split(&library, work.path());
    let materialized = work.path().join("fat.so");
    run(Command::new(env!("CARGO_BIN_EXE_kpack-pack"))
        .arg("materialize")
        .arg(&host)
        .arg("-o")
        .arg(&materialized)
        .args(["--targets", "gfx90a:sramecc+:xnack-", "--compress"]));
    let fat = fs_err::read(&materialized).unwrap();
    let bundles = FatElf::parse(&fat).unwrap().unwrap().bundles;
    assert!(matches!(
        bundles[0].kind,
        BundleKind::Compressed { version: 3, .. }
    ));
    let standin = work.path().join("hip");
    let dlopen = standin_for(&standin, &materialized);
    let load =
        |arches: &str| run_with_standin(dlopen_command(&dlopen, &materialized), &standin, arches);
    let t = |s: &str| Target::parse(s).unwrap();
    assert_eq!(
        load("gfx90a:sramecc+:xnack-"),
        [Ok(expected[&t("gfx90a:xnack-")].clone())]
    );
    assert_eq!(load("gfx1030"), [Err(14)]);
}

/// Writes the archive `path` for `arch` holding `code` (binary key, bytes).
fn write_overlay(path: &Path, arch: &str, code: &[(String, Vec<u8>)]) {
    use rocm_kpack::{ArchiveOptions, ArchiveWriter, BinaryKey, Compression};
    let target = Target::parse(arch).unwrap();
    let options = ArchiveOptions {
        group: "torch".into(),
        family: arch.into(),
        arches: vec![target.clone()],
        compression: Compression::DEFAULT,
    };
    let file = fs_err::File::create(path).unwrap();
    let mut writer = ArchiveWriter::new(file, options).unwrap();
    for (key, bytes) in code {
        let (name, index) = key.rsplit_once('#').unwrap();
        let key = BinaryKey::new(name, index.parse().unwrap());
        writer.add(&key, &target, bytes).unwrap();
    }
    writer.finish().unwrap();
}

/// TheRock's torch wheels ship `torch_gfx90a:xnack+.kpack` and
/// `torch_gfx90a:xnack-.kpack`, partial or empty, beside the full
/// `torch_gfx90a.kpack`: through the runtime every wrapper of a split
/// library still gets its code object, from the overlay where it has one.
#[test]
fn the_stand_in_loads_every_wrapper_through_partial_and_empty_overlay_archives() {
    let work = tempfile::tempdir().unwrap();
    let library = several_wrappers(work.path(), 10);
    let out = work.path().join("split");
    run(Command::new(env!("CARGO_BIN_EXE_kpack-pack"))
        .arg("split")
        .arg(&library)
        .arg("-o")
        .arg(&out)
        .args(["--group", "torch"]));
    let host = out.join("libseveral.so");
    let kpack = out.join(".kpack");
    let keys: Vec<String> = (0..2).map(|n| format!("libseveral.so#{n}")).collect();
    let overlay: Vec<(String, Vec<u8>)> = keys
        .iter()
        .map(|key| (key.clone(), format!("overlay {key}").into_bytes()))
        .collect();
    write_overlay(
        &kpack.join("torch_gfx90a:xnack+.kpack"),
        "gfx90a:xnack+",
        &overlay,
    );
    write_overlay(
        &kpack.join("torch_gfx90a:xnack-.kpack"),
        "gfx90a:xnack-",
        &[],
    );

    let standin = work.path().join("hip");
    let dlopen = standin_for(&standin, &host);
    let load = |arches: &str| run_with_standin(dlopen_command(&dlopen, &host), &standin, arches);
    let plus: Vec<_> = (0..10)
        .map(|n| match n {
            0 | 1 => Ok(overlay[n].1.clone()),
            _ => Ok(code_object(n, "gfx90a:xnack+")),
        })
        .collect();
    assert_eq!(load("gfx90a:sramecc+:xnack+"), plus);
    let minus: Vec<_> = (0..10)
        .map(|n| Ok(code_object(n, "gfx90a:xnack-")))
        .collect();
    assert_eq!(load("gfx90a:sramecc+:xnack-"), minus);
}

//! Debian's rocRAND on what reads device code without a GPU: Debian 12's
//! own HIP runtime (5.2.3, no kpack support) answering
//! `__hipRegisterFatBinary`, LLVM's `clang-offload-bundler` reading the
//! original's bundles, and the stand-in runtime loading the original.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use kpack_packer::elf::FatElf;
use kpack_test_support::offload_bundler;
use kpack_test_support::real_hip::{self, Registration, HIPF, HIPK};
use rocm_kpack::Target;

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
        registrations.iter().all(|r| *r
            == Registration {
                magic: HIPF,
                handle: true
            }),
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
        registrations.iter().all(|r| *r
            == Registration {
                magic: HIPK,
                handle: false
            }),
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
            read.code_objects.iter().map(|c| c.triple.clone()).collect();
        expected.insert("host-x86_64-unknown-linux".into());
        assert_eq!(bundle.triples(), expected);
        for code_object in &read.code_objects {
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
    let fat = FatElf::parse(&data).unwrap().unwrap();
    let expected: BTreeMap<Target, Vec<u8>> = fat.bundles[0]
        .code_objects
        .iter()
        .map(|c| (c.target.clone(), c.bytes.to_vec()))
        .collect();
    let standin = work.path().join("hip");
    fs_err::create_dir_all(&standin).unwrap();
    build_standin(&standin, &hip_imports(&library));
    let dlopen = build_dlopen(&standin);
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

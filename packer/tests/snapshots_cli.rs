//! What `kpack-pack` prints, as snapshots: split, inspect (human and JSON),
//! verify and an error, on Debian's rocRAND library. The commands run in a
//! temporary directory with relative paths, so the output is the same on
//! every machine.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use kpack_test_support::transcript;

use common::unpack_rocrand;

fn kpack_pack(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kpack-pack"))
        .args(args)
        .current_dir(dir)
        .env_remove("KPACK_SIGN_PASSWORD")
        .output()
        .unwrap()
}

#[test]
fn split_inspect_and_verify_of_rocrand() {
    let work = tempfile::tempdir().unwrap();
    let library = unpack_rocrand(&work.path().join("deb"));
    let relative = library.strip_prefix(work.path()).unwrap().to_str().unwrap();

    let split = kpack_pack(work.path(), &["split", relative, "-o", "out"]);
    insta::assert_snapshot!("split", transcript(&split, &[]));
    let archive = "out/.kpack/rocm_gfx90a.kpack";
    insta::assert_snapshot!(
        "inspect",
        transcript(&kpack_pack(work.path(), &["inspect", archive]), &[])
    );
    insta::assert_snapshot!(
        "inspect_json",
        transcript(
            &kpack_pack(work.path(), &["inspect", archive, "--json"]),
            &[]
        )
    );
    insta::assert_snapshot!(
        "verify",
        transcript(&kpack_pack(work.path(), &["verify", "out"]), &[])
    );
}

#[test]
fn errors_say_what_and_where() {
    let work = tempfile::tempdir().unwrap();
    fs_err::write(work.path().join("notes.txt"), "not an ELF file").unwrap();
    fs_err::write(work.path().join("broken.kpack"), b"KPAK garbage").unwrap();
    insta::assert_snapshot!(
        "split_not_elf",
        transcript(
            &kpack_pack(work.path(), &["split", "notes.txt", "-o", "out"]),
            &[]
        )
    );
    insta::assert_snapshot!(
        "inspect_corrupt",
        transcript(&kpack_pack(work.path(), &["inspect", "broken.kpack"]), &[])
    );
    insta::assert_snapshot!(
        "usage",
        transcript(&kpack_pack(work.path(), &["split"]), &[])
    );
}

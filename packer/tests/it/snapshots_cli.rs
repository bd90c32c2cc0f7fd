//! What `kpack-pack` prints, as snapshots: split, inspect (human and JSON),
//! verify and an error, on Debian's rocRAND library; wheel split on the
//! jax ROCm plugin wheel. The commands run in a
//! temporary directory with relative paths, so the output is the same on
//! every machine.

use std::path::Path;
use std::process::{Command, Output};

use kpack_test_support::transcript;

use crate::common::unpack_rocrand;

fn kpack_pack(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kpack-pack"))
        .args(args)
        .current_dir(dir)
        .env_remove("KPACK_SIGN_PASSWORD")
        .env_remove("SOURCE_DATE_EPOCH")
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

#[test]
fn wheel_split_of_jax() {
    let work = tempfile::tempdir().unwrap();
    let name = "jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl";
    fs_err::copy(
        crate::common::fixtures().join("pypi").join(name),
        work.path().join(name),
    )
    .unwrap();
    insta::assert_snapshot!(
        "wheel_split",
        transcript(
            &kpack_pack(work.path(), &["wheel", "split", name, "-o", "dist"]),
            &[]
        )
    );
    fs_err::write(work.path().join("notes-1.0-py3-none-any.whl"), "not a zip").unwrap();
    insta::assert_snapshot!(
        "wheel_split_not_zip",
        transcript(
            &kpack_pack(
                work.path(),
                &[
                    "wheel",
                    "split",
                    "notes-1.0-py3-none-any.whl",
                    "-o",
                    "dist2"
                ]
            ),
            &[]
        )
    );
}

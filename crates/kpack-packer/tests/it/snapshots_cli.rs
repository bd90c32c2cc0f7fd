//! What `kpack-pack` prints, as snapshots, one a test: split, inspect
//! (human and JSON), verify and errors, on Debian's rocRAND library; wheel
//! split on the jax ROCm plugin wheel. The commands run in the test
//! context's directory with relative paths, so the output is the same on
//! every machine.

use crate::common::{unpack_rocrand, TestContext};

/// A context holding Debian's rocRAND library split into `out`.
fn split_rocrand() -> (TestContext, String) {
    let context = TestContext::new();
    let library = unpack_rocrand(&context.path().join("deb"));
    let relative = library.strip_prefix(context.path()).unwrap().to_owned();
    let relative = relative.to_str().unwrap();
    let split = context.run(&mut context.kpack_pack(&["split", relative, "-o", "out"]));
    (context, split)
}

const ARCHIVE: &str = "out/.kpack/rocm_gfx90a.kpack";

#[test]
fn split() {
    insta::assert_snapshot!(split_rocrand().1);
}

#[test]
fn inspect() {
    let (context, _) = split_rocrand();
    insta::assert_snapshot!(context.run(&mut context.kpack_pack(&["inspect", ARCHIVE])));
}

#[test]
fn inspect_json() {
    let (context, _) = split_rocrand();
    let mut inspect = context.kpack_pack(&["inspect", ARCHIVE, "--json"]);
    insta::assert_snapshot!(context.run(&mut inspect));
}

#[test]
fn verify() {
    let (context, _) = split_rocrand();
    insta::assert_snapshot!(context.run(&mut context.kpack_pack(&["verify", "out"])));
}

#[test]
fn split_not_elf() {
    let context = TestContext::new();
    fs_err::write(context.path().join("notes.txt"), "not an ELF file").unwrap();
    let mut split = context.kpack_pack(&["split", "notes.txt", "-o", "out"]);
    insta::assert_snapshot!(context.run(&mut split));
    assert!(!context.path().join("out").exists());
}

#[test]
fn inspect_corrupt() {
    let context = TestContext::new();
    fs_err::write(context.path().join("broken.kpack"), b"KPAK garbage").unwrap();
    let mut inspect = context.kpack_pack(&["inspect", "broken.kpack"]);
    insta::assert_snapshot!(context.run(&mut inspect));
}

#[test]
fn usage() {
    let context = TestContext::new();
    insta::assert_snapshot!(context.run(&mut context.kpack_pack(&["split"])));
}

/// A context holding the jax ROCm plugin wheel.
fn with_jax_wheel() -> TestContext {
    let context = TestContext::new();
    fs_err::copy(
        crate::common::fixtures().join("pypi").join(JAX),
        context.path().join(JAX),
    )
    .unwrap();
    context
}

const JAX: &str = "jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl";

#[test]
fn wheel_split() {
    let context = with_jax_wheel();
    let mut split = context.kpack_pack(&["wheel", "split", JAX, "-o", "dist"]);
    insta::assert_snapshot!(context.run(&mut split));
}

#[test]
fn wheel_split_not_zip() {
    let context = TestContext::new();
    let name = "notes-1.0-py3-none-any.whl";
    fs_err::write(context.path().join(name), "not a zip").unwrap();
    let mut split = context.kpack_pack(&["wheel", "split", name, "-o", "dist2"]);
    insta::assert_snapshot!(context.run(&mut split));
}

/// A group that could not be part of a file name is refused by `split`
/// and `wheel split` alike, before anything is read or written.
#[test]
fn a_group_with_a_slash_is_refused() {
    let context = TestContext::new();
    for (command, name) in [
        ("split", "split_group_with_a_slash"),
        ("wheel", "wheel_group_with_a_slash"),
    ] {
        let mut args = vec![command];
        if command == "wheel" {
            args.push("split");
        }
        args.extend(["missing-input", "-o", "out", "--group", "a/b"]);
        insta::assert_snapshot!(name, context.run(&mut context.kpack_pack(&args)));
        assert!(!context.path().join("out").exists());
    }
}

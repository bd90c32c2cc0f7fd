//! Golden `readelf` dumps of split binaries: the ELF header, program
//! headers, section headers and dynamic section of rocRAND's library and of
//! jax's `_prng.so` after the split, as snapshots. A change to the ELF
//! surgery shows up here as a reviewed diff (`INSTA_UPDATE=always` rewrites
//! them).

use std::io::Read;
use std::path::Path;
use std::process::Command;

use crate::common::{fixtures, run, unpack_rocrand};

/// Splits `input` into `out` with kpack-pack; returns `readelf -hlSdW` of
/// the host binary, the temporary path masked.
fn split_and_dump(input: &Path, out: &Path) -> String {
    run(Command::new(env!("CARGO_BIN_EXE_kpack-pack"))
        .arg("split")
        .arg(input)
        .arg("-o")
        .arg(out));
    let host = out.join(input.file_name().unwrap());
    run(kpack_test_support::tool("readelf")
        .args(["-h", "-l", "-S", "-d", "-W"])
        .arg(&host))
    .replace(&host.display().to_string(), "<HOST>")
}

#[test]
fn rocrand_split_layout() {
    let work = tempfile::tempdir().unwrap();
    let library = unpack_rocrand(&work.path().join("deb"));
    insta::assert_snapshot!(split_and_dump(&library, &work.path().join("out")));
}

#[test]
fn jax_prng_split_layout() {
    let work = tempfile::tempdir().unwrap();
    let wheel =
        fixtures().join("pypi/jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl");
    let mut archive = zip::ZipArchive::new(fs_err::File::open(wheel).unwrap()).unwrap();
    let name = (0..archive.len())
        .map(|i| archive.by_index(i).unwrap().name().unwrap().into_owned())
        .find(|name| name.ends_with("/_prng.so") || name.contains("/_prng."))
        .unwrap();
    let mut bytes = Vec::new();
    archive
        .by_name(&name)
        .unwrap()
        .read_to_end(&mut bytes)
        .unwrap();
    let input = work.path().join("_prng.so");
    fs_err::write(&input, bytes).unwrap();
    insta::assert_snapshot!(split_and_dump(&input, &work.path().join("out")));
}

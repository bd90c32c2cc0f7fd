//! Debian's rocRAND library split end to end: archives per processor, a
//! healthy host-only library (readelf, objdump, gdb, GNU strip), and the
//! dynamic loader running its constructor through a stand-in HIP runtime
//! that loads each code object through librocm_kpack.

use std::path::Path;

use crate::common::*;
use kpack_binary::elf::FatElf;
use kpack_packer::archive::{processor_archive_pattern, write_processor_archives};
use kpack_packer::split::{split_binary, write_like};
use rocm_kpack::{Archive, Compression, Target};

#[test]
fn splits_rocrand_into_a_healthy_library_and_per_processor_archives() {
    let work = tempfile::tempdir().unwrap();
    let original = unpack_rocrand(&work.path().join("deb"));
    let data = fs_err::read(&original).unwrap();
    let fat = FatElf::parse(&data).unwrap().unwrap();
    let expected = code_by_bundle(&data).swap_remove(0);

    // Split into an install tree: lib/librocrand.so.1.1 and .kpack/.
    let root = work.path().join("prefix");
    let lib = root.join("lib");
    fs_err::create_dir_all(&lib).unwrap();
    let split = split_binary(
        &data,
        "lib/librocrand.so.1.1",
        vec![format!("../.kpack/{}", processor_archive_pattern("rocm"))],
    )
    .unwrap()
    .unwrap();
    let host = lib.join("librocrand.so.1.1");
    write_like(&host, &split.host, &original).unwrap();
    assert!(
        split.layout.removed() >= fat.fatbin.size - 4096,
        "{:?}",
        split.layout
    );
    assert!(split.host.len() as u64 <= data.len() as u64 - split.layout.removed() + 16 * 1024);
    let archives = write_processor_archives(
        &root.join(".kpack"),
        "rocm",
        Compression::DEFAULT,
        &split.entries,
    )
    .unwrap();
    let names: Vec<String> = archives
        .iter()
        .map(|a| a.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "rocm_gfx1030.kpack",
            "rocm_gfx803.kpack",
            "rocm_gfx900.kpack",
            "rocm_gfx906.kpack",
            "rocm_gfx908.kpack",
            "rocm_gfx90a.kpack"
        ]
    );

    // Every code object is byte-equal to the original bundle's.
    for written in &archives {
        let archive = Archive::open(&written.path).unwrap();
        for target in archive.architectures() {
            let code = archive.kernel("lib/librocrand.so.1.1#0", target).unwrap();
            assert_eq!(&*code, &expected[target][..], "{target}");
        }
    }
    let gfx90a = Archive::open(root.join(".kpack/rocm_gfx90a.kpack")).unwrap();
    assert_eq!(
        gfx90a.architectures(),
        [
            Target::parse("gfx90a:xnack+").unwrap(),
            Target::parse("gfx90a:xnack-").unwrap()
        ]
    );

    // Healthy, before and after GNU strip.
    assert_eq!(health_warnings(&host), Vec::<String>::new());
    assert_eq!(gdb_warnings(&host), gdb_warnings(&original));
    let stripped = lib.join("librocrand-stripped.so");
    fs_err::copy(&host, &stripped).unwrap();
    let strip = kpack_test_support::tool("strip")
        .arg(&stripped)
        .output()
        .unwrap();
    assert!(
        strip.status.success() && strip.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&strip.stderr)
    );
    assert_eq!(health_warnings(&stripped), Vec::<String>::new());
    assert_eq!(gdb_warnings(&stripped), gdb_warnings(&original));

    // The dynamic loader runs the constructor, which registers the wrapper
    // with the stand-in HIP runtime, which loads through librocm_kpack.
    let standin_dir = work.path().join("hip");
    let dlopen = standin_for(&standin_dir, &original);
    let load = |library: &Path, arches: &str| {
        run_with_standin(dlopen_command(&dlopen, library), &standin_dir, arches)
    };
    let t = |s: &str| Target::parse(s).unwrap();
    for library in [&host, &stripped] {
        assert_eq!(
            load(library, "gfx90a:sramecc+:xnack-"),
            [Ok(expected[&t("gfx90a:xnack-")].clone())]
        );
        assert_eq!(
            load(library, "gfx1030"),
            [Ok(expected[&t("gfx1030")].clone())]
        );
        assert_eq!(
            load(library, "gfx803"),
            [Ok(expected[&t("gfx803")].clone())]
        );
        assert_eq!(load(library, "gfx1100"), [Err(14)]);
    }
    fs_err::rename(root.join(".kpack"), root.join(".kpack-gone")).unwrap();
    assert_eq!(load(&host, "gfx90a:xnack-"), [Err(13)]);
}

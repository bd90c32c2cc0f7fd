//! PE/COFF images (09-windows.md): AMD's HIP SDK DLLs of the `hip_quant`
//! win_amd64 wheel split into a host wheel and device wheels, installed by
//! real pip for Windows, loaded through their markers byte-equal to the
//! original code, and read by `llvm-readobj` without a warning; a DLL
//! built with mingw loaded under wine, fat, split (its code through
//! `rocm_kpack.dll`) and materialized again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_binary::bundle::build::{ccob, offload_bundle};
use kpack_binary::bundle::CcobMethod;
use kpack_binary::image::FatImage;
use kpack_binary::pe::build::{malformed, SyntheticDll};
use kpack_binary::pe::{FatPe, SplitPe, MARKER_SECTION};
use kpack_binary::wrapper::{HIPF_MAGIC, HIPK_MAGIC};
use kpack_binary::{ImageError, PeError};
use kpack_test_support::fat::FatLibrary;
use kpack_test_support::offload_bundler::clang_bundle;
use kpack_test_support::windows::{self, load_dll_command, run_with_standin, Image};
use kpack_test_support::{fixtures, run};
use object::pe::IMAGE_DIRECTORY_ENTRY_SECURITY;
use object::read::pe::PeFile64;
use rocm_kpack::{Loader, LoaderConfig, Marker, Target};

use crate::common::{kpack_pack, wheel_member};
use crate::wheel::{file_names, original_bundles, python, split_ok, Bundles};

const HIP_QUANT: &str = "hip_quant-0.4.7-cp311-cp311-win_amd64.whl";
/// Where the wheel's DLLs are, and where they install below
/// site-packages.
const DATA: &str = "hip_quant-0.4.7.data/purelib/";

fn hip_quant() -> PathBuf {
    fixtures().join("pypi").join(HIP_QUANT)
}

/// Checks with llvm-readobj (which must warn of nothing) that the split
/// image at `path` has the marker section and a `DIR64` base relocation
/// at each wrapper's pointer.
pub(crate) fn assert_readobj_sees_the_split(path: &Path) {
    let image = Image::read(path);
    image.section(MARKER_SECTION);
    let data = fs_err::read(path).unwrap();
    let split = SplitPe::parse(&data).unwrap().unwrap();
    assert!(!split.wrappers.is_empty());
    let dir64 = image.dir64();
    for wrapper in &split.wrappers {
        assert!(
            dir64.contains(&(u64::from(wrapper.rva) + 8)),
            "{}: no DIR64 relocation at the pointer of the wrapper at {:#x}",
            path.display(),
            wrapper.rva
        );
    }
}

/// pip (the test environment's) installing `wheels` for 64-bit Windows
/// into `target`, as `pip install --target` does on Windows.
fn pip_install_for_windows(target: &Path, wheels: &[PathBuf]) {
    run(python()
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
            "--no-index",
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            "win_amd64",
            "--python-version",
            "3.11",
            "--implementation",
            "cp",
            "--target",
        ])
        .arg(target)
        .args(wheels));
}

#[test]
fn the_hip_quant_wheel_splits_into_windows_host_and_device_wheels_that_load_the_original_code() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    split_ok(&hip_quant(), &out);
    let bundles: Bundles = original_bundles(&hip_quant())
        .into_iter()
        .map(|(member, code)| (member.strip_prefix(DATA).unwrap().to_owned(), code))
        .collect();
    assert_eq!(
        bundles.keys().collect::<Vec<_>>(),
        [
            "hip_quant/hip_quantize.dll",
            "hip_quant/hip_quantize_rocm721.dll"
        ]
    );
    let processors: BTreeSet<String> = bundles
        .values()
        .flatten()
        .flat_map(|bundle| bundle.keys().map(|t| t.processor().to_owned()))
        .collect();
    assert_eq!(processors.len(), 8);
    let mut expected: BTreeSet<String> = processors
        .iter()
        .map(|p| format!("hip_quant_device_{p}-0.4.7-cp311-cp311-win_amd64.whl"))
        .collect();
    expected.insert(HIP_QUANT.to_owned());
    assert_eq!(file_names(&out), expected);

    let site = work.path().join("site");
    let wheels: Vec<PathBuf> = expected.iter().map(|name| out.join(name)).collect();
    pip_install_for_windows(&site, &wheels);

    let loader = Loader::new(LoaderConfig::default());
    let mut loaded = 0;
    for (member, originals) in &bundles {
        let path = site.join(member);
        let data = fs_err::read(&path).unwrap();
        assert!(
            matches!(
                FatImage::parse(&data),
                Err(ImageError::Pe(PeError::AlreadySplit))
            ),
            "{member} is not split"
        );
        assert!(
            !data.windows(24).any(|w| w == b"__CLANG_OFFLOAD_BUNDLE__"),
            "{member} holds a bundle"
        );
        assert_readobj_sees_the_split(&path);
        let split = SplitPe::parse(&data).unwrap().unwrap();
        let marker = Marker::parse(split.marker_bytes).unwrap();
        for wrapper in &split.wrappers {
            for (target, bytes) in &originals[wrapper.bundle as usize] {
                let located = loader
                    .locate(&marker, &path, wrapper.bundle, std::slice::from_ref(target))
                    .unwrap_or_else(|e| panic!("{member} for {target}: {e}"));
                let code = located.kernel().unwrap().bytes().unwrap();
                assert!(
                    code[..] == bytes[..],
                    "{member} {target}: not the original code object"
                );
                loaded += 1;
            }
        }
    }
    assert_eq!(loaded, 4 + 8);

    let verified = run(kpack_pack().arg("verify").arg(site.join("hip_quant")));
    assert!(
        verified.contains(
            "2 split binaries, 2 wrappers, 8 targets: 12 code objects loaded, 0 problems"
        ),
        "{verified}"
    );
}

#[test]
fn malformed_images_are_refused_by_name_and_nothing_is_written() {
    let work = tempfile::tempdir().unwrap();
    for case in malformed() {
        let input = work.path().join("bad.dll");
        fs_err::write(&input, &case.bytes).unwrap();
        let out = work.path().join("out");
        let result = kpack_pack()
            .arg("split")
            .arg(&input)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(!result.status.success(), "{}: split", case.what);
        assert!(
            stderr.contains(case.says) && stderr.contains("bad.dll"),
            "{}: {stderr}",
            case.what
        );
        assert!(!out.exists(), "{}: wrote {}", case.what, out.display());
    }
}

#[test]
fn a_signed_image_splits_unsigned_and_the_split_says_so() {
    let work = tempfile::tempdir().unwrap();
    let bundle = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a", &[1u8; 5000][..])]);
    let mut dll = SyntheticDll::new(vec![bundle.len() as u64]);
    dll.certificate = Some(vec![0x30; 2048]);
    let tree = work.path().join("tree");
    fs_err::create_dir_all(tree.join("bin")).unwrap();
    fs_err::write(tree.join("bin/signed.dll"), dll.bytes(&[bundle])).unwrap();

    let single = run(kpack_pack()
        .arg("split")
        .arg(tree.join("bin/signed.dll"))
        .arg("-o")
        .arg(work.path().join("one")));
    let whole = run(kpack_pack()
        .arg("split")
        .arg(&tree)
        .arg("-o")
        .arg(work.path().join("tree.out")));
    for (stdout, host) in [
        (single, "one/signed.dll"),
        (whole, "tree.out/bin/signed.dll"),
    ] {
        let host = work.path().join(host);
        let note = format!(
            "note: {}: its Authenticode signature was removed",
            host.display()
        );
        assert!(stdout.contains(&note), "{stdout}");
        let data = fs_err::read(&host).unwrap();
        let image = PeFile64::parse(&data[..]).unwrap();
        assert!(image
            .data_directory(IMAGE_DIRECTORY_ENTRY_SECURITY)
            .is_none());
        Image::read(&host);
    }
}

#[test]
fn a_split_sdk_dll_materializes_into_bundles_clang_offload_bundler_reads() {
    let work = tempfile::tempdir().unwrap();
    let original = wheel_member(
        &hip_quant(),
        &format!("{DATA}hip_quant/hip_quantize.dll"),
        &work.path().join("hip_quantize.dll"),
    );
    let code = crate::common::code_by_bundle(&fs_err::read(&original).unwrap());
    let split = work.path().join("split");
    run(kpack_pack()
        .arg("split")
        .arg(&original)
        .arg("-o")
        .arg(&split));

    for targets in ["gfx942", "gfx90a,gfx942,gfx1200,gfx1201"] {
        let fat = work.path().join(format!("fat-{targets}.dll"));
        run(kpack_pack()
            .arg("materialize")
            .arg(split.join("hip_quantize.dll"))
            .args(["--targets", targets, "-o"])
            .arg(&fat));
        Image::read(&fat);
        let data = fs_err::read(&fat).unwrap();
        let Some(FatImage::Pe(image)) = FatImage::parse(&data).unwrap() else {
            panic!("{targets}: not a fat PE image");
        };
        assert_eq!(image.wrappers.len(), 1);
        let bundles = kpack_test_support::offload_bundler::bundles(&fat);
        assert_eq!(bundles.len(), 1, "{targets}");
        let mut expected: BTreeSet<String> = targets
            .split(',')
            .map(|t| format!("hipv4-amdgcn-amd-amdhsa--{t}"))
            .collect();
        expected.insert("host-x86_64-unknown-linux-gnu-".to_owned());
        assert_eq!(bundles[0].triples(), expected, "{targets}");
        for target in targets.split(',') {
            let unbundled = bundles[0].unbundle(&format!("hipv4-amdgcn-amd-amdhsa--{target}"));
            let original = &code[0][&Target::parse(target).unwrap()];
            assert!(
                unbundled == *original,
                "{targets}: {target} differs from the original"
            );
        }
    }
}

#[test]
fn a_tree_of_pe_and_elf_binaries_splits_both_and_compressed_bundles_materialize_in_a_new_section() {
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("tree");
    fs_err::create_dir_all(tree.join("bin")).unwrap();
    fs_err::create_dir_all(tree.join("lib")).unwrap();
    let gfx90a = vec![0x11u8; 40_000];
    let gfx1100 = vec![0x22u8; 30_000];
    let inner = offload_bundle(&[
        ("hipv4-amdgcn-amd-amdhsa--gfx90a", &gfx90a[..]),
        ("hipv4-amdgcn-amd-amdhsa--gfx1100", &gfx1100[..]),
    ]);
    let compressed = ccob(&inner, 3, CcobMethod::Zstd);
    let dll = SyntheticDll::new(vec![compressed.len() as u64]);
    fs_err::write(tree.join("bin/compressed.dll"), dll.bytes(&[compressed])).unwrap();
    FatLibrary::new(inner.clone())
        .aligned(4096)
        .compile(&tree.join("lib/libfat.so"));

    let out = work.path().join("out");
    let stdout = run(kpack_pack().arg("split").arg(&tree).arg("-o").arg(&out));
    assert!(stdout.contains("binaries split 2"), "{stdout}");
    let verified = run(kpack_pack().arg("verify").arg(&out));
    assert!(
        verified
            .contains("2 split binaries, 2 wrappers, 2 targets: 4 code objects loaded, 0 problems"),
        "{verified}"
    );
    assert_readobj_sees_the_split(&out.join("bin/compressed.dll"));

    let fat = work.path().join("fat.dll");
    run(kpack_pack()
        .arg("materialize")
        .arg(out.join("bin/compressed.dll"))
        .args(["--targets", "gfx90a,gfx1100", "-o"])
        .arg(&fat));
    Image::read(&fat);
    let data = fs_err::read(&fat).unwrap();
    let Some(FatImage::Pe(image)) = FatImage::parse(&data).unwrap() else {
        panic!("not a fat PE image");
    };
    let split = fs_err::read(out.join("bin/compressed.dll")).unwrap();
    let split = SplitPe::parse(&split).unwrap().unwrap();
    assert!(
        image.fatbin.rva > split.marker.rva,
        "the uncompressed bundle outgrows the compressed one's memory: a new .hip_fat after the marker"
    );
    let bundles = kpack_test_support::offload_bundler::bundles(&fat);
    assert_eq!(
        bundles[0].unbundle("hipv4-amdgcn-amd-amdhsa--gfx90a"),
        gfx90a
    );
    assert_eq!(
        bundles[0].unbundle("hipv4-amdgcn-amd-amdhsa--gfx1100"),
        gfx1100
    );
}

#[test]
fn splitting_an_image_twice_gives_the_same_bytes() {
    let work = tempfile::tempdir().unwrap();
    let input = wheel_member(
        &hip_quant(),
        &format!("{DATA}hip_quant/hip_quantize_rocm721.dll"),
        &work.path().join("hip_quantize_rocm721.dll"),
    );
    let outputs: Vec<BTreeMap<String, String>> = (0..2)
        .map(|n| {
            let out = work.path().join(format!("out{n}"));
            run(kpack_pack().arg("split").arg(&input).arg("-o").arg(&out));
            kpack_test_support::chain::snapshot(&out)
        })
        .collect();
    assert_eq!(outputs[0], outputs[1]);
}

/// Each wrapper's registration, as the stand-in under wine saw it: the
/// wrapper's magic, the RVA its relocated pointer lands on, the code
/// object loaded for `arch`.
fn registered(dir: &Path, dll: &Path, arch: &str) -> Vec<(u32, u64, Vec<u8>)> {
    windows::standin_dll(dir);
    run_with_standin(load_dll_command(dir, dll), arch)
        .into_iter()
        .map(|r| {
            let code = r
                .code
                .unwrap_or_else(|e| panic!("{}: error {e}", dll.display()));
            (
                r.magic,
                r.pointer_rva.expect("a pointer into the DLL"),
                code,
            )
        })
        .collect()
}

#[test]
fn a_mingw_dll_registers_its_bundles_split_through_rocm_kpack_dll_and_again_materialized() {
    let work = tempfile::tempdir().unwrap();
    let code = |bundle: u8, target: &str| format!("bundle {bundle} for {target}").into_bytes();
    let targets = ["gfx90a", "gfx1100"];
    let bundles: Vec<Vec<u8>> = (0..2)
        .map(|n| {
            let triples: Vec<(String, Vec<u8>)> = targets
                .iter()
                .map(|t| (format!("hipv4-amdgcn-amd-amdhsa--{t}"), code(n, t)))
                .collect();
            let entries: Vec<(&str, &[u8])> =
                triples.iter().map(|(t, c)| (t.as_str(), &c[..])).collect();
            clang_bundle(&entries)
        })
        .collect();
    // Three wrappers, out of the bundles' order.
    let wrappers = [1usize, 0, 1];
    let mut dll = windows::FatDll::new().registered();
    for bundle in &bundles {
        dll = dll.bundle(bundle.clone());
    }
    for &index in &wrappers {
        dll = dll.wrapper(index);
    }
    let original_dir = work.path().join("original");
    fs_err::create_dir_all(&original_dir).unwrap();
    let original = original_dir.join("fat.dll");
    dll.compile(&original);
    let data = fs_err::read(&original).unwrap();
    let fat = FatPe::parse(&data).unwrap().unwrap();
    let bundle_rva = |index: usize| u64::from(fat.fatbin.rva) + fat.bundles[index].offset as u64;

    for arch in targets {
        let loaded = registered(&original_dir, &original, arch);
        assert_eq!(loaded.len(), wrappers.len());
        for ((magic, rva, bytes), &index) in loaded.iter().zip(&wrappers) {
            assert_eq!(*magic, HIPF_MAGIC);
            assert_eq!(
                *rva,
                bundle_rva(index),
                "the original's wrapper lands on its bundle"
            );
            assert_eq!(bytes, &code(index as u8, arch));
        }
    }

    let split_dir = work.path().join("split");
    run(kpack_pack()
        .arg("split")
        .arg(&original)
        .arg("-o")
        .arg(&split_dir));
    let split = split_dir.join("fat.dll");
    assert_readobj_sees_the_split(&split);
    let split_data = fs_err::read(&split).unwrap();
    let marker_rva = u64::from(SplitPe::parse(&split_data).unwrap().unwrap().marker.rva);
    for arch in targets {
        let loaded = registered(&split_dir, &split, arch);
        assert_eq!(loaded.len(), wrappers.len());
        for ((magic, rva, bytes), &index) in loaded.iter().zip(&wrappers) {
            assert_eq!(*magic, HIPK_MAGIC);
            assert_eq!(*rva, marker_rva, "the split wrapper lands on the marker");
            assert_eq!(bytes, &code(index as u8, arch), "through rocm_kpack.dll");
        }
    }

    let materialized_dir = work.path().join("materialized");
    fs_err::create_dir_all(&materialized_dir).unwrap();
    let materialized = materialized_dir.join("fat.dll");
    run(kpack_pack()
        .arg("materialize")
        .arg(&split)
        .args(["--targets", "gfx90a", "-o"])
        .arg(&materialized));
    Image::read(&materialized);
    let fat_again = fs_err::read(&materialized).unwrap();
    let fat_again = FatPe::parse(&fat_again).unwrap().unwrap();
    let loaded = registered(&materialized_dir, &materialized, "gfx90a");
    for (((magic, rva, bytes), &index), wrapper) in
        loaded.iter().zip(&wrappers).zip(&fat_again.wrappers)
    {
        assert_eq!(*magic, HIPF_MAGIC);
        let bundle = &fat_again.bundles[wrapper.bundle];
        assert_eq!(*rva, u64::from(fat_again.fatbin.rva) + bundle.offset as u64);
        assert_eq!(bytes, &code(index as u8, "gfx90a"));
    }
    let unbundled: Vec<Vec<u8>> = kpack_test_support::offload_bundler::bundles(&materialized)
        .iter()
        .map(|bundle| bundle.unbundle("hipv4-amdgcn-amd-amdhsa--gfx90a"))
        .collect();
    assert_eq!(unbundled, [code(0, "gfx90a"), code(1, "gfx90a")]);
}

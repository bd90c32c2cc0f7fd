//! PE/COFF images: AMD's HIP SDK DLLs from the `hip_quant` wheel read and
//! split, checked by `llvm-readobj`.

use std::io::Read;
use std::path::Path;

use kpack_binary::image::{split_image, FatImage};
use kpack_binary::pe::{FatPe, SplitPe, MARKER_SECTION};
use kpack_test_support::{fixtures, tool};

const WHEEL: &str = "pypi/hip_quant-0.4.7-cp311-cp311-win_amd64.whl";
const DLLS: [&str; 2] = [
    "hip_quant-0.4.7.data/purelib/hip_quant/hip_quantize.dll",
    "hip_quant-0.4.7.data/purelib/hip_quant/hip_quantize_rocm721.dll",
];

/// The wheel member `name`'s bytes.
fn member(name: &str) -> Vec<u8> {
    let file = fs_err::File::open(fixtures().join(WHEEL)).unwrap();
    let mut wheel = zip::ZipArchive::new(file).unwrap();
    let mut bytes = Vec::new();
    wheel
        .by_name(name)
        .unwrap()
        .read_to_end(&mut bytes)
        .unwrap();
    bytes
}

fn targets(fat: &FatPe<'_>) -> Vec<String> {
    fat.bundles
        .iter()
        .flat_map(|b| &b.entries)
        .map(|e| e.target.to_string())
        .collect()
}

#[test]
fn the_sdk_dlls_have_one_wrapper_pointing_at_their_one_bundle() {
    let first = member(DLLS[0]);
    let fat = FatPe::parse(&first).unwrap().unwrap();
    assert_eq!(fat.bundles.len(), 1);
    assert_eq!(fat.wrappers.len(), 1);
    assert_eq!(fat.wrappers[0].bundle, 0);
    assert_eq!(fat.wrappers[0].target_rva, fat.fatbin.rva);
    assert_eq!(targets(&fat), ["gfx1200", "gfx1201", "gfx90a", "gfx942"]);

    let second = member(DLLS[1]);
    let fat = FatPe::parse(&second).unwrap().unwrap();
    assert_eq!(fat.wrappers.len(), 1);
    let mut found = targets(&fat);
    found.sort();
    assert_eq!(
        found,
        ["gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1200", "gfx1201", "gfx90a", "gfx942"]
    );
}

/// `llvm-readobj-15 --sections --coff-basereloc` of `path`: its output,
/// after checking it warned of nothing.
fn readobj(path: &Path) -> String {
    let out = tool("llvm-readobj-15")
        .args(["--sections", "--coff-basereloc"])
        .arg(path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "{}: {stderr}",
        path.display()
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_split_sdk_dll_holds_no_device_code_and_reads_cleanly() {
    let work = tempfile::tempdir().unwrap();
    for name in DLLS {
        let data = member(name);
        let image = FatImage::parse(&data).unwrap().unwrap();
        let (host, layout) = split_image(&data, &image, b"marker bytes").unwrap();
        let (FatImage::Pe(fat), kpack_binary::image::SplitLayout::Pe(layout)) = (image, layout)
        else {
            panic!("{name} is not read as a PE image");
        };
        assert_eq!(layout.removed, fat.fatbin.size);
        assert_eq!(host.len() as u64, data.len() as u64 - fat.fatbin.size + 512);
        assert!(!host.windows(24).any(|w| w == b"__CLANG_OFFLOAD_BUNDLE__"));

        let split = SplitPe::parse(&host).unwrap().unwrap();
        assert_eq!(split.marker_bytes, b"marker bytes");
        assert_eq!(split.marker.rva, layout.marker_rva);
        assert_eq!(split.wrappers.len(), 1);
        assert_eq!(split.wrappers[0].bundle, 0);
        assert_eq!(split.wrappers[0].rva, fat.wrappers[0].rva);

        let path = work.path().join(Path::new(name).file_name().unwrap());
        fs_err::write(&path, &host).unwrap();
        let listing = readobj(&path);
        assert!(
            listing.contains(&format!("Name: {MARKER_SECTION}")),
            "{listing}"
        );
        let pointer = format!("Type: DIR64\n    Address: {:#X}", split.wrappers[0].rva + 8)
            .replace("0X", "0x");
        assert!(listing.contains(&pointer), "no {pointer:?} in {listing}");
    }
}

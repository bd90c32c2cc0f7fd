//! PE/COFF images: AMD's HIP SDK DLLs from the `hip_quant` wheel and
//! images the test fixtures build read and split, checked by
//! `llvm-readobj` and pefile.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use kpack_binary::bundle::build::offload_bundle;
use kpack_binary::image::{split_image, FatImage, MaterializePlan, SplitImage, SplitLayout};
use kpack_binary::pe::build::{malformed, SyntheticDll};
use kpack_binary::pe::{FatPe, SplitLayout as PeLayout, SplitPe, MARKER_SECTION};
use kpack_binary::ImageError;
use kpack_test_support::windows::Image;
use kpack_test_support::{fixtures, tool};
use object::pe::{
    ImageDebugDirectory, IMAGE_DIRECTORY_ENTRY_BASERELOC, IMAGE_DIRECTORY_ENTRY_DEBUG,
    IMAGE_DIRECTORY_ENTRY_SECURITY,
};
use object::read::pe::PeFile64;
use object::LittleEndian;

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

/// Reads the image at `path` with llvm-readobj (which must warn of
/// nothing) and checks a `DIR64` base relocation covers the pointer of
/// each wrapper at `wrapper_rvas`.
fn assert_readobj_relocates(path: &Path, wrapper_rvas: impl IntoIterator<Item = u32>) -> Image {
    let image = Image::read(path);
    let dir64 = image.dir64();
    for rva in wrapper_rvas {
        let pointer = u64::from(rva) + 8;
        assert!(
            dir64.contains(&pointer),
            "{}: no DIR64 relocation at {pointer:#x}: {dir64:x?}",
            path.display()
        );
    }
    image
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
        let image = assert_readobj_relocates(&path, split.wrappers.iter().map(|w| w.rva));
        image.section(MARKER_SECTION);
    }
}

/// Three bundles of distinct code for two targets each.
fn bundles() -> Vec<Vec<u8>> {
    (0..3u8)
        .map(|n| {
            let a = vec![n + 1; 5000 + usize::from(n) * 3000];
            let b = vec![n + 101; 7000];
            offload_bundle(&[
                ("hipv4-amdgcn-amd-amdhsa--gfx90a", &a),
                ("hipv4-amdgcn-amd-amdhsa--gfx1100", &b),
            ])
        })
        .collect()
}

fn dll(wrappers: Vec<usize>) -> (SyntheticDll, Vec<Vec<u8>>) {
    let bundles = bundles();
    let mut dll = SyntheticDll::new(bundles.iter().map(|b| b.len() as u64).collect());
    dll.wrappers = wrappers;
    (dll, bundles)
}

/// Checks that the debug directory's CodeView record of the image
/// `data` is where its file offset says, the same bytes as at its RVA.
fn assert_debug_data_where_it_says(data: &[u8]) {
    let pe = PeFile64::parse(data).unwrap();
    let directory = pe.data_directory(IMAGE_DIRECTORY_ENTRY_DEBUG).unwrap();
    let sections = pe.section_table();
    let (at, _) = sections
        .pe_file_range_at(directory.virtual_address.get(LittleEndian))
        .unwrap();
    let (entry, _) = object::pod::from_bytes::<ImageDebugDirectory>(&data[at as usize..]).unwrap();
    let len = entry.size_of_data.get(LittleEndian) as usize;
    let by_offset = entry.pointer_to_raw_data.get(LittleEndian) as usize;
    let (by_rva, _) = sections
        .pe_file_range_at(entry.address_of_raw_data.get(LittleEndian))
        .unwrap();
    let record = &data[by_offset..by_offset + len];
    assert!(record.starts_with(b"RSDS"), "{record:?}");
    assert_eq!(record, &data[by_rva as usize..by_rva as usize + len]);
}

/// Splits `data`, checks the result with our reader and llvm-readobj, and
/// returns it with its layout.
fn split_checked(data: &[u8]) -> (Vec<u8>, PeLayout) {
    let image = FatImage::parse(data).unwrap().unwrap();
    let FatImage::Pe(fat) = &image else {
        panic!("not read as a PE image")
    };
    let wrapper_bundles: Vec<u32> = fat.wrappers.iter().map(|w| w.bundle as u32).collect();
    let (host, layout) = split_image(data, &image, b"marker").unwrap();
    let SplitLayout::Pe(layout) = layout else {
        panic!("not split as a PE image")
    };
    let split = SplitPe::parse(&host).unwrap().unwrap();
    assert_eq!(split.marker_bytes, b"marker");
    let stored: Vec<u32> = split.wrappers.iter().map(|w| w.bundle).collect();
    assert_eq!(stored, wrapper_bundles);
    let work = tempfile::tempdir().unwrap();
    let path = work.path().join("split.dll");
    fs_err::write(&path, &host).unwrap();
    assert_readobj_relocates(&path, split.wrappers.iter().map(|w| w.rva));
    assert_debug_data_where_it_says(&host);
    (host, layout)
}

#[test]
fn wrappers_find_their_bundles_by_pointer_not_by_position() {
    let (dll, bundles) = dll(vec![2, 0, 1, 0]);
    let data = dll.bytes(&bundles);
    let fat = FatPe::parse(&data).unwrap().unwrap();
    let found: Vec<usize> = fat.wrappers.iter().map(|w| w.bundle).collect();
    assert_eq!(found, [2, 0, 1, 0]);
    for (bundle, original) in fat.bundles.iter().zip(&bundles) {
        assert_eq!(bundle.bytes(), &original[..]);
    }
    let (host, layout) = split_checked(&data);
    assert!(!layout.grew_headers && !layout.removed_signature);
    assert_eq!(host.len() as u64, data.len() as u64 - fat.fatbin.size + 512);
}

/// Whether pefile, an independent reader, finds the checksum of the image
/// at `path` right.
fn pefile_accepts_checksum(path: &Path) -> bool {
    let out = tool("python")
        .args([
            "-c",
            "import pefile, sys; pe = pefile.PE(sys.argv[1]); \
             print(pe.OPTIONAL_HEADER.CheckSum != 0 and pe.verify_checksum())",
        ])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim() == "True"
}

#[test]
fn a_split_recomputes_the_checksum_where_there_was_one() {
    let (mut dll, bundles) = dll(vec![0, 1, 2]);
    dll.checksum = true;
    let data = dll.bytes(&bundles);
    let work = tempfile::tempdir().unwrap();
    let (input, output) = (work.path().join("in.dll"), work.path().join("out.dll"));
    fs_err::write(&input, &data).unwrap();
    assert!(
        pefile_accepts_checksum(&input),
        "the built image's checksum is wrong"
    );
    let (host, _) = split_checked(&data);
    fs_err::write(&output, &host).unwrap();
    assert!(
        pefile_accepts_checksum(&output),
        "the split image's checksum is wrong"
    );
}

#[test]
fn a_split_removes_the_signature_and_says_so() {
    let (mut dll, bundles) = dll(vec![0, 1, 2]);
    dll.certificate = Some(vec![0x5a; 1024]);
    let data = dll.bytes(&bundles);
    let fat = FatPe::parse(&data).unwrap().unwrap();
    let (host, layout) = split_checked(&data);
    assert!(layout.removed_signature);
    assert_eq!(
        host.len() as u64,
        data.len() as u64 - fat.fatbin.size + 512 - 1024
    );
    assert!(!host.windows(1024).any(|w| w.iter().all(|&b| b == 0x5a)));
    let pe = PeFile64::parse(&host[..]).unwrap();
    assert!(pe.data_directory(IMAGE_DIRECTORY_ENTRY_SECURITY).is_none());
}

#[test]
fn a_section_table_without_a_free_slot_grows_the_headers() {
    let (mut dll, bundles) = dll(vec![1, 0, 2]);
    dll.full_section_table = true;
    let data = dll.bytes(&bundles);
    let (host, layout) = split_checked(&data);
    assert!(layout.grew_headers);
    let pe = PeFile64::parse(&host[..]).unwrap();
    assert_eq!(
        pe.nt_headers()
            .optional_header
            .size_of_headers
            .get(LittleEndian),
        0x600
    );
    let text = pe.section_table().section(object::SectionIndex(1)).unwrap();
    assert_eq!(text.pointer_to_raw_data.get(LittleEndian), 0x600);
}

#[test]
fn a_fatbin_last_in_the_image_splits_too() {
    let (mut dll, bundles) = dll(vec![0, 2]);
    dll.fatbin_last = true;
    split_checked(&dll.bytes(&bundles));
}

/// Makes the split image `host` fat with bundle index N's bundle
/// `bundles[N]`; checks every wrapper points at its bundle, the image
/// reads as fat (not split) and llvm-readobj reads it cleanly.
fn materialize_checked(host: &[u8], bundles: &BTreeMap<u32, Vec<u8>>) -> Vec<u8> {
    let split = SplitImage::parse(host).unwrap().unwrap();
    let stored = split.wrapper_bundles();
    let lens = bundles.iter().map(|(&i, b)| (i, b.len() as u64)).collect();
    let plan = MaterializePlan::new(host, &split, &lens).unwrap();
    let mut out = Vec::new();
    plan.write(&mut std::io::Cursor::new(host), &mut out, |index, out| {
        out.write_all(&bundles[&index])
    })
    .unwrap();
    assert_eq!(out.len() as u64, plan.output_len(host.len() as u64));
    plan.patch(&mut out, &split).unwrap();

    assert!(SplitPe::parse(&out).unwrap().is_none(), "still split");
    let fat = FatPe::parse(&out).unwrap().unwrap();
    let work = tempfile::tempdir().unwrap();
    let path = work.path().join("fat.dll");
    fs_err::write(&path, &out).unwrap();
    assert_readobj_relocates(&path, fat.wrappers.iter().map(|w| w.rva));
    assert_debug_data_where_it_says(&out);
    for (wrapper, &index) in fat.wrappers.iter().zip(&stored) {
        assert_eq!(fat.bundles[wrapper.bundle].bytes(), &bundles[&index][..]);
    }
    out
}

#[test]
fn a_materialized_image_holds_its_bundles_where_the_split_took_them() {
    let (dll, bundles) = dll(vec![2, 0, 1, 0]);
    let data = dll.bytes(&bundles);
    let original = FatPe::parse(&data).unwrap().unwrap();
    let (host, _) = split_checked(&data);
    let by_index = bundles
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, b)| (i as u32, b))
        .collect();
    let fat_again = materialize_checked(&host, &by_index);
    let fat = FatPe::parse(&fat_again).unwrap().unwrap();
    assert_eq!(fat.fatbin, original.fatbin);
    assert_eq!(fat_again.len(), data.len() + 512);
    // A split of it writes a marker of its own.
    split_checked(&fat_again);
}

#[test]
fn bundles_outgrowing_the_split_section_go_into_a_new_one() {
    let (dll, bundles) = dll(vec![1, 0]);
    let data = dll.bytes(&bundles);
    let original = FatPe::parse(&data).unwrap().unwrap();
    let (host, _) = split_checked(&data);
    let big = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a", &vec![7u8; 64 * 1024])]);
    let grown: BTreeMap<u32, Vec<u8>> = [(0, big.clone()), (1, big)].into();
    let fat_again = materialize_checked(&host, &grown);
    let fat = FatPe::parse(&fat_again).unwrap().unwrap();
    assert!(fat.fatbin.rva > original.fatbin.rva);
    assert_ne!(fat.fatbin.index, original.fatbin.index);
    split_checked(&fat_again);
}

#[test]
fn malformed_images_get_errors_saying_what_is_wrong() {
    for case in malformed() {
        let error = match FatImage::parse(&case.bytes) {
            Err(error) => error,
            Ok(fat) => panic!("{}: read as {fat:?}", case.what),
        };
        let message = error.to_string();
        assert!(message.contains(case.says), "{}: {message}", case.what);
    }
}

#[test]
fn the_fuzzers_findings_read_as_errors_or_images_without_a_panic() {
    let dir = kpack_test_support::workspace().join("fuzz/regressions/pe");
    let mut read = 0;
    for entry in fs_err::read_dir(&dir).unwrap() {
        let data = fs_err::read(entry.unwrap().path()).unwrap();
        if let Ok(Some(fat)) = FatImage::parse(&data) {
            let _ = split_image(&data, &fat, b"marker");
        }
        let _ = SplitImage::parse(&data);
        read += 1;
    }
    assert!(read > 0, "no findings in {}", dir.display());
}

/// Where the `DIR64` base relocation of the 8 bytes at `rva` is in the
/// image `data`: the file offset of its 2-byte entry.
fn dir64_entry(data: &[u8], rva: u32) -> usize {
    let pe = PeFile64::parse(data).unwrap();
    let directory = pe.data_directory(IMAGE_DIRECTORY_ENTRY_BASERELOC).unwrap();
    let (table, size) = directory.file_range(&pe.section_table()).unwrap();
    let (mut at, end) = (table as usize, (table + size) as usize);
    let word = |at: usize| u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
    while at < end {
        let (page, block_size) = (word(at), word(at + 4) as usize);
        for entry in (at + 8..at + block_size).step_by(2) {
            let value = u16::from_le_bytes([data[entry], data[entry + 1]]);
            if value >> 12 == 10 && page + u32::from(value & 0xfff) == rva {
                return entry;
            }
        }
        at += block_size;
    }
    panic!("no DIR64 relocation at RVA {rva:#x}")
}

/// Materializes the split image `host` with `bundles`, by index.
fn materialize(host: &[u8], bundles: &[Vec<u8>]) -> Result<Vec<u8>, ImageError> {
    let split = SplitImage::parse(host)?.unwrap();
    let lens = (0..bundles.len() as u32)
        .map(|i| (i, bundles[i as usize].len() as u64))
        .collect();
    let plan = MaterializePlan::new(host, &split, &lens)?;
    let mut out = Vec::new();
    plan.write(&mut std::io::Cursor::new(host), &mut out, |index, out| {
        out.write_all(&bundles[index as usize])
    })
    .unwrap();
    plan.patch(&mut out, &split)?;
    Ok(out)
}

/// Why materializing the split image `host` with `bundles` fails.
fn refusal(host: &[u8], bundles: &[Vec<u8>]) -> String {
    match materialize(host, bundles) {
        Err(error) => error.to_string(),
        Ok(fat) => panic!(
            "materialized into an image a split refuses: {:?}",
            FatPe::parse(&fat).err()
        ),
    }
}

#[test]
fn a_wrapper_pointer_without_its_base_relocation_gets_one_when_materialized() {
    let (dll, bundles) = dll(vec![0, 1, 2]);
    let (host, _) = split_checked(&dll.bytes(&bundles));
    let split = SplitPe::parse(&host).unwrap().unwrap();
    let wrapper = split.wrappers[1].rva;
    // Wrapper 1's pointer without its relocation (the entry made
    // ABSOLUTE, padding), as fuzzed split images had it: its fat image
    // would point at its bundle only at the preferred base.
    let mut unrelocated = host.clone();
    let entry = dir64_entry(&host, wrapper + 8);
    unrelocated[entry + 1] &= 0x0f;
    // An image without a relocation table at all.
    let mut tableless = host.clone();
    let nt = u32::from_le_bytes(host[0x3c..0x40].try_into().unwrap()) as usize;
    // The signature, the file header, the optional header up to its
    // directories, then 8 bytes a directory.
    let directory = nt + 4 + 20 + 112 + 8 * IMAGE_DIRECTORY_ENTRY_BASERELOC;
    tableless[directory..directory + 8].fill(0);
    let by_index: BTreeMap<u32, Vec<u8>> = bundles
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, b)| (i as u32, b))
        .collect();
    let big = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a", &vec![7u8; 64 * 1024])]);
    let grown: BTreeMap<u32, Vec<u8>> = (0..3).map(|i| (i, big.clone())).collect();
    for (what, image) in [("unrelocated", &unrelocated), ("tableless", &tableless)] {
        // In place and in a new `.hip_fat`: llvm-readobj finds a DIR64
        // relocation for every wrapper, and a split takes the image.
        for bundles in [&by_index, &grown] {
            let fat = materialize_checked(image, bundles);
            let pe = PeFile64::parse(&fat[..]).unwrap();
            let relocs = pe.section_table().iter();
            let relocs = relocs.filter(|s| s.raw_name() == b".reloc").count();
            assert_eq!(relocs, 1, "{what}: one section named .reloc");
            split_checked(&fat);
        }
    }

    // Data directories that end before the base relocation table's: no
    // table can be added, so refused (as fuzzed images had it).
    let mut short = host.clone();
    short[nt + 4 + 20 + 108..nt + 4 + 20 + 112].copy_from_slice(&5u32.to_le_bytes());
    assert_eq!(
        refusal(&short, &bundles),
        "unsupported PE image: a wrapper's pointer has no base relocation, and the image's data directories end before the base relocation table's"
    );
    // Wrappers with no file data (the loader would zero them): no
    // wrapper to make fat, refused rather than written without bundles.
    let mut zeroed = host.clone();
    let wrappers = PeFile64::parse(&host[..]).unwrap();
    let table = wrappers.section_table();
    let index = table
        .iter()
        .position(|s| s.raw_name() == b".hipFatB")
        .unwrap();
    let raw_size = nt + 4 + 20 + 240 + index * 40 + 16;
    zeroed[raw_size..raw_size + 4].fill(0);
    assert_eq!(
        refusal(&zeroed, &bundles),
        "malformed PE image: .hipFatB holds no wrapper in the file"
    );
    // The base relocation table moved into `.hip_fat`, which has no file
    // data in a split image (the bundles would go over it): refused.
    let mut moved = host.clone();
    moved[directory..directory + 4].copy_from_slice(&split.fatbin.rva.to_le_bytes());
    let error = refusal(&moved, &bundles);
    assert!(error.contains("is in no section's file data"), "{error}");
}

//! Binaries with very many wrappers and bundles: each wrapper's bundle is
//! found by binary search over the bundles' offsets, in ELF files and PE
//! images alike (timed by `benches/parse.rs`); the fuzz seeds of a bundle
//! of many entries and of a compressed bundle out of order.

use kpack_binary::bundle::build::{many_wrappers_assembly, small_bundles};
use kpack_binary::bundle::parse_fatbin;
use kpack_binary::elf::FatElf;
use kpack_binary::pe::build::SyntheticDll;
use kpack_binary::pe::FatPe;
use kpack_binary::BundleError;
use kpack_test_support::{run, tool};

const BUNDLES: usize = 5_000;
const WRAPPERS: usize = 20_000;

#[test]
fn every_wrapper_of_an_elf_file_with_many_finds_its_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let source = many_wrappers_assembly(dir.path(), BUNDLES, WRAPPERS).unwrap();
    let library = dir.path().join("libmany.so");
    run(tool("cc")
        .args(["-shared", "-o"])
        .arg(&library)
        .arg(&source));
    let data = fs_err::read(&library).unwrap();
    let fat = FatElf::parse(&data).unwrap().unwrap();
    assert_eq!(fat.bundles.len(), BUNDLES);
    assert_eq!(fat.wrappers.len(), WRAPPERS);
    for (index, wrapper) in fat.wrappers.iter().enumerate() {
        assert_eq!(wrapper.bundle, index % BUNDLES, "wrapper {index}");
        let offset = wrapper.target_address - fat.fatbin.address;
        assert_eq!(fat.bundles[wrapper.bundle].offset as u64, offset);
    }
}

#[test]
fn every_wrapper_of_a_pe_image_with_many_finds_its_bundle() {
    let (section, offsets) = small_bundles(BUNDLES);
    let bundles: Vec<Vec<u8>> = offsets
        .iter()
        .zip(offsets.iter().skip(1).chain([&(section.len() as u64)]))
        .map(|(&start, &end)| section[start as usize..end as usize].to_vec())
        .collect();
    let mut dll = SyntheticDll::new(bundles.iter().map(|b| b.len() as u64).collect());
    // Backwards, so no wrapper points where its neighbour does.
    dll.wrappers = (0..WRAPPERS).rev().map(|n| n % BUNDLES).collect();
    let data = dll.bytes(&bundles);
    let fat = FatPe::parse(&data).unwrap().unwrap();
    assert_eq!(fat.bundles.len(), BUNDLES);
    let found: Vec<usize> = fat.wrappers.iter().map(|w| w.bundle).collect();
    assert_eq!(found, dll.wrappers);
}

/// The fuzz seed `name` of the `bundle` target.
fn bundle_seed(name: &str) -> Vec<u8> {
    fs_err::read(
        kpack_test_support::workspace()
            .join("fuzz/corpus/bundle")
            .join(name),
    )
    .unwrap()
}

#[test]
fn the_fuzz_seeds_of_these_shapes_read_as_they_should() {
    let many = bundle_seed("seed-many-entries.fatbin");
    assert_eq!(parse_fatbin(&many).unwrap()[0].entries.len(), 500);
    let out_of_order = bundle_seed("seed-ccob-out-of-order.fatbin");
    assert!(matches!(
        parse_fatbin(&out_of_order),
        Err(BundleError::CcobEntriesOutOfOrder {
            offset: 0,
            entry: 1,
            ..
        })
    ));
}

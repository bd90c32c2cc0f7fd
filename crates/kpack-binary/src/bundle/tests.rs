//! Unit tests on hand-made bundles.

use super::build::{ccob, offload_bundle};
use super::*;

fn co(tag: &str, len: usize) -> Vec<u8> {
    let mut data = tag.as_bytes().to_vec();
    data.resize(len, 0xab);
    data
}

fn targets(bundle: &Bundle<'_>) -> Vec<String> {
    bundle
        .entries
        .iter()
        .map(|c| c.target.to_string())
        .collect()
}

/// Every code object of every bundle of `section`, read whole.
fn read_all(section: &[u8]) -> Result<Vec<Vec<CodeObject<'_>>>, BundleError> {
    parse_fatbin(section)?
        .iter()
        .map(Bundle::code_objects)
        .collect()
}

#[test]
fn parses_bundles_back_to_back_with_padding() {
    let a = offload_bundle(&[
        ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", &co("A+", 300)),
        ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", &co("A-", 200)),
    ]);
    let b = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1100", &co("B", 100))]);
    let mut section = a.clone();
    section.resize(4096, 0);
    section.extend_from_slice(&b);
    section.resize(8192, 0);
    let bundles = parse_fatbin(&section).unwrap();
    assert_eq!(bundles.len(), 2);
    assert_eq!((bundles[0].offset, bundles[0].len), (0, a.len()));
    assert_eq!((bundles[1].offset, bundles[1].len), (4096, b.len()));
    assert_eq!(targets(&bundles[0]), ["gfx90a:xnack+", "gfx90a:xnack-"]);
    assert_eq!(
        &*bundles[0].code_objects().unwrap()[1].bytes,
        &co("A-", 200)[..]
    );
    assert_eq!(
        bundles[1].entries[0].triple,
        "hipv4-amdgcn-amd-amdhsa--gfx1100"
    );
    assert_eq!(bundles[0].kind, BundleKind::Uncompressed);
}

#[test]
fn sizes_bundles_by_entries_not_by_the_next_magic() {
    // A code object that contains the magic must not end its bundle.
    let mut tricky = co("T", 64);
    tricky.extend_from_slice(OFFLOAD_BUNDLE_MAGIC);
    tricky.extend_from_slice(&[1; 40]);
    let a = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1030", &tricky)]);
    let bundles = parse_fatbin(&a).unwrap();
    assert_eq!(bundles.len(), 1);
    assert_eq!(&*bundles[0].code_objects().unwrap()[0].bytes, &tricky[..]);
}

#[test]
fn decompresses_every_ccob_version_and_method() {
    let inner = offload_bundle(&[
        ("hipv4-amdgcn-amd-amdhsa--gfx942", &co("X", 5000)),
        ("hipv4-amdgcn-amd-amdhsa--gfx1201", &co("Y", 7000)),
    ]);
    for version in [1, 2, 3] {
        for method in [CcobMethod::Zstd, CcobMethod::Zlib] {
            let mut section = ccob(&inner, version, method);
            let first_len = section.len();
            section.resize(first_len.next_multiple_of(64), 0);
            let second_at = section.len();
            section.extend_from_slice(&ccob(&inner, version, method));
            let bundles =
                parse_fatbin(&section).unwrap_or_else(|e| panic!("v{version} {method:?}: {e}"));
            assert_eq!(bundles.len(), 2, "v{version} {method:?}");
            assert_eq!(bundles[0].len, first_len);
            assert_eq!(bundles[1].offset, second_at);
            assert_eq!(bundles[0].kind, BundleKind::Compressed { version, method });
            assert_eq!(targets(&bundles[1]), ["gfx942", "gfx1201"]);
            let code = bundles[1].code_objects().unwrap();
            assert_eq!(&*code[1].bytes, &co("Y", 7000)[..]);
        }
    }
}

#[test]
fn rejects_a_ccob_whose_hash_does_not_match() {
    let inner = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx942", &co("X", 500))]);
    let mut bundle = ccob(&inner, 3, CcobMethod::Zstd);
    bundle[24] ^= 1;
    // Its headers read; its code objects, once read, do not pass.
    assert_eq!(parse_fatbin(&bundle).unwrap().len(), 1);
    assert!(matches!(
        read_all(&bundle),
        Err(BundleError::CcobHash { offset: 0, .. })
    ));
}

#[test]
fn rejects_a_truncated_ccob() {
    let inner = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx942", &co("X", 5000))]);
    for version in [1, 2, 3] {
        let bundle = ccob(&inner, version, CcobMethod::Zstd);
        let error = read_all(&bundle[..bundle.len() - 10]).unwrap_err();
        assert!(
            matches!(
                error,
                BundleError::CcobTruncated { .. } | BundleError::CcobDecompress { .. }
            ),
            "v{version}: {error:?}"
        );
    }
    assert!(matches!(
        parse_fatbin(b"CCOB\x03\x00"),
        Err(BundleError::TruncatedHeader { .. })
    ));
}

#[test]
fn rejects_a_ccob_claiming_more_than_it_holds() {
    let inner = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx942", &co("X", 500))]);
    let mut bundle = ccob(&inner, 3, CcobMethod::Zstd);
    bundle[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(matches!(
        read_all(&bundle),
        Err(BundleError::CcobSize { .. })
    ));
}

#[test]
fn rejects_an_entry_past_the_section() {
    let mut bundle = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx906", &co("E", 100))]);
    bundle.truncate(bundle.len() - 1);
    let error = parse_fatbin(&bundle).unwrap_err();
    assert!(
        matches!(error, BundleError::EntryOutOfRange { entry: 1, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("past the end"), "{error}");
}

#[test]
fn rejects_unknown_data_and_duplicate_targets() {
    assert!(matches!(
        parse_fatbin(b"\0\0\0\0ELF!junk"),
        Err(BundleError::UnknownData { offset: 4, .. })
    ));
    let dup = offload_bundle(&[
        ("hipv4-amdgcn-amd-amdhsa--gfx906", &co("1", 10)),
        ("hip-amdgcn-amd-amdhsa--gfx906", &co("2", 10)),
    ]);
    assert!(matches!(
        parse_fatbin(&dup),
        Err(BundleError::DuplicateTarget { .. })
    ));
    assert!(parse_fatbin(&[0u8; 100]).unwrap().is_empty());
}

#[test]
fn a_planned_bundle_puts_the_host_first_and_each_code_object_on_a_boundary() {
    let (a, b) = (co("A", 5000), co("B", 10));
    let entries = [
        ("hipv4-amdgcn-amd-amdhsa--gfx1100", a.len() as u64),
        ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", b.len() as u64),
    ];
    let layout = OffloadBundleLayout::plan("host-x86_64-unknown-linux", entries.into_iter(), 4096);
    let mut out = Vec::new();
    let code = [&a, &b];
    layout
        .write(&mut out, |index, write| write(code[index]))
        .unwrap();
    assert_eq!(out.len() as u64, layout.len());
    // The first code object at the first boundary, the next at the one
    // after the first ends.
    assert_eq!(&out[4096..4096 + a.len()], &a[..]);
    assert_eq!(&out[12288..], &b[..]);
    let bundles = parse_fatbin(&out).unwrap();
    assert_eq!(bundles.len(), 1);
    assert_eq!(targets(&bundles[0]), ["gfx1100", "gfx90a:xnack-"]);
}

#[test]
fn a_code_object_of_another_size_than_planned_is_an_error_not_a_bundle() {
    let layout = OffloadBundleLayout::plan(
        "host-x86_64-unknown-linux",
        [("hipv4-amdgcn-amd-amdhsa--gfx1100", 100u64)].into_iter(),
        4096,
    );
    let mut out = Vec::new();
    let error = layout
        .write(&mut out, |_, write| write(&[0u8; 99]))
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
    assert!(error.to_string().contains("99 bytes, not 100"), "{error}");
}

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

/// Rewrites the header of the compressed bundle `bundle` with `change`.
fn change_ccob_header(bundle: &mut [u8], change: impl FnOnce(&mut CcobHeader)) {
    let mut header = CcobHeader::parse(bundle, 0).unwrap();
    change(&mut header);
    header
        .write(&mut &mut bundle[..header.header_len()])
        .unwrap();
}

#[test]
fn rejects_a_ccob_whose_hash_does_not_match() {
    let inner = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx942", &co("X", 500))]);
    let mut bundle = ccob(&inner, 3, CcobMethod::Zstd);
    change_ccob_header(&mut bundle, |header| header.hash ^= 1);
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
    change_ccob_header(&mut bundle, |header| header.uncompressed_size = u64::MAX);
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

#[test]
fn ccob_headers_are_written_as_03_packer_lays_them_out() {
    let hash = 0x0807_0605_0403_0201;
    let prefix = |version: u8| [b'C', b'C', b'O', b'B', version, 0, 1, 0];
    let cases: [(u16, &[u8]); 3] = [
        (1, &[0x10, 0x32, 0, 0]),
        (2, &[0x30, 0, 0, 0, 0x10, 0x32, 0, 0]),
        (
            3,
            &[0x38, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x32, 0, 0, 0, 0, 0, 0],
        ),
    ];
    for (version, sizes) in cases {
        let header = CcobHeader::new(version, CcobMethod::Zstd, 0x3210, hash, 24);
        let mut expected = prefix(version as u8).to_vec();
        expected.extend_from_slice(sizes);
        expected.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let mut written = Vec::new();
        header.write(&mut written).unwrap();
        assert_eq!(written, expected, "v{version}");
        assert_eq!(written.len(), header.header_len(), "v{version}");
        assert_eq!(
            CcobHeader::parse(&written, 0).unwrap(),
            header,
            "v{version}"
        );
    }
}

#[test]
fn a_ccob_header_its_version_cannot_hold_is_not_written() {
    let fits = CcobHeader::new(2, CcobMethod::Zlib, 100, 0, 50);
    let unwritable = [
        CcobHeader {
            uncompressed_size: 1 << 32,
            ..fits
        },
        CcobHeader {
            total_size: Some(1 << 32),
            ..fits
        },
        CcobHeader {
            total_size: None,
            ..fits
        },
        CcobHeader { version: 1, ..fits },
        CcobHeader { version: 4, ..fits },
    ];
    for header in unwritable {
        let mut out = Vec::new();
        let error = header.write(&mut out).unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{header:?}");
        assert!(out.is_empty(), "{header:?}");
    }
}

#[test]
fn offload_bundle_records_are_written_as_03_packer_lays_them_out() {
    let bundle = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx942", &co("X", 5))]);
    let host = b"host-x86_64-unknown-linux-gnu-";
    let triple = b"hipv4-amdgcn-amd-amdhsa--gfx942";
    let mut expected = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    expected.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0]);
    // The host entry: no bytes, at offset 0.
    expected.extend_from_slice(&[0; 16]);
    expected.extend_from_slice(&[host.len() as u8, 0, 0, 0, 0, 0, 0, 0]);
    expected.extend_from_slice(host);
    let code_at = (expected.len() + 24 + triple.len()) as u8;
    expected.extend_from_slice(&[code_at, 0, 0, 0, 0, 0, 0, 0]);
    expected.extend_from_slice(&[5, 0, 0, 0, 0, 0, 0, 0]);
    expected.extend_from_slice(&[triple.len() as u8, 0, 0, 0, 0, 0, 0, 0]);
    expected.extend_from_slice(triple);
    expected.extend_from_slice(&co("X", 5));
    assert_eq!(bundle, expected);
}

/// A member of the jax wheel fixture, whose libraries hold CCOB v3 bundles.
fn jax(name: &str) -> Vec<u8> {
    use std::io::Read as _;
    let wheel = kpack_test_support::fixtures()
        .join("pypi/jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl");
    let mut archive = zip::ZipArchive::new(fs_err::File::open(wheel).unwrap()).unwrap();
    let mut member = archive
        .by_name(&format!("jax_rocm7_plugin/{name}"))
        .unwrap();
    let mut data = Vec::new();
    member.read_to_end(&mut data).unwrap();
    data
}

/// Reads the offload bundle header at the start of `bytes` through its
/// records and writes it again; returns how many bytes it took.
fn rewrite_offload_header(bytes: &[u8]) -> usize {
    use object::pod::from_bytes;
    use object::LittleEndian as LE;
    let (header, mut rest) = from_bytes::<OffloadBundleHeader>(bytes).unwrap();
    assert_eq!(&header.magic, OFFLOAD_BUNDLE_MAGIC);
    let mut table = Vec::new();
    for _ in 0..header.entry_count.get(LE) {
        let (entry, after) = from_bytes::<OffloadEntryHeader>(rest).unwrap();
        let (triple, after) = after.split_at(entry.triple_len.get(LE) as usize);
        let triple = std::str::from_utf8(triple).unwrap();
        table.push((triple, entry.offset.get(LE), entry.size.get(LE)));
        rest = after;
    }
    let written = offload::encode_header(&table);
    let len = bytes.len() - rest.len();
    assert_eq!(written, bytes[..len]);
    len
}

#[test]
fn real_bundles_read_and_write_through_the_records_unchanged() {
    let data = jax("_prng.so");
    let elf = crate::elf::FatElf::parse(&data).unwrap().unwrap();
    assert!(!elf.bundles.is_empty());
    for bundle in &elf.bundles {
        let bytes = bundle.bytes();
        let header = CcobHeader::parse(bytes, bundle.offset).unwrap();
        assert_eq!(header.version, 3);
        assert_eq!(header.total_size, Some(bytes.len() as u64));
        let mut written = Vec::new();
        header.write(&mut written).unwrap();
        assert_eq!(written, bytes[..header.header_len()]);
        let located = ccob::Located::find(bytes, bundle.offset).unwrap();
        let mut inner = Vec::new();
        std::io::Read::read_to_end(&mut located.decode(bundle.offset).unwrap(), &mut inner)
            .unwrap();
        let header_len = rewrite_offload_header(&inner);
        assert!(bundle.entries.iter().all(|e| e.offset >= header_len as u64));
    }
}

#[test]
fn a_bundle_of_many_entries_parses_and_a_late_duplicate_is_found() {
    // 100,000 entries: each is compared with a set, not with every earlier
    // entry (which would be 5e9 comparisons here).
    let count = 100_000;
    let bundle = super::build::many_entry_bundle(count);
    let bundles = parse_fatbin(&bundle).unwrap();
    assert_eq!(bundles.len(), 1);
    assert_eq!(bundles[0].entries.len(), count);
    assert_eq!(
        bundles[0].entries[count - 1].target.to_string(),
        format!("gfx{}", count - 1)
    );
    let code = bundles[0].slice(&bundles[0].entries[77]).unwrap();
    assert_eq!(code, 77u32.to_le_bytes());

    let mut triples: Vec<String> = (0..count)
        .map(|n| format!("hipv4-amdgcn-amd-amdhsa--gfx{n}"))
        .collect();
    triples.push("hip-amdgcn-amd-amdhsa--gfx5".into());
    let entries: Vec<(&str, &[u8])> = triples.iter().map(|t| (t.as_str(), &b"code"[..])).collect();
    let error = parse_fatbin(&offload_bundle(&entries)).unwrap_err();
    assert!(
        matches!(&error, BundleError::DuplicateTarget { target, .. } if target == "gfx5"),
        "{error:?}"
    );
}

#[test]
fn bundles_are_found_by_where_they_start() {
    let (section, offsets) = super::build::small_bundles(1000);
    let bundles = parse_fatbin(&section).unwrap();
    assert_eq!(bundles.len(), 1000);
    for (index, &offset) in offsets.iter().enumerate() {
        assert_eq!(bundle_starting_at(&bundles, offset), Some(index));
        assert_eq!(bundle_starting_at(&bundles, offset + 1), None);
    }
    assert_eq!(bundle_starting_at(&bundles, u64::MAX), None);
    assert_eq!(bundle_starting_at(&[], 0), None);
    let described = describe_starts(&bundles, 0x1000);
    assert!(described.starts_with("0x1000, "), "{described}");
    assert!(described.ends_with(" and 992 more"), "{described}");
}

#[test]
fn a_ccob_with_code_objects_out_of_order_or_overlapping_is_refused_unread() {
    let header = offload::header_len(
        [
            "host-x86_64-unknown-linux-gnu-",
            "hipv4-amdgcn-amd-amdhsa--gfx90a",
            "hipv4-amdgcn-amd-amdhsa--gfx1100",
        ]
        .into_iter(),
    );
    let out_of_order = super::build::offload_bundle_as_listed(
        &[
            ("hipv4-amdgcn-amd-amdhsa--gfx90a", header + 100, 100),
            ("hipv4-amdgcn-amd-amdhsa--gfx1100", header, 100),
        ],
        200,
    );
    let overlapping = super::build::offload_bundle_as_listed(
        &[
            ("hipv4-amdgcn-amd-amdhsa--gfx90a", header, 100),
            ("hipv4-amdgcn-amd-amdhsa--gfx1100", header + 50, 100),
        ],
        150,
    );
    // Uncompressed, such a bundle is read in place and stays readable.
    assert_eq!(read_all(&out_of_order).unwrap()[0].len(), 2);
    assert_eq!(
        parse_fatbin(&super::build::out_of_order_ccob()).unwrap_err(),
        BundleError::CcobEntriesOutOfOrder {
            offset: 0,
            entry: 1,
            start: header,
            previous_end: header + 200,
        }
    );
    for (inner, start) in [(out_of_order, header), (overlapping, header + 50)] {
        let mut section = vec![0u8; 64];
        section.extend(ccob(&inner, 3, CcobMethod::Zstd));
        let error = parse_fatbin(&section).unwrap_err();
        assert_eq!(
            error,
            BundleError::CcobEntriesOutOfOrder {
                offset: 64,
                entry: 1,
                start,
                previous_end: header + 200 - if start == header { 0 } else { 100 },
            }
        );
        assert!(error.to_string().starts_with("offset 64: "), "{error}");
    }
}

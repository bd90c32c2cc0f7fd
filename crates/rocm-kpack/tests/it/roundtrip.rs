//! Writer -> reader round trips for both schemes.

use std::io::Cursor;

use crate::common::*;
use rocm_kpack::{
    Archive, ArchiveOptions, ArchiveWriter, BinaryKey, Compression, EntryMetadata, ErrorCode,
    Metadata, PreparedBlob, Scheme,
};

const SCHEMES: [Compression; 2] = [Compression::None, Compression::Zstd { level: 3 }];

fn options(compression: Compression, arches: &[&str]) -> ArchiveOptions {
    ArchiveOptions {
        group: "rocm".into(),
        family: "gfx90a".into(),
        arches: arches.iter().map(|a| t(a)).collect(),
        compression,
    }
}

fn code_object(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(seed) ^ seed)
        .collect()
}

#[test]
fn round_trips_zero_kernels() {
    for compression in SCHEMES {
        let bytes = write_archive(compression, "gfx1100", &["gfx1100"], &[]);
        let archive = Archive::from_bytes("empty", &bytes).unwrap();
        assert_eq!(archive.kernel_count(), 0);
        assert_eq!(archive.stored_count(), 0);
        assert_eq!(archive.binaries().count(), 0);
        assert_eq!(archive.architectures(), [t("gfx1100")]);
        assert_eq!(archive.scheme(), compression.scheme());
    }
}

#[test]
fn round_trips_one_kernel() {
    for compression in SCHEMES {
        let data = code_object(7, 5000);
        let bytes = write_archive(
            compression,
            "gfx942",
            &["gfx942:sramecc+:xnack-"],
            &[("lib/libx.so#0", "gfx942:sramecc+:xnack-", data.clone())],
        );
        let archive = Archive::from_bytes("one", &bytes).unwrap();
        let kernel = archive
            .kernel("lib/libx.so#0", &t("gfx942:sramecc+:xnack-"))
            .unwrap();
        assert_eq!(&*kernel, &data[..]);
        assert!(archive.kernel("lib/libx.so#0", &t("gfx942")).is_err());
    }
}

#[test]
fn stores_identical_code_objects_once() {
    for compression in SCHEMES {
        let shared = code_object(3, 4096);
        let other = code_object(5, 4096);
        let contents = [
            ("lib/a.so#0", "gfx90a:xnack+", shared.clone()),
            ("lib/a.so#0", "gfx90a:xnack-", shared.clone()),
            ("lib/b.so#0", "gfx90a:xnack-", other.clone()),
            ("lib/b.so#1", "gfx90a:xnack-", shared.clone()),
        ];
        let bytes = write_archive(
            compression,
            "gfx90a",
            &["gfx90a:xnack+", "gfx90a:xnack-"],
            &contents,
        );
        let archive = Archive::from_bytes("dedup", &bytes).unwrap();
        assert_eq!(archive.kernel_count(), 4);
        assert_eq!(archive.stored_count(), 2);
        let a = archive.find("lib/a.so#0", &t("gfx90a:xnack+")).unwrap();
        let b = archive.find("lib/b.so#1", &t("gfx90a:xnack-")).unwrap();
        assert_eq!(a.ordinal(), b.ordinal());
        for (key, target, data) in &contents {
            assert_eq!(&*archive.kernel(key, &t(target)).unwrap(), &data[..]);
        }
    }
}

#[test]
fn keeps_multi_bundle_keys_and_normalises_backslashes() {
    for compression in SCHEMES {
        let mut writer =
            ArchiveWriter::new(Cursor::new(Vec::new()), options(compression, &[])).unwrap();
        for index in 0..3u32 {
            writer
                .add(
                    &BinaryKey::new("bin\\win\\app.exe", index),
                    &t("gfx1030"),
                    &code_object(index as u8 + 1, 300),
                )
                .unwrap();
        }
        let bytes = writer.finish().unwrap().into_inner();
        let archive = Archive::from_bytes("multi", &bytes).unwrap();
        assert_eq!(
            archive.binaries().collect::<Vec<_>>(),
            [
                "bin/win/app.exe#0",
                "bin/win/app.exe#1",
                "bin/win/app.exe#2"
            ]
        );
        // Arches derived from what was added, first-seen order.
        assert_eq!(archive.architectures(), [t("gfx1030")]);
        assert_eq!(
            &*archive
                .kernel("bin\\win\\app.exe#2", &t("gfx1030"))
                .unwrap(),
            &code_object(3, 300)[..]
        );
    }
}

#[test]
fn keeps_first_seen_order_of_binaries_and_targets() {
    let contents = [
        ("z/last.so#0", "gfx1101", vec![1u8; 10]),
        ("a/first.so#0", "gfx1100", vec![2u8; 10]),
        ("z/last.so#0", "gfx1100", vec![3u8; 10]),
    ];
    let bytes = write_archive(
        Compression::None,
        "gfx110X",
        &["gfx1100", "gfx1101"],
        &contents,
    );
    let archive = Archive::from_bytes("order", &bytes).unwrap();
    assert_eq!(
        archive.binaries().collect::<Vec<_>>(),
        ["z/last.so#0", "a/first.so#0"]
    );
    let targets: Vec<String> = archive
        .targets_of("z/last.so#0")
        .unwrap()
        .map(ToString::to_string)
        .collect();
    assert_eq!(targets, ["gfx1101", "gfx1100"]);
}

#[test]
fn writes_entry_metadata_that_readers_ignore() {
    let mut writer = ArchiveWriter::new(
        Cursor::new(Vec::new()),
        options(Compression::DEFAULT, &["gfx90a:xnack-"]),
    )
    .unwrap();
    let data = code_object(9, 777);
    let blob = PreparedBlob::new(Compression::DEFAULT, &data).unwrap();
    assert_eq!(blob.original_size(), 777);
    writer
        .add_prepared(
            &BinaryKey::new("lib/librocrand.so.1.1", 0),
            &t("gfx90a:xnack-"),
            blob,
            Some(EntryMetadata {
                bundle_triple: "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-".into(),
                source_prefix: "lib/".into(),
            }),
        )
        .unwrap();
    let bytes = writer.finish().unwrap().into_inner();
    assert!(bytes.windows(8).any(|w| w == b"metadata"));
    let archive = Archive::from_bytes("meta", &bytes).unwrap();
    assert_eq!(archive.scheme(), Scheme::ZstdPerKernel);
    assert_eq!(
        &*archive
            .kernel("lib/librocrand.so.1.1#0", &t("gfx90a:xnack-"))
            .unwrap(),
        &data[..]
    );
}

#[test]
fn refuses_targets_outside_the_declared_list_and_duplicate_entries() {
    let mut writer = ArchiveWriter::new(
        Cursor::new(Vec::new()),
        options(Compression::None, &["gfx90a:xnack-"]),
    )
    .unwrap();
    let key = BinaryKey::new("lib/x.so", 0);
    assert!(writer.add(&key, &t("gfx1100"), b"abc").is_err());
    writer.add(&key, &t("gfx90a:xnack-"), b"abc").unwrap();
    assert!(writer.add(&key, &t("gfx90a:xnack-"), b"abd").is_err());
    // The failed calls left nothing behind.
    let bytes = writer.finish().unwrap().into_inner();
    let archive = Archive::from_bytes("refuse", &bytes).unwrap();
    assert_eq!(archive.kernel_count(), 1);
    assert_eq!(archive.stored_count(), 1);
}

#[test]
fn output_is_deterministic() {
    let keys: Vec<String> = (0..20).map(|i| format!("lib/k{}.so#0", i / 2)).collect();
    let contents: Vec<_> = (0..20u8)
        .map(|i| {
            let target = if i % 2 == 0 { "gfx1100" } else { "gfx1101" };
            (
                keys[usize::from(i)].as_str(),
                target,
                code_object(i % 7 + 1, 1000),
            )
        })
        .collect();
    let write = || {
        write_archive(
            Compression::DEFAULT,
            "gfx110X",
            &["gfx1100", "gfx1101"],
            &contents,
        )
    };
    let first = write();
    assert_eq!(first, write());
    assert_eq!(
        Archive::from_bytes("det", &first).unwrap().stored_count(),
        7
    );
}

/// A kernel database file's entry: a key without `#N` and string metadata,
/// as the packer's `--pack-databases` writes them.
fn database_archive(compression: Compression, data: &[u8]) -> Vec<u8> {
    let mut writer = ArchiveWriter::new(
        Cursor::new(Vec::new()),
        options(compression, &["gfx90a:xnack-", "gfx90a"]),
    )
    .unwrap();
    let metadata = Metadata::new().with("library", "rocblas").with(
        "path",
        "lib/rocblas/library/Kernels.so-000-gfx90a-xnack-.hsaco",
    );
    writer
        .add_prepared_with_metadata(
            &BinaryKey::named("rocblas/gfx90a:xnack-/Kernels.so-000-gfx90a-xnack-.hsaco"),
            &t("gfx90a:xnack-"),
            PreparedBlob::new(compression, data).unwrap(),
            Some(metadata),
        )
        .unwrap();
    writer
        .add_prepared(
            &BinaryKey::new("lib/librocblas.so", 0),
            &t("gfx90a"),
            PreparedBlob::new(compression, &data[1..]).unwrap(),
            Some(EntryMetadata {
                bundle_triple: "hipv4-amdgcn-amd-amdhsa--gfx90a".into(),
                source_prefix: "lib/".into(),
            }),
        )
        .unwrap();
    writer.finish().unwrap().into_inner()
}

#[test]
fn named_entries_keep_their_key_and_metadata() {
    let data = code_object(5, 3000);
    let key = "rocblas/gfx90a:xnack-/Kernels.so-000-gfx90a-xnack-.hsaco";
    for compression in SCHEMES {
        let bytes = database_archive(compression, &data);
        let archive = Archive::from_bytes("db", &bytes).unwrap();
        assert_eq!(
            archive.binaries().collect::<Vec<_>>(),
            [key, "lib/librocblas.so#0"]
        );
        let kernel = archive.find(key, &t("gfx90a:xnack-")).unwrap();
        assert_eq!(&*kernel.bytes().unwrap(), &data[..]);
        let metadata = kernel.metadata().unwrap().unwrap();
        assert_eq!(metadata.get("library"), Some("rocblas"));
        assert_eq!(
            metadata.get("path"),
            Some("lib/rocblas/library/Kernels.so-000-gfx90a-xnack-.hsaco")
        );
        // The reference tooling's metadata reads back too.
        let binary = archive.find("lib/librocblas.so#0", &t("gfx90a")).unwrap();
        let reference = binary.metadata().unwrap().unwrap();
        assert_eq!(
            reference.get("target"),
            Some("hipv4-amdgcn-amd-amdhsa--gfx90a")
        );
        assert_eq!(reference.get("source_prefix"), Some("lib/"));
    }
}

#[test]
fn named_entries_are_read_through_the_c_api_by_their_key() {
    let data = code_object(11, 5000);
    let context = TestContext::new();
    let path = context.path("rocm_gfx90a.kpack");
    fs_err::write(&path, database_archive(Compression::DEFAULT, &data)).unwrap();
    let key = "rocblas/gfx90a:xnack-/Kernels.so-000-gfx90a-xnack-.hsaco";
    assert_eq!(
        c_get_kernel(&path, key, "gfx90a:xnack-"),
        (ErrorCode::Success, data)
    );
}

#[test]
fn named_entries_may_have_targets_the_archive_does_not_list() {
    let mut writer = ArchiveWriter::new(
        Cursor::new(Vec::new()),
        options(Compression::None, &["gfx90a"]),
    )
    .unwrap();
    let named = BinaryKey::named("rocblas/gfx90a:xnack-/Kernels.so-000-gfx90a-xnack-.hsaco");
    writer.add(&named, &t("gfx90a:xnack-"), b"kernels").unwrap();
    // A binary's code still needs a listed target: the loader picks by it.
    let binary = BinaryKey::new("lib/librocblas.so", 0);
    assert!(writer.add(&binary, &t("gfx90a:xnack-"), b"code").is_err());
    writer.add(&binary, &t("gfx90a"), b"code").unwrap();
    let bytes = writer.finish().unwrap().into_inner();
    let archive = Archive::from_bytes("unlisted", &bytes).unwrap();
    assert_eq!(archive.architectures(), [t("gfx90a")]);
    assert_eq!(
        &*archive.kernel(named.path(), &t("gfx90a:xnack-")).unwrap(),
        b"kernels"
    );
}

#[test]
fn large_code_objects_are_prepared_a_piece_at_a_time() {
    let big = code_object(7, 20 * 1024 * 1024 + 123);
    for compression in SCHEMES {
        let seen = std::cell::Cell::new((0usize, 0usize));
        let blob = PreparedBlob::new_streamed(compression, &big, |piece| {
            let (pieces, bytes) = seen.get();
            seen.set((pieces + 1, bytes + piece.len()));
        })
        .unwrap();
        assert_eq!(seen.get(), (3, big.len()));
        assert_eq!(blob.original_size(), big.len() as u64);
        let mut writer =
            ArchiveWriter::new(Cursor::new(Vec::new()), options(compression, &["gfx90a"])).unwrap();
        let key = BinaryKey::named("rocblas/gfx90a/TensileLibrary_gfx90a.co");
        writer
            .add_prepared_with_metadata(&key, &t("gfx90a"), blob, None)
            .unwrap();
        // The same bytes added whole are recognised as the same blob.
        writer
            .add(&BinaryKey::new("lib/copy.so", 0), &t("gfx90a"), &big)
            .unwrap();
        let bytes = writer.finish().unwrap().into_inner();
        let archive = Archive::from_bytes("big", &bytes).unwrap();
        assert_eq!(archive.stored_count(), 1);
        assert!(*archive.kernel(key.path(), &t("gfx90a")).unwrap() == big[..]);
    }
    // One piece or less: stored exactly as `new` stores it, `done` once.
    let small = code_object(3, 4096);
    let calls = std::cell::Cell::new(0);
    let streamed =
        PreparedBlob::new_streamed(Compression::DEFAULT, &small, |_| calls.set(calls.get() + 1))
            .unwrap();
    let whole = PreparedBlob::new(Compression::DEFAULT, &small).unwrap();
    assert_eq!(calls.get(), 1);
    assert_eq!(streamed, whole);
}

#[test]
fn the_decoded_size_counts_every_entry_even_those_sharing_an_ordinal() {
    for compression in SCHEMES {
        let shared = code_object(3, 4096);
        let other = code_object(5, 1000);
        let bytes = write_archive(
            compression,
            "gfx90a",
            &["gfx90a:xnack+", "gfx90a:xnack-"],
            &[
                ("lib/a.so#0", "gfx90a:xnack+", shared.clone()),
                ("lib/a.so#0", "gfx90a:xnack-", shared.clone()),
                ("lib/b.so#0", "gfx90a:xnack-", shared.clone()),
                ("lib/b.so#1", "gfx90a:xnack-", other.clone()),
            ],
        );
        let archive = Archive::from_bytes("shared", &bytes).unwrap();
        assert_eq!(archive.stored_count(), 2);
        assert_eq!(archive.decoded_size(), 3 * 4096 + 1000);
        assert_eq!(archive.file_size(), bytes.len() as u64);
    }
}

#[test]
fn a_code_object_is_written_as_a_stream_of_exactly_its_size() {
    for compression in SCHEMES {
        let data = code_object(11, 3 << 20);
        let bytes = write_archive(
            compression,
            "gfx1100",
            &["gfx1100"],
            &[("lib/x.so#0", "gfx1100", data.clone())],
        );
        let archive = Archive::from_bytes("streamed", &bytes).unwrap();
        let kernel = archive.find("lib/x.so#0", &t("gfx1100")).unwrap();
        // Written in pieces: no single write holds the code object whole.
        struct Pieces(Vec<u8>, usize);
        impl std::io::Write for Pieces {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.1 = self.1.max(buf.len());
                self.0.extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut out = Pieces(Vec::new(), 0);
        kernel.write_to(&mut out).unwrap();
        assert_eq!(out.0, data);
        if compression != Compression::None {
            assert!(
                out.1 <= 1 << 20,
                "{compression:?}: a write of {} bytes",
                out.1
            );
        }
    }
}

#[test]
fn recoding_keeps_every_entry_and_comes_back_byte_for_byte() {
    let original = fs_err::read(reference("test_zstd.kpack")).unwrap();
    let archive = Archive::from_bytes("zstd", &original).unwrap();
    let plain = rocm_kpack::recode(&archive, Compression::None, Cursor::new(Vec::new()))
        .unwrap()
        .into_inner();
    let recoded = Archive::from_bytes("none", &plain).unwrap();
    assert_eq!(recoded.scheme(), Scheme::None);
    assert_eq!(
        (recoded.group(), recoded.family(), recoded.architectures()),
        (archive.group(), archive.family(), archive.architectures())
    );
    let entries = |a: &Archive| -> Vec<(String, String, Vec<u8>)> {
        let mut entries = Vec::new();
        for binary in a.binaries() {
            for target in a.targets_of(binary).unwrap() {
                let bytes = a.kernel(binary, target).unwrap().into_owned();
                entries.push((binary.to_owned(), target.to_string(), bytes));
            }
        }
        entries
    };
    assert_eq!(entries(&recoded), entries(&archive));
    assert_eq!(recoded.decoded_size(), archive.decoded_size());
    // Back at the reference's level 3 with the same libzstd: its very bytes.
    let again = rocm_kpack::recode(
        &recoded,
        Compression::Zstd { level: 3 },
        Cursor::new(Vec::new()),
    )
    .unwrap()
    .into_inner();
    assert_eq!(again, original);
}

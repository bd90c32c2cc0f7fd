//! A wheel's large members deflated in blocks on every core: the jax
//! wheel's split libraries are, in streams that unzip, Python's zipfile,
//! pip and uv read (the pip and uv tests in `wheel.rs` check their wheels
//! here too), the same bytes whatever the thread count, holding what the
//! one-stream deflate holds.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use kpack_packer::wheel::deflate::{deflate_blocks, FINAL_BLOCK, PARALLEL_THRESHOLD};
use kpack_packer::wheel::{split_wheel, WheelOptions};

use crate::common::*;
use crate::wheel::{check_wheels, file_names, jax_wheel, original_bundles, split_ok, JAX};

/// Every member of `wheel` named in `members`: its content, and its data
/// as stored.
fn stored(wheel: &Path, members: &[&String]) -> BTreeMap<String, (Vec<u8>, Vec<u8>)> {
    let mut archive = zip::ZipArchive::new(fs_err::File::open(wheel).unwrap()).unwrap();
    let mut found = BTreeMap::new();
    for name in members {
        let mut content = Vec::new();
        let mut member = archive.by_name(name).unwrap();
        assert_eq!(member.compression(), zip::CompressionMethod::Deflated);
        member.read_to_end(&mut content).unwrap();
        drop(member);
        let mut data = Vec::new();
        let index = archive.index_for_name(name).unwrap();
        archive
            .by_index_raw(index)
            .unwrap()
            .read_to_end(&mut data)
            .unwrap();
        found.insert(name.to_string(), (content, data));
    }
    found
}

/// The members `members` of `wheel` (the split libraries) are large
/// enough to be deflated in blocks, and are: each one's stored data is the
/// stream of blocks of its content, ended by the empty final block.
pub(crate) fn assert_deflated_in_blocks<'a>(
    wheel: &Path,
    members: impl IntoIterator<Item = &'a String>,
) {
    let members: Vec<&String> = members.into_iter().collect();
    assert!(!members.is_empty());
    for (name, (content, data)) in stored(wheel, &members) {
        assert!(
            content.len() as u64 >= PARALLEL_THRESHOLD,
            "{name}: {} bytes, too few to be deflated in blocks",
            content.len()
        );
        let mut blocks = Vec::new();
        deflate_blocks(&content[..], &mut blocks, |_| Ok(())).unwrap();
        blocks.extend_from_slice(&FINAL_BLOCK);
        assert!(data == blocks, "{name} was not deflated in blocks");
    }
}

#[test]
fn the_split_libraries_are_deflated_in_blocks_that_unzip_and_zipfile_check() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    split_ok(&jax_wheel(), &out);
    let host = out.join(JAX);
    assert_deflated_in_blocks(&host, original_bundles(&jax_wheel()).keys());
    for wheel in file_names(&out) {
        let tested = run(kpack_test_support::tool("unzip")
            .arg("-t")
            .arg(out.join(&wheel)));
        assert!(tested.contains("No errors detected"), "{wheel}: {tested}");
    }
    // Python's zipfile reads every member back, as RECORD lists it.
    assert_eq!(check_wheels(&out).len(), file_names(&out).len());
}

#[test]
fn the_wheels_are_the_same_bytes_on_one_thread_and_on_two() {
    let work = tempfile::tempdir().unwrap();
    let split_with = |threads: &str| {
        let out = work.path().join(threads);
        let output = kpack_pack()
            .args(["wheel", "split"])
            .arg(jax_wheel())
            .arg("-o")
            .arg(&out)
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        out
    };
    let (one, two) = (split_with("1"), split_with("2"));
    let names = file_names(&one);
    assert_eq!(names, file_names(&two));
    for name in &names {
        let a = fs_err::read(one.join(name)).unwrap();
        let b = fs_err::read(two.join(name)).unwrap();
        assert!(a == b, "{name} differs between one thread and two");
    }
    assert_deflated_in_blocks(&one.join(JAX), original_bundles(&jax_wheel()).keys());
}

#[test]
fn members_deflated_in_blocks_hold_what_one_stream_holds() {
    let work = tempfile::tempdir().unwrap();
    let (blocks, one) = (work.path().join("blocks"), work.path().join("one"));
    split_wheel(&jax_wheel(), &blocks, &WheelOptions::new("rocm")).unwrap();
    let one_stream = WheelOptions {
        parallel_deflate: u64::MAX,
        ..WheelOptions::new("rocm")
    };
    split_wheel(&jax_wheel(), &one, &one_stream).unwrap();
    let names = file_names(&blocks);
    assert_eq!(names, file_names(&one));
    for name in &names {
        let members = |dir: &Path| {
            let file = fs_err::File::open(dir.join(name)).unwrap();
            let mut archive = zip::ZipArchive::new(file).unwrap();
            (0..archive.len())
                .map(|index| {
                    let mut member = archive.by_index(index).unwrap();
                    let mut content = Vec::new();
                    member.read_to_end(&mut content).unwrap();
                    (member.name().unwrap().into_owned(), content)
                })
                .collect::<Vec<_>>()
        };
        let (in_blocks, in_one) = (members(&blocks), members(&one));
        assert_eq!(in_blocks.len(), in_one.len(), "{name}");
        for ((a, content_a), (b, content_b)) in in_blocks.iter().zip(&in_one) {
            assert_eq!(a, b, "{name}");
            assert!(content_a == content_b, "{name}: {a} differs");
        }
    }
    let (a, b) = (
        fs_err::read(blocks.join(JAX)).unwrap(),
        fs_err::read(one.join(JAX)).unwrap(),
    );
    assert!(a != b, "the host wheel was deflated one way only");
}

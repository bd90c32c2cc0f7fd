//! Parsing fat binaries of very many bundle entries and wrappers: a bundle
//! of 240,000 entries, an ELF library of 300,000 wrappers over as many
//! small bundles (linked with `cc`), a PE image of 300,000 wrappers over
//! 20,000 bundles. Before targets were checked with a set and wrappers'
//! bundles found by binary search, these took a minute each.
//!
//! `cargo bench -p kpack-binary --bench parse`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use kpack_binary::bundle::build::{many_entry_bundle, many_wrappers_assembly, small_bundles};
use kpack_binary::bundle::parse_fatbin;
use kpack_binary::elf::FatElf;
use kpack_binary::pe::build::SyntheticDll;
use kpack_binary::pe::FatPe;

const RUNS: usize = 7;
const ENTRIES: usize = 240_000;
const WRAPPERS: usize = 300_000;
const PE_BUNDLES: usize = 20_000;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Times `parse` over `RUNS` runs and prints the median.
fn time(what: &str, mut parse: impl FnMut()) {
    let times = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            parse();
            start.elapsed()
        })
        .collect();
    println!(
        "{what}: median {:.1} ms (goal < 1 s)",
        median(times).as_secs_f64() * 1e3
    );
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let bundle = many_entry_bundle(ENTRIES);
    time(
        &format!(
            "a bundle of {ENTRIES} entries ({:.1} MB)",
            bundle.len() as f64 / 1e6
        ),
        || assert_eq!(parse_fatbin(&bundle).unwrap()[0].entries.len(), ENTRIES),
    );

    let dir = tempfile::tempdir().unwrap();
    let source = many_wrappers_assembly(dir.path(), WRAPPERS, WRAPPERS).unwrap();
    let library = dir.path().join("libmany.so");
    let status = std::process::Command::new("cc")
        .args(["-shared", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .unwrap();
    assert!(status.success());
    let data = fs_err::read(&library).unwrap();
    time(
        &format!(
            "an ELF library of {WRAPPERS} wrappers and bundles ({:.1} MB)",
            data.len() as f64 / 1e6
        ),
        || {
            assert_eq!(
                FatElf::parse(&data).unwrap().unwrap().wrappers.len(),
                WRAPPERS
            )
        },
    );

    let (section, offsets) = small_bundles(PE_BUNDLES);
    let ends = offsets
        .iter()
        .skip(1)
        .copied()
        .chain([section.len() as u64]);
    let bundles: Vec<Vec<u8>> = offsets
        .iter()
        .zip(ends)
        .map(|(&start, end)| section[start as usize..end as usize].to_vec())
        .collect();
    let mut dll = SyntheticDll::new(bundles.iter().map(|b| b.len() as u64).collect());
    dll.wrappers = (0..WRAPPERS).map(|n| (n * 7919) % PE_BUNDLES).collect();
    let data = dll.bytes(&bundles);
    time(
        &format!(
            "a PE image of {WRAPPERS} wrappers over {PE_BUNDLES} bundles ({:.1} MB)",
            data.len() as f64 / 1e6
        ),
        || {
            assert_eq!(
                FatPe::parse(&data).unwrap().unwrap().wrappers.len(),
                WRAPPERS
            )
        },
    );
}

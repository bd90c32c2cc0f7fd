#![no_main]
//! Fat binaries built in the shapes the parsers must stay linear and
//! correct on, from a few bytes of choices: bundles whose entry tables
//! repeat targets and list code objects out of order or overlapping,
//! plain and compressed; PE images whose wrappers point at any of their
//! bundles, some bytes then overwritten. Nothing panics; a bundle read
//! holds each target once; an image built whole reads back with every
//! wrapper on its own bundle, splits, materializes and splits again; an
//! overwritten one materialized reads back as fat.

use std::collections::{BTreeMap, HashSet};

use kpack_binary::bundle::build::{ccob, offload_bundle, offload_bundle_as_listed};
use kpack_binary::bundle::{parse_fatbin, CcobMethod};
use kpack_binary::image::{split_image, FatImage, MaterializePlan, SplitImage};
use kpack_binary::pe::build::SyntheticDll;
use libfuzzer_sys::fuzz_target;

/// Targets few enough that entries repeat them.
const TRIPLES: [&str; 4] = [
    "hipv4-amdgcn-amd-amdhsa--gfx90a",
    "hipv4-amdgcn-amd-amdhsa--gfx1100",
    "hipv4-amdgcn-amd-amdhsa--gfx942:xnack+",
    "hipv4-amdgcn-amd-amdhsa--gfx942:xnack-",
];

/// The fuzzer's bytes, read as choices; zeros once they run out.
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        let (&first, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        first
    }

    fn below(&mut self, n: usize) -> usize {
        usize::from(self.byte()) % n
    }
}

fuzz_target!(|data: &[u8]| {
    let mut choices = Choices(data);
    bundle_entries(&mut choices);
    pe_wrappers(&mut choices);
});

/// An entry table as the choices list it, compressed or not.
fn bundle_entries(choices: &mut Choices<'_>) {
    let entries: Vec<(&str, u64, u64)> = (0..choices.below(24))
        .map(|_| {
            let triple = TRIPLES[choices.below(TRIPLES.len())];
            (triple, u64::from(choices.byte()) * 8, u64::from(choices.byte()))
        })
        .collect();
    let mut section = offload_bundle_as_listed(&entries, 2048);
    if choices.byte() & 1 == 1 {
        section = ccob(&section, 3, CcobMethod::Zstd);
    }
    let Ok(bundles) = parse_fatbin(&section) else {
        return;
    };
    for bundle in &bundles {
        let mut targets = HashSet::new();
        assert!(bundle.entries.iter().all(|e| targets.insert(&e.target)));
        if let Ok(code_objects) = bundle.code_objects() {
            assert_eq!(code_objects.len(), bundle.entries.len());
        }
    }
}

/// A DLL of up to 8 distinct bundles and up to 64 wrappers, each on a
/// bundle the choices pick; then the same with bytes overwritten.
fn pe_wrappers(choices: &mut Choices<'_>) {
    let bundles: Vec<Vec<u8>> = (0..1 + choices.below(8))
        .map(|n| {
            let code = vec![n as u8; 1 + 64 * choices.below(80)];
            offload_bundle(&[(TRIPLES[n % TRIPLES.len()], &code)])
        })
        .collect();
    let mut dll = SyntheticDll::new(bundles.iter().map(|b| b.len() as u64).collect());
    dll.wrappers = (0..1 + choices.below(64))
        .map(|_| choices.below(bundles.len()))
        .collect();
    let flags = choices.byte();
    dll.fatbin_last = flags & 1 == 1;
    dll.checksum = flags & 2 == 2;
    let image = dll.bytes(&bundles);

    let fat = FatImage::parse(&image)
        .expect("a built image reads")
        .expect("as a fat one");
    let wrapped = |fat: &FatImage<'_>| -> Vec<Vec<u8>> {
        let read = fat.bundles();
        fat.wrapper_bundles()
            .iter()
            .map(|&b| read[b].bytes().to_vec())
            .collect()
    };
    let expected: Vec<Vec<u8>> = dll.wrappers.iter().map(|&b| bundles[b].clone()).collect();
    assert_eq!(wrapped(&fat), expected);
    let (host, _) = split_image(&image, &fat, b"marker").expect("a built image splits");
    let fat_again = materialize(&host, &bundles).expect("its split image materializes");
    let fat = FatImage::parse(&fat_again)
        .expect("the materialized image reads")
        .expect("as a fat one");
    assert_eq!(wrapped(&fat), expected);
    split_image(&fat_again, &fat, b"marker").expect("the materialized image splits");

    let mut overwritten = host;
    for _ in 0..choices.below(4) {
        let at = usize::from(u16::from_le_bytes([choices.byte(), choices.byte()]));
        if let Some(byte) = overwritten.get_mut(at) {
            *byte = choices.byte();
        }
    }
    if let Some(out) = materialize(&overwritten, &bundles) {
        let fat = FatImage::parse(&out);
        assert!(matches!(fat, Ok(Some(_))), "materialized into {fat:?}");
    }
}

/// The split image `host` made fat with `bundles` (by stored index), or
/// `None` where it is refused.
fn materialize(host: &[u8], bundles: &[Vec<u8>]) -> Option<Vec<u8>> {
    let split = SplitImage::parse(host).ok()??;
    let mut lens = BTreeMap::new();
    for index in split.wrapper_bundles() {
        lens.insert(index, bundles.get(index as usize)?.len() as u64);
    }
    let plan = MaterializePlan::new(host, &split, &lens).ok()?;
    let mut out = Vec::new();
    plan.write(&mut std::io::Cursor::new(host), &mut out, |index, out| {
        out.write_all(&bundles[index as usize])
    })
    .ok()?;
    plan.patch(&mut out, &split).ok()?;
    Some(out)
}

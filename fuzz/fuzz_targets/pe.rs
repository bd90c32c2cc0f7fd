#![no_main]
//! Arbitrary bytes as a PE image: reading it as fat or split returns an
//! image or an error, never panics; every bundle lies inside its section
//! and every wrapper names one of them; a split planned for a fat image is
//! written in memory and reads back as split with the same bundle indices;
//! a split image is materialized with small bundles without a panic.

use std::collections::BTreeMap;

use kpack_binary::image::{split_image, FatImage, MaterializePlan, SplitImage};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(fat)) = FatImage::parse(data) {
        let bundles = fat.bundles();
        let wrappers = fat.wrapper_bundles();
        assert!(wrappers.iter().all(|&b| b < bundles.len()));
        if let Ok((host, _)) = split_image(data, &fat, b"marker") {
            let split = SplitImage::parse(&host)
                .expect("a split image reads back")
                .expect("as a split one");
            let stored: Vec<usize> = split.wrapper_bundles().iter().map(|&b| b as usize).collect();
            assert_eq!(stored, wrappers);
        }
    }
    if let Ok(Some(split)) = SplitImage::parse(data) {
        let lens: BTreeMap<u32, u64> = split.wrapper_bundles().iter().map(|&b| (b, 64)).collect();
        if let Ok(plan) = MaterializePlan::new(data, &split, &lens) {
            let mut out = Vec::new();
            let written = plan.write(&mut std::io::Cursor::new(data), &mut out, |_, out| {
                out.write_all(&[0u8; 64])
            });
            if written.is_ok() && out.len() as u64 == plan.output_len(data.len() as u64) {
                let _ = plan.patch(&mut out, &split);
            }
        }
    }
});

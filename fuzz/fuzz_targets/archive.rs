#![no_main]
//! Arbitrary bytes as an archive: opening, listing and decompressing every kernel never panics.

use libfuzzer_sys::fuzz_target;
use rocm_kpack::Archive;

fuzz_target!(|data: &[u8]| {
    let Ok(archive) = Archive::from_bytes("fuzz.kpack", data) else {
        return;
    };
    for target in archive.architectures() {
        assert!(archive.serves(target));
    }
    for binary in archive.binaries() {
        let targets: Vec<_> = archive
            .targets_of(binary)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        for target in &targets {
            if let Ok(code) = archive.kernel(binary, target) {
                let size = archive.find(binary, target).map(|k| k.size());
                assert_eq!(size.ok(), Some(code.len() as u64));
            }
        }
    }
});

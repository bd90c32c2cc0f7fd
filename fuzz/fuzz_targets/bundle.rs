#![no_main]
//! Arbitrary bytes as a `.hip_fatbin` section: `parse_fatbin` returns bundles or an error, never panics; every bundle it returns lies inside the section, a compressed one's code objects lie in stream order (one out of order or overlapping is refused, never read whole), no bundle holds a target twice, and reading its code objects (a compressed bundle as a stream) gives them or an error.

use std::collections::HashSet;

use kpack_binary::bundle::BundleKind;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(bundles) = kpack_binary::bundle::parse_fatbin(data) else {
        return;
    };
    for bundle in &bundles {
        assert!(bundle.offset + bundle.len <= data.len());
        let mut targets = HashSet::new();
        assert!(bundle.entries.iter().all(|e| targets.insert(&e.target)));
        if let BundleKind::Compressed { .. } = bundle.kind {
            assert!(bundle
                .entries
                .windows(2)
                .all(|w| w[0].offset.saturating_add(w[0].size) <= w[1].offset));
        }
        if let Ok(code_objects) = bundle.code_objects() {
            assert_eq!(code_objects.len(), bundle.entries.len());
        }
    }
});

#![no_main]
//! Arbitrary bytes as a `.hip_fatbin` section: `parse_fatbin` returns bundles or an error, never panics; every bundle it returns lies inside the section, and reading its code objects (a compressed bundle as a stream) gives them or an error.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(bundles) = kpack_binary::bundle::parse_fatbin(data) else {
        return;
    };
    for bundle in &bundles {
        assert!(bundle.offset + bundle.len <= data.len());
        if let Ok(code_objects) = bundle.code_objects() {
            assert_eq!(code_objects.len(), bundle.entries.len());
        }
    }
});

#![no_main]
//! Arbitrary bytes as a marker: `Marker::parse` and `Marker::from_ptr` never panic and agree.

use libfuzzer_sys::fuzz_target;
use rocm_kpack::Marker;

/// `from_ptr` reads at most this many bytes.
const MAX_MARKER_SIZE: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    // Zero padding past the input keeps every read `from_ptr` may do in bounds.
    let mut padded = data.to_vec();
    padded.resize(padded.len().max(MAX_MARKER_SIZE + 1), 0);
    let parsed = Marker::parse(&padded);
    // SAFETY: `padded` holds at least 64 KiB + 1 readable bytes.
    let from_ptr = unsafe { Marker::from_ptr(padded.as_ptr()) };
    match (&parsed, &from_ptr) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(_), Err(_)) => {}
        _ => panic!("parse: {parsed:?}, from_ptr: {from_ptr:?}"),
    }
    // Bytes after the map are ignored, so the unpadded input parses the same when it parses.
    if let Ok(unpadded) = Marker::parse(data) {
        assert_eq!(parsed.ok(), Some(unpadded));
    }
});

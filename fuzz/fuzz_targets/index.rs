#![no_main]
//! Arbitrary text as a root index and as a shard: parsing never panics, and what parses writes canonical text that parses to the same document.

use kpack_repo_index::{RootIndex, Shard};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(root) = RootIndex::parse("index.toml", text) {
        let canonical = root.to_toml().expect("a parsed root serialises");
        let again = RootIndex::parse("index.toml", &canonical).expect("canonical text parses");
        assert_eq!(again, root);
    }
    if let Ok(shard) = Shard::parse("shard.toml", text) {
        let canonical = shard.to_toml().expect("a parsed shard serialises");
        let again = Shard::parse("shard.toml", &canonical).expect("canonical text parses");
        assert_eq!(again, shard);
    }
});

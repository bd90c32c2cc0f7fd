#![no_main]
//! Arbitrary bytes as a wheel file name, METADATA and variant metadata: the
//! parsers never panic, and what parses round-trips.

use kpack_wheel::variants::{order_candidates, Candidate, SchemaVersion, SupportedProperties, VariantsDocument};
use kpack_wheel::{Metadata, MetadataEditor, WheelFilename};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(name) = WheelFilename::parse(text) {
        let printed = name.to_string();
        assert_eq!(WheelFilename::parse(&printed).ok(), Some(name));
    }
    if let Ok(metadata) = Metadata::parse(text) {
        let mut editor = MetadataEditor::new(text);
        editor.provides_extra(&kpack_wheel::ExtraName::new("device-all").unwrap_or_else(|_| unreachable!()));
        let edited = Metadata::parse(&editor.finish()).ok();
        assert_eq!(edited.map(|m| m.provides_extra.len()), Some(metadata.provides_extra.len() + 1));
    }
    if let Ok(document) = VariantsDocument::from_json(text) {
        if let Ok(json) = document.to_json(SchemaVersion::V0_1) {
            let back = VariantsDocument::from_json(&json).ok();
            assert_eq!(back.map(|d| d.variants), Some(document.variants.clone()));
        }
        let first = document.variants.values().flat_map(|p| p.properties()).take(4);
        let supported = SupportedProperties::new(first);
        let candidates: Vec<Candidate<'_>> = document
            .variants
            .iter()
            .map(|(label, properties)| Candidate::Variant(label, Some(properties)))
            .collect();
        for index in order_candidates(&candidates, &supported) {
            assert!(index < candidates.len());
        }
    }
});

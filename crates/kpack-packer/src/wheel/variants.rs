//! Variant wheels (PEP 825, `--variants`): one wheel per processor, the
//! host's content plus that processor's archive, labelled with the
//! processor, its `variant.json` naming the `amd :: gfx_arch` property;
//! and the release's `{name}-{version}-variants.json` listing every label.
//! Documents come from `kpack-wheel`, written in layout 0.2.0.

use kpack_gpu::Target;
use kpack_wheel::variants::{amd, index_filename, SchemaVersion, VariantsDocument};
use kpack_wheel::{DistName, VariantLabel, WheelFilename};

use super::error::WheelError;

/// A variant wheel's label: its processor.
pub fn label(processor: &str) -> Result<VariantLabel, WheelError> {
    VariantLabel::new(processor).map_err(|source| WheelError::VariantLabel { source })
}

/// The file name of the variant wheel labelled `label`.
pub fn file_name(host: &WheelFilename, label: VariantLabel) -> String {
    host.with_label(Some(label)).to_string()
}

/// A document listing the variants `(label, targets)` with AMD's
/// namespace and provider, as 0.2.0 JSON.
pub fn document(variants: &[(VariantLabel, &[Target])]) -> Result<String, WheelError> {
    let mut document = amd::document();
    for (label, targets) in variants {
        let properties =
            amd::variant(targets).map_err(|source| WheelError::VariantProperty { source })?;
        document.variants.insert(label.clone(), properties);
    }
    to_json(&document)
}

fn to_json(document: &VariantsDocument) -> Result<String, WheelError> {
    document
        .to_json(SchemaVersion::V0_2)
        .map_err(|source| WheelError::Variants { source })
}

/// The index file's name for `dist` at `version`.
pub fn index_name(dist: &DistName, version: &str) -> String {
    index_filename(dist, version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variant_names_its_processor_without_features() {
        let targets = [
            Target::parse("gfx90a:xnack+").unwrap(),
            Target::parse("gfx90a:xnack-").unwrap(),
        ];
        let json = document(&[(label("gfx90a").unwrap(), &targets)]).unwrap();
        let parsed = VariantsDocument::from_json(&json).unwrap();
        let properties = parsed.properties(&label("gfx90a").unwrap()).unwrap();
        let printed: Vec<String> = properties
            .properties()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(printed, ["amd :: gfx_arch :: gfx90a"]);
        assert_eq!(parsed.namespaces, ["amd"]);
        assert!(parsed.providers.contains_key("amd"));
    }
}

//! AMD's variant properties: `amd :: gfx_arch :: <processor>` (target
//! features stripped; a variant may list several processors), provided by
//! `rocm-bootstrap`'s plugin.

use kpack_gpu::Target;

use super::document::{Provider, VariantsDocument};
use super::property::{InvalidProperty, VariantProperties, VariantProperty};

/// The namespace of AMD GPU properties.
pub const NAMESPACE: &str = "amd";
/// The feature naming the GPU processor.
pub const FEATURE: &str = "gfx_arch";
/// The package providing the plugin.
pub const PROVIDER_PACKAGE: &str = "rocm-bootstrap";
/// The plugin, `module:Class`.
pub const PLUGIN_API: &str = "rocm_bootstrap.variant_provider:AMDVariantPlugin";

/// The property for one GPU target: its processor, features dropped.
pub fn gfx_arch(target: &Target) -> Result<VariantProperty, InvalidProperty> {
    VariantProperty::new(NAMESPACE, FEATURE, target.processor())
}

/// The properties a machine with these GPUs supports, most preferred first
/// (targets in the order given, each processor once).
pub fn supported(targets: &[Target]) -> Result<Vec<VariantProperty>, InvalidProperty> {
    let mut out: Vec<VariantProperty> = Vec::new();
    for target in targets {
        let property = gfx_arch(target)?;
        if !out.contains(&property) {
            out.push(property);
        }
    }
    Ok(out)
}

/// The variant properties of a wheel carrying code for these processors.
pub fn variant(targets: &[Target]) -> Result<VariantProperties, InvalidProperty> {
    Ok(supported(targets)?.into_iter().collect())
}

/// The `rocm-bootstrap` provider entry.
pub fn provider() -> Provider {
    Provider {
        requires: vec![PROVIDER_PACKAGE.to_owned()],
        plugin_api: Some(PLUGIN_API.to_owned()),
        ..Provider::default()
    }
}

/// A document with the AMD namespace and provider and no variants yet.
pub fn document() -> VariantsDocument {
    let mut doc = VariantsDocument::new();
    doc.namespaces.push(NAMESPACE.to_owned());
    doc.providers.insert(NAMESPACE.to_owned(), provider());
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(list: &[&str]) -> Vec<Target> {
        list.iter().map(|t| Target::parse(t).unwrap()).collect()
    }

    #[test]
    fn features_are_stripped_and_processors_deduplicated() {
        let supported =
            supported(&targets(&["gfx90a:xnack-", "gfx1100", "gfx90a:xnack+"])).unwrap();
        let printed: Vec<String> = supported.iter().map(ToString::to_string).collect();
        assert_eq!(
            printed,
            ["amd :: gfx_arch :: gfx90a", "amd :: gfx_arch :: gfx1100"]
        );
    }

    #[test]
    fn a_variant_lists_every_processor() {
        let set = variant(&targets(&["gfx1100", "gfx1101"])).unwrap();
        assert_eq!(set.properties().len(), 2);
        assert_eq!(set.namespaces().collect::<Vec<_>>(), ["amd"]);
    }
}

//! Variant properties, `namespace :: feature :: value`, and the property
//! sets a variant lists (namespace -> feature -> values).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// A property or one of its parts that is not well formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a valid variant {part} ({allowed})")]
pub struct InvalidProperty {
    /// What was given.
    pub value: String,
    /// `namespace`, `feature`, `value` or `property`.
    pub part: &'static str,
    /// The characters allowed.
    pub allowed: &'static str,
}

const NAME_CHARS: &str = "one or more of a-z, 0-9 and `_`";
const VALUE_CHARS: &str = "one or more of a-z, 0-9, `_` and `.`";

/// Checks a namespace or feature name (`[a-z0-9_]+`).
pub fn check_name(text: &str, part: &'static str) -> Result<(), InvalidProperty> {
    let ok = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    ok.then_some(()).ok_or_else(|| InvalidProperty {
        value: text.to_owned(),
        part,
        allowed: NAME_CHARS,
    })
}

/// Checks a property value (`[a-z0-9_.]+`).
pub fn check_value(text: &str) -> Result<(), InvalidProperty> {
    let ok = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.');
    ok.then_some(()).ok_or_else(|| InvalidProperty {
        value: text.to_owned(),
        part: "value",
        allowed: VALUE_CHARS,
    })
}

/// One property: `amd :: gfx_arch :: gfx1100`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VariantProperty {
    namespace: String,
    feature: String,
    value: String,
}

impl VariantProperty {
    /// Validates the three parts.
    pub fn new(namespace: &str, feature: &str, value: &str) -> Result<Self, InvalidProperty> {
        check_name(namespace, "namespace")?;
        check_name(feature, "feature")?;
        check_value(value)?;
        Ok(VariantProperty {
            namespace: namespace.to_owned(),
            feature: feature.to_owned(),
            value: value.to_owned(),
        })
    }

    /// `amd`.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `gfx_arch`.
    pub fn feature(&self) -> &str {
        &self.feature
    }

    /// `gfx1100`.
    pub fn value(&self) -> &str {
        &self.value
    }
}

impl fmt::Display for VariantProperty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} :: {} :: {}",
            self.namespace, self.feature, self.value
        )
    }
}

impl FromStr for VariantProperty {
    type Err = InvalidProperty;
    fn from_str(s: &str) -> Result<Self, InvalidProperty> {
        let parts: Vec<&str> = s.split("::").map(str::trim).collect();
        match parts.as_slice() {
            [namespace, feature, value] => VariantProperty::new(namespace, feature, value),
            _ => Err(InvalidProperty {
                value: s.to_owned(),
                part: "property",
                allowed: "`namespace :: feature :: value`",
            }),
        }
    }
}

impl serde::Serialize for VariantProperty {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The properties one variant lists: namespace -> feature -> values (a
/// feature may list several values; one supported value is enough).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct VariantProperties(BTreeMap<String, BTreeMap<String, Vec<String>>>);

impl VariantProperties {
    /// No properties: the `null` variant.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a property (values of one feature accumulate, without repeats).
    pub fn insert(&mut self, property: &VariantProperty) {
        let values = self
            .0
            .entry(property.namespace.clone())
            .or_default()
            .entry(property.feature.clone())
            .or_default();
        if !values.contains(&property.value) {
            values.push(property.value.clone());
        }
    }

    /// Whether it lists no property.
    pub fn is_empty(&self) -> bool {
        self.0
            .values()
            .all(|features| features.values().all(Vec::is_empty))
    }

    /// Every (namespace, feature, values) it lists.
    pub fn features(&self) -> impl Iterator<Item = (&str, &str, &[String])> {
        self.0.iter().flat_map(|(namespace, features)| {
            features.iter().map(move |(feature, values)| {
                (namespace.as_str(), feature.as_str(), values.as_slice())
            })
        })
    }

    /// The namespaces it uses.
    pub fn namespaces(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Every property it lists.
    pub fn properties(&self) -> Vec<VariantProperty> {
        self.features()
            .flat_map(|(namespace, feature, values)| {
                values.iter().map(move |value| VariantProperty {
                    namespace: namespace.to_owned(),
                    feature: feature.to_owned(),
                    value: value.clone(),
                })
            })
            .collect()
    }
}

impl FromIterator<VariantProperty> for VariantProperties {
    fn from_iter<I: IntoIterator<Item = VariantProperty>>(iter: I) -> Self {
        let mut out = VariantProperties::new();
        for property in iter {
            out.insert(&property);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_parse_and_print() {
        let property: VariantProperty = "amd :: gfx_arch :: gfx1100".parse().unwrap();
        assert_eq!(property.namespace(), "amd");
        assert_eq!(property.feature(), "gfx_arch");
        assert_eq!(property.value(), "gfx1100");
        assert_eq!(property.to_string(), "amd :: gfx_arch :: gfx1100");
        assert_eq!(
            "amd::gfx_arch::gfx90a"
                .parse::<VariantProperty>()
                .unwrap()
                .value(),
            "gfx90a"
        );
    }

    #[test]
    fn bad_parts_are_named() {
        let err = "AMD :: gfx_arch :: gfx1100"
            .parse::<VariantProperty>()
            .unwrap_err();
        assert_eq!(err.part, "namespace");
        let err = "amd :: gfx-arch :: gfx1100"
            .parse::<VariantProperty>()
            .unwrap_err();
        assert_eq!(err.part, "feature");
        let err = "amd :: gfx_arch :: gfx11-generic"
            .parse::<VariantProperty>()
            .unwrap_err();
        assert_eq!(err.part, "value");
        let err = "amd :: gfx_arch".parse::<VariantProperty>().unwrap_err();
        assert_eq!(err.part, "property");
    }

    #[test]
    fn sets_accumulate_values_per_feature() {
        let set: VariantProperties = [
            "amd :: gfx_arch :: gfx1100",
            "amd :: gfx_arch :: gfx1101",
            "amd :: gfx_arch :: gfx1100",
        ]
        .iter()
        .map(|p| p.parse().unwrap())
        .collect();
        let features: Vec<_> = set.features().collect();
        assert_eq!(
            features,
            [(
                "amd",
                "gfx_arch",
                &["gfx1100".to_owned(), "gfx1101".to_owned()][..]
            )]
        );
        assert_eq!(set.properties().len(), 2);
        assert!(!set.is_empty());
        assert!(VariantProperties::new().is_empty());
    }
}

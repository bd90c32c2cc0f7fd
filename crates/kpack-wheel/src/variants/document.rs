//! Variant metadata documents: a wheel's `*.dist-info/variant.json` and an
//! index's `{name}-{version}-variants.json` share one layout (PEP 825 and
//! the providers draft):
//!
//! ```json
//! { "$schema": ".../v0.2.0.json",
//!   "default-priorities": { "namespace": ["amd"] },
//!   "providers": { "amd": { "requires": ["rocm-bootstrap"], "plugin-api": "..." } },
//!   "variants": { "gfx1100": { "amd": { "gfx_arch": ["gfx1100"] } }, "null": {} } }
//! ```
//!
//! Read: 0.2.x, 0.1.x (no `providers`), the older 0.0.x layouts (no or a
//! bare `$schema`, a value may be a single string, `feature`/`property`
//! priorities) and AMD's schema-less multi-entry files (a top-level array of
//! such documents, merged). Written: 0.2.0, or 0.1.1 on request.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::property::{
    check_name, check_value, InvalidProperty, VariantProperties, VariantProperty,
};
use crate::filename::{InvalidLabel, VariantLabel};
use crate::names::DistName;

/// The schema URL written for 0.2.0.
pub const SCHEMA_0_2_0: &str = "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json";
/// The schema URL written for 0.1.1.
pub const SCHEMA_0_1_1: &str = "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json";

/// A variant metadata document that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum VariantsError {
    /// Not JSON.
    #[error("variant metadata is not valid JSON")]
    Json(#[source] serde_json::Error),
    /// A schema this reader does not know (a newer version).
    #[error("variant metadata schema `{schema}` is newer than this reader (0.0.x to 0.2.x)")]
    UnsupportedSchema {
        /// The `$schema` value.
        schema: String,
    },
    /// A field of the wrong JSON type or shape.
    #[error("variant metadata field `{field}`: expected {expected}")]
    Shape {
        /// Path to the field (`variants.gfx1100.amd`).
        field: String,
        /// What was expected.
        expected: &'static str,
    },
    /// A namespace, feature or value that is not well formed.
    #[error("variant metadata field `{field}`")]
    Property {
        /// Path to the field.
        field: String,
        /// What is wrong.
        #[source]
        source: InvalidProperty,
    },
    /// A variant label that is not well formed.
    #[error("variant metadata field `{field}`")]
    Label {
        /// Path to the field.
        field: String,
        /// What is wrong.
        #[source]
        source: InvalidLabel,
    },
    /// 0.2.0 requires the `providers` keys to equal the namespaces.
    #[error("variant metadata: `providers` ({providers:?}) must name exactly the namespaces of `default-priorities.namespace` ({namespaces:?})")]
    ProvidersMismatch {
        /// `default-priorities.namespace`.
        namespaces: Vec<String>,
        /// The `providers` keys.
        providers: Vec<String>,
    },
}

/// A variant metadata file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum VariantsFileError {
    /// The file cannot be read.
    #[error("cannot read variant metadata")]
    Io(#[source] std::io::Error),
    /// Its content is not valid.
    #[error("variant metadata file {path}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: VariantsError,
    },
}

/// Which layout a document was read from, or is to be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SchemaVersion {
    /// 0.0.x: the WheelNext prototypes (also schema-less files).
    V0_0,
    /// 0.1.x: PEP 825 (no `providers`).
    V0_1,
    /// 0.2.x: PEP 825 with the providers draft.
    V0_2,
}

impl SchemaVersion {
    /// The version named by a `$schema` URL; `None` for a URL without one
    /// (the 0.0.x prototypes used a bare `https://variants-schema.wheelnext.dev/`).
    fn from_url(url: &str) -> Result<SchemaVersion, VariantsError> {
        let last = url.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        let version = last
            .strip_suffix(".json")
            .map(|s| s.trim_start_matches("variant-").trim_start_matches('v'));
        let Some(version) = version else {
            return Ok(SchemaVersion::V0_0);
        };
        let numbers: Option<Vec<u32>> = version.split('.').map(|n| n.parse().ok()).collect();
        match numbers.as_deref() {
            // A name without a version (`variants.json`): the prototypes.
            None => Ok(SchemaVersion::V0_0),
            Some([0, 0, _]) => Ok(SchemaVersion::V0_0),
            Some([0, 1, _]) => Ok(SchemaVersion::V0_1),
            Some([0, 2, _]) => Ok(SchemaVersion::V0_2),
            Some(_) => Err(VariantsError::UnsupportedSchema {
                schema: url.to_owned(),
            }),
        }
    }
}

/// How a namespace's provider is installed and called (providers draft).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provider {
    /// Requirements that install the provider (`rocm-bootstrap`).
    pub requires: Vec<String>,
    /// `module:Class` of the plugin.
    pub plugin_api: Option<String>,
    /// A marker deciding whether the provider applies.
    pub enable_if: Option<String>,
    /// Whether the provider is used only when the user asks.
    pub optional: bool,
    /// Other keys, kept as they were.
    pub other: Map<String, Value>,
}

/// A variant metadata document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantsDocument {
    /// The layout it was read from.
    pub schema: SchemaVersion,
    /// `default-priorities.namespace`: namespaces, most preferred first.
    pub namespaces: Vec<String>,
    /// `default-priorities.feature` (0.0.x and 0.1.x), by namespace.
    pub feature_priorities: BTreeMap<String, Vec<String>>,
    /// `default-priorities.property` (0.0.x and 0.1.x), by namespace and feature.
    pub property_priorities: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// `providers`, by namespace (empty for 0.1.x).
    pub providers: BTreeMap<String, Provider>,
    /// Each label's properties (`null` has none).
    pub variants: BTreeMap<VariantLabel, VariantProperties>,
}

fn shape(field: impl Into<String>, expected: &'static str) -> VariantsError {
    VariantsError::Shape {
        field: field.into(),
        expected,
    }
}

fn object<'v>(value: &'v Value, field: &str) -> Result<&'v Map<String, Value>, VariantsError> {
    value.as_object().ok_or_else(|| shape(field, "an object"))
}

fn strings(value: &Value, field: &str) -> Result<Vec<String>, VariantsError> {
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| shape(field, "strings"))
            })
            .collect(),
        _ => Err(shape(field, "a string or an array of strings")),
    }
}

fn checked_name(name: &str, part: &'static str, field: &str) -> Result<String, VariantsError> {
    check_name(name, part).map_err(|source| VariantsError::Property {
        field: field.to_owned(),
        source,
    })?;
    Ok(name.to_owned())
}

impl VariantsDocument {
    /// An empty 0.2.0 document.
    pub fn new() -> VariantsDocument {
        VariantsDocument {
            schema: SchemaVersion::V0_2,
            namespaces: Vec::new(),
            feature_priorities: BTreeMap::new(),
            property_priorities: BTreeMap::new(),
            providers: BTreeMap::new(),
            variants: BTreeMap::new(),
        }
    }

    /// Reads a document from JSON text.
    pub fn from_json(text: &str) -> Result<VariantsDocument, VariantsError> {
        let value: Value = serde_json::from_str(text).map_err(VariantsError::Json)?;
        match &value {
            Value::Array(entries) => {
                let mut merged = VariantsDocument::new();
                merged.schema = SchemaVersion::V0_0;
                for (index, entry) in entries.iter().enumerate() {
                    let doc = Self::from_value(entry, &format!("[{index}]."))?;
                    merged.merge(doc);
                }
                Ok(merged)
            }
            _ => Self::from_value(&value, ""),
        }
    }

    /// Reads a document from a file.
    pub fn read(path: &Path) -> Result<VariantsDocument, VariantsFileError> {
        let text = fs_err::read_to_string(path).map_err(VariantsFileError::Io)?;
        Self::from_json(&text).map_err(|source| VariantsFileError::Invalid {
            path: path.to_owned(),
            source,
        })
    }

    fn from_value(value: &Value, at: &str) -> Result<VariantsDocument, VariantsError> {
        let top = object(value, if at.is_empty() { "(top level)" } else { at })?;
        let schema = match top.get("$schema") {
            None => SchemaVersion::V0_0,
            Some(Value::String(url)) => SchemaVersion::from_url(url)?,
            Some(_) => return Err(shape(format!("{at}$schema"), "a string")),
        };
        let mut doc = VariantsDocument::new();
        doc.schema = schema;
        if let Some(priorities) = top.get("default-priorities") {
            doc.read_priorities(priorities, &format!("{at}default-priorities"))?;
        }
        if let Some(providers) = top.get("providers") {
            let field = format!("{at}providers");
            for (namespace, provider) in object(providers, &field)? {
                let field = format!("{field}.{namespace}");
                let name = checked_name(namespace, "namespace", &field)?;
                doc.providers.insert(name, read_provider(provider, &field)?);
            }
        }
        if let Some(variants) = top.get("variants") {
            let field = format!("{at}variants");
            for (label, properties) in object(variants, &field)? {
                let field = format!("{field}.{label}");
                let label = VariantLabel::new(label).map_err(|source| VariantsError::Label {
                    field: field.clone(),
                    source,
                })?;
                doc.variants
                    .insert(label, read_properties(properties, &field)?);
            }
        }
        Ok(doc)
    }

    fn read_priorities(&mut self, value: &Value, field: &str) -> Result<(), VariantsError> {
        let priorities = object(value, field)?;
        if let Some(namespaces) = priorities.get("namespace") {
            let field = format!("{field}.namespace");
            for name in strings(namespaces, &field)? {
                self.namespaces
                    .push(checked_name(&name, "namespace", &field)?);
            }
        }
        if let Some(features) = priorities.get("feature") {
            let field = format!("{field}.feature");
            for (namespace, list) in object(features, &field)? {
                self.feature_priorities.insert(
                    namespace.clone(),
                    strings(list, &format!("{field}.{namespace}"))?,
                );
            }
        }
        if let Some(properties) = priorities.get("property") {
            let field = format!("{field}.property");
            for (namespace, features) in object(properties, &field)? {
                let field = format!("{field}.{namespace}");
                let entry = self
                    .property_priorities
                    .entry(namespace.clone())
                    .or_default();
                for (feature, values) in object(features, &field)? {
                    entry.insert(
                        feature.clone(),
                        strings(values, &format!("{field}.{feature}"))?,
                    );
                }
            }
        }
        Ok(())
    }

    /// Adds another document's namespaces, providers and variants.
    fn merge(&mut self, other: VariantsDocument) {
        for namespace in other.namespaces {
            if !self.namespaces.contains(&namespace) {
                self.namespaces.push(namespace);
            }
        }
        self.feature_priorities.extend(other.feature_priorities);
        self.property_priorities.extend(other.property_priorities);
        self.providers.extend(other.providers);
        self.variants.extend(other.variants);
    }

    /// The properties of a label, if the document lists it.
    pub fn properties(&self, label: &VariantLabel) -> Option<&VariantProperties> {
        self.variants.get(label)
    }

    /// Writes the document as pretty JSON in the layout asked for (0.2.0 or
    /// 0.1.1; 0.0.x is read only and written as 0.1.1).
    pub fn to_json(&self, layout: SchemaVersion) -> Result<String, VariantsError> {
        let mut top = Map::new();
        let mut priorities = Map::new();
        priorities.insert("namespace".into(), Value::from(self.namespaces.clone()));
        if layout == SchemaVersion::V0_2 {
            self.check_providers()?;
            top.insert("$schema".into(), SCHEMA_0_2_0.into());
        } else {
            top.insert("$schema".into(), SCHEMA_0_1_1.into());
            if !self.feature_priorities.is_empty() {
                priorities.insert("feature".into(), to_value(&self.feature_priorities));
            }
            if !self.property_priorities.is_empty() {
                priorities.insert("property".into(), to_value(&self.property_priorities));
            }
        }
        top.insert("default-priorities".into(), Value::Object(priorities));
        if layout == SchemaVersion::V0_2 {
            let providers = self
                .providers
                .iter()
                .map(|(namespace, provider)| (namespace.clone(), provider_value(provider)))
                .collect();
            top.insert("providers".into(), Value::Object(providers));
        }
        top.insert("variants".into(), to_value(&self.variants));
        let mut text =
            serde_json::to_string_pretty(&Value::Object(top)).map_err(VariantsError::Json)?;
        text.push('\n');
        Ok(text)
    }

    fn check_providers(&self) -> Result<(), VariantsError> {
        let mut namespaces = self.namespaces.clone();
        namespaces.sort();
        let providers: Vec<String> = self.providers.keys().cloned().collect();
        if namespaces == providers {
            Ok(())
        } else {
            Err(VariantsError::ProvidersMismatch {
                namespaces: self.namespaces.clone(),
                providers,
            })
        }
    }
}

impl Default for VariantsDocument {
    fn default() -> Self {
        Self::new()
    }
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn read_provider(value: &Value, field: &str) -> Result<Provider, VariantsError> {
    let mut other = object(value, field)?.clone();
    let mut text = |key: &str| -> Result<Option<String>, VariantsError> {
        match other.remove(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(shape(format!("{field}.{key}"), "a string")),
        }
    };
    let plugin_api = text("plugin-api")?;
    let enable_if = text("enable-if")?;
    let requires = match other.remove("requires") {
        None => Vec::new(),
        Some(value) => strings(&value, &format!("{field}.requires"))?,
    };
    let optional = match other.remove("optional") {
        None => false,
        Some(Value::Bool(b)) => b,
        Some(_) => return Err(shape(format!("{field}.optional"), "true or false")),
    };
    Ok(Provider {
        requires,
        plugin_api,
        enable_if,
        optional,
        other,
    })
}

fn provider_value(provider: &Provider) -> Value {
    let mut out = Map::new();
    if let Some(enable_if) = &provider.enable_if {
        out.insert("enable-if".into(), enable_if.clone().into());
    }
    if provider.optional {
        out.insert("optional".into(), true.into());
    }
    if let Some(plugin_api) = &provider.plugin_api {
        out.insert("plugin-api".into(), plugin_api.clone().into());
    }
    out.insert("requires".into(), Value::from(provider.requires.clone()));
    out.extend(provider.other.clone());
    Value::Object(out)
}

fn read_properties(value: &Value, field: &str) -> Result<VariantProperties, VariantsError> {
    let mut out = VariantProperties::new();
    for (namespace, features) in object(value, field)? {
        let field = format!("{field}.{namespace}");
        for (feature, values) in object(features, &field)? {
            let field = format!("{field}.{feature}");
            for value in strings(values, &field)? {
                check_value(&value).map_err(|source| VariantsError::Property {
                    field: field.clone(),
                    source,
                })?;
                let property =
                    VariantProperty::new(namespace, feature, &value).map_err(|source| {
                        VariantsError::Property {
                            field: field.clone(),
                            source,
                        }
                    })?;
                out.insert(&property);
            }
        }
    }
    Ok(out)
}

/// The index file describing a release's variants: `{name}-{version}-variants.json`.
pub fn index_filename(dist: &DistName, version: &str) -> String {
    format!("{}-{version}-variants.json", dist.wheel_name())
}

/// The distribution and version an index file describes, if `filename` is one.
pub fn parse_index_filename(filename: &str) -> Option<(DistName, String)> {
    let stem = filename.strip_suffix("-variants.json")?;
    let (dist, version) = stem.split_once('-')?;
    Some((DistName::new(dist).ok()?, version.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variants::amd;

    fn label(text: &str) -> VariantLabel {
        VariantLabel::new(text).unwrap()
    }

    fn values(doc: &VariantsDocument, l: &str) -> Vec<String> {
        doc.properties(&label(l))
            .unwrap()
            .properties()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn reads_0_2_with_providers() {
        let doc = VariantsDocument::from_json(
            r#"{"$schema": "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json",
                "default-priorities": {"namespace": ["amd"]},
                "providers": {"amd": {"requires": ["rocm-bootstrap"],
                   "plugin-api": "rocm_bootstrap.variant_provider:AMDVariantPlugin", "install-time": true}},
                "variants": {"gfx1100": {"amd": {"gfx_arch": ["gfx1100"]}}, "null": {}}}"#,
        )
        .unwrap();
        assert_eq!(doc.schema, SchemaVersion::V0_2);
        assert_eq!(doc.namespaces, ["amd"]);
        let provider = &doc.providers["amd"];
        assert_eq!(provider.requires, ["rocm-bootstrap"]);
        assert_eq!(provider.plugin_api.as_deref(), Some(amd::PLUGIN_API));
        assert_eq!(provider.other["install-time"], Value::Bool(true));
        assert_eq!(values(&doc, "gfx1100"), ["amd :: gfx_arch :: gfx1100"]);
        assert!(doc.properties(&label("null")).unwrap().is_empty());
    }

    #[test]
    fn reads_0_1_with_feature_and_property_priorities() {
        let doc = VariantsDocument::from_json(
            r#"{"$schema": "https://variants-schema.wheelnext.dev/peps/825/v0.1.1.json",
                "default-priorities": {"namespace": ["amd", "x86_64"],
                   "feature": {"x86_64": ["level"]},
                   "property": {"amd": {"gfx_arch": ["gfx90a"]}}},
                "variants": {"36266d4d": {"amd": {"gfx_arch": ["gfx90a", "gfx942"]}}}}"#,
        )
        .unwrap();
        assert_eq!(doc.schema, SchemaVersion::V0_1);
        assert!(doc.providers.is_empty());
        assert_eq!(doc.feature_priorities["x86_64"], ["level"]);
        assert_eq!(doc.property_priorities["amd"]["gfx_arch"], ["gfx90a"]);
        assert_eq!(values(&doc, "36266d4d").len(), 2);
    }

    #[test]
    fn reads_the_older_0_0_layouts() {
        // A bare schema URL, providers with `optional`, a single-string value.
        let doc = VariantsDocument::from_json(
            r#"{"$schema": "https://variants-schema.wheelnext.dev/",
                "default-priorities": {"namespace": ["amd"]},
                "providers": {"amd": {"requires": ["rocm-bootstrap"], "optional": true,
                                      "enable-if": "platform_system == 'Linux'"}},
                "variants": {"00000000": {}, "abcd1234": {"amd": {"gfx_arch": "gfx1100"}}}}"#,
        )
        .unwrap();
        assert_eq!(doc.schema, SchemaVersion::V0_0);
        assert!(doc.providers["amd"].optional);
        assert_eq!(values(&doc, "abcd1234"), ["amd :: gfx_arch :: gfx1100"]);
        let doc = VariantsDocument::from_json(
            r#"{"$schema": "https://wheelnext.dev/schema/variant-0.0.2.json", "variants": {}}"#,
        )
        .unwrap();
        assert_eq!(doc.schema, SchemaVersion::V0_0);
        let doc = VariantsDocument::from_json(
            r#"{"$schema": "https://wheelnext.dev/variants.json", "variants": {}}"#,
        )
        .unwrap();
        assert_eq!(doc.schema, SchemaVersion::V0_0);
    }

    #[test]
    fn reads_schema_less_multi_entry_files() {
        let doc = VariantsDocument::from_json(
            r#"[{"default-priorities": {"namespace": ["amd"]},
                 "variants": {"gfx1100": {"amd": {"gfx_arch": ["gfx1100"]}}}},
                {"default-priorities": {"namespace": ["amd"]},
                 "providers": {"amd": {"requires": ["rocm-bootstrap"]}},
                 "variants": {"gfx90a": {"amd": {"gfx_arch": ["gfx90a"]}}}}]"#,
        )
        .unwrap();
        assert_eq!(doc.namespaces, ["amd"]);
        assert_eq!(doc.variants.len(), 2);
        assert_eq!(doc.providers.len(), 1);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                r#"{"variants": {"g": {"amd": {"gfx_arch": ["GFX"]}}}}"#,
                "variants.g.amd.gfx_arch",
            ),
            (r#"{"variants": {"Bad": {}}}"#, "variants.Bad"),
            (r#"{"variants": {"g": {"amd": 3}}}"#, "variants.g.amd"),
            (
                r#"{"default-priorities": {"namespace": ["a-b"]}}"#,
                "default-priorities.namespace",
            ),
            (
                r#"{"providers": {"amd": {"optional": "yes"}}}"#,
                "providers.amd.optional",
            ),
            (r#"[{"variants": 1}]"#, "[0].variants"),
        ];
        for (text, field) in cases {
            let err = VariantsDocument::from_json(text).unwrap_err();
            let named = match &err {
                VariantsError::Shape { field, .. }
                | VariantsError::Property { field, .. }
                | VariantsError::Label { field, .. } => field.clone(),
                other => panic!("{text}: {other}"),
            };
            assert_eq!(named, field, "{text}");
        }
    }

    #[test]
    fn newer_schemas_are_refused() {
        let err = VariantsDocument::from_json(
            r#"{"$schema": "https://variants-schema.wheelnext.dev/peps/850/v0.3.0.json"}"#,
        )
        .unwrap_err();
        assert!(
            matches!(err, VariantsError::UnsupportedSchema { .. }),
            "{err}"
        );
        assert!(VariantsDocument::from_json("{").is_err());
    }

    fn amd_document() -> VariantsDocument {
        let mut doc = amd::document();
        let gfx1100 = VariantProperty::new("amd", "gfx_arch", "gfx1100").unwrap();
        doc.variants
            .insert(label("gfx1100"), [gfx1100].into_iter().collect());
        doc.variants.insert(label("null"), VariantProperties::new());
        doc
    }

    #[test]
    fn writes_0_2_0_with_providers_matching_namespaces() {
        let text = amd_document().to_json(SchemaVersion::V0_2).unwrap();
        let expected = r#"{
  "$schema": "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json",
  "default-priorities": {
    "namespace": [
      "amd"
    ]
  },
  "providers": {
    "amd": {
      "plugin-api": "rocm_bootstrap.variant_provider:AMDVariantPlugin",
      "requires": [
        "rocm-bootstrap"
      ]
    }
  },
  "variants": {
    "gfx1100": {
      "amd": {
        "gfx_arch": [
          "gfx1100"
        ]
      }
    },
    "null": {}
  }
}
"#;
        assert_eq!(text, expected);
        assert_eq!(VariantsDocument::from_json(&text).unwrap(), amd_document());
    }

    #[test]
    fn writes_0_1_1_without_providers() {
        let text = amd_document().to_json(SchemaVersion::V0_1).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["$schema"], SCHEMA_0_1_1);
        assert!(value.get("providers").is_none());
        let back = VariantsDocument::from_json(&text).unwrap();
        assert_eq!(back.schema, SchemaVersion::V0_1);
        assert_eq!(back.variants, amd_document().variants);
    }

    #[test]
    fn writing_0_2_0_refuses_providers_that_differ_from_namespaces() {
        let mut doc = amd_document();
        doc.namespaces.push("x86_64".to_owned());
        let err = doc.to_json(SchemaVersion::V0_2).unwrap_err();
        assert!(matches!(err, VariantsError::ProvidersMismatch { .. }));
    }

    #[test]
    fn index_file_names_round_trip() {
        let dist = DistName::new("Demo.Pkg").unwrap();
        let name = index_filename(&dist, "1.0");
        assert_eq!(name, "demo_pkg-1.0-variants.json");
        assert_eq!(parse_index_filename(&name), Some((dist, "1.0".to_owned())));
        assert_eq!(parse_index_filename("demo-1.0.whl"), None);
    }
}

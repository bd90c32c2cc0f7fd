//! Core metadata (`METADATA`): RFC 822 style headers, a blank line, then
//! the description body. Read for `Name`, `Version`, `Provides-Extra` and
//! `Requires-Dist` (markers kept as text); edited by appending headers or
//! removing a requirement while keeping everything else byte for byte.

use crate::names::{DistName, ExtraName, InvalidName};

/// A METADATA document that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// A required header is absent.
    #[error("METADATA has no `{field}` header")]
    Missing {
        /// The header name.
        field: &'static str,
    },
    /// A header value is not valid.
    #[error("METADATA header `{field}`: `{value}` is not valid")]
    Invalid {
        /// The header name.
        field: &'static str,
        /// The value found.
        value: String,
        /// Why.
        #[source]
        source: InvalidName,
    },
    /// A line of the header block is neither `Key: value` nor a continuation.
    #[error("METADATA line {line}: `{text}` is not a `Key: value` header")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
    },
}

/// One `Requires-Dist` entry: the distribution, the whole text, and the
/// environment marker after `;` as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiresDist {
    /// The required distribution.
    pub name: DistName,
    /// The requirement as written (`demo-device-gfx1100 == 1.0; extra == "device-gfx1100"`).
    pub text: String,
    /// The marker after `;`, trimmed, if any.
    pub marker: Option<String>,
}

impl RequiresDist {
    /// Reads a requirement's name and marker.
    pub fn parse(text: &str) -> Result<RequiresDist, InvalidName> {
        let (spec, marker) = match text.split_once(';') {
            Some((spec, marker)) => (spec, Some(marker.trim().to_owned())),
            None => (text, None),
        };
        let spec = spec.trim_start();
        let end = spec
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
            .unwrap_or(spec.len());
        Ok(RequiresDist {
            name: DistName::new(&spec[..end])?,
            text: text.trim().to_owned(),
            marker,
        })
    }

    /// The requirement without its marker (`demo-device-gfx1100 == 1.0`).
    pub fn without_marker(&self) -> &str {
        self.text.split(';').next().unwrap_or_default().trim()
    }

    /// The version it pins with a single `== V` clause (`demo-device-gfx1100 == 1.0`).
    pub fn pinned_version(&self) -> Option<&str> {
        let spec = self.text.split(';').next()?;
        let start =
            spec.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))?;
        let version = spec[start..].trim().strip_prefix("==")?.trim();
        let plain = !version.is_empty()
            && !version.starts_with('=')
            && !version.contains([',', '*', ' ', '<', '>', '!', '~', '[']);
        plain.then_some(version)
    }

    /// The extras it asks of its distribution (`torch[device-all]`);
    /// names that are not valid extras are left out.
    pub fn extras(&self) -> Vec<ExtraName> {
        let spec = self.without_marker();
        let Some((_, rest)) = spec.split_once('[') else {
            return Vec::new();
        };
        let inside = rest.split(']').next().unwrap_or_default();
        inside
            .split(',')
            .filter_map(|extra| ExtraName::new(extra.trim()).ok())
            .collect()
    }

    /// The extra its marker requires, for the common `extra == "name"` form.
    pub fn extra(&self) -> Option<ExtraName> {
        let marker = self.marker.as_deref()?;
        let rest = marker
            .split("extra")
            .nth(1)?
            .trim_start()
            .strip_prefix("==")?;
        let rest = rest.trim_start();
        let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
        let value = rest[1..].split(quote).next()?;
        ExtraName::new(value).ok()
    }
}

/// The fields of METADATA this project reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// `Name`.
    pub name: DistName,
    /// `Version`, as written.
    pub version: String,
    /// Every `Provides-Extra`, in order.
    pub provides_extra: Vec<ExtraName>,
    /// Every `Requires-Dist`, in order.
    pub requires_dist: Vec<RequiresDist>,
}

impl Metadata {
    /// Parses a METADATA document.
    pub fn parse(text: &str) -> Result<Metadata, MetadataError> {
        let headers = headers(text)?;
        let first = |field: &'static str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(field))
                .map(|(_, v)| v.as_str())
                .ok_or(MetadataError::Missing { field })
        };
        fn invalid<'v>(
            field: &'static str,
            value: &'v str,
        ) -> impl FnOnce(InvalidName) -> MetadataError + 'v {
            move |source| MetadataError::Invalid {
                field,
                value: value.to_owned(),
                source,
            }
        }
        let name_text = first("Name")?;
        let name = DistName::new(name_text).map_err(invalid("Name", name_text))?;
        let version = first("Version")?.to_owned();
        let all = |field: &'static str| {
            headers
                .iter()
                .filter(move |(k, _)| k.eq_ignore_ascii_case(field))
                .map(|(_, v)| v.as_str())
        };
        let provides_extra = all("Provides-Extra")
            .map(|v| ExtraName::new(v).map_err(invalid("Provides-Extra", v)))
            .collect::<Result<_, _>>()?;
        let requires_dist = all("Requires-Dist")
            .map(|v| RequiresDist::parse(v).map_err(invalid("Requires-Dist", v)))
            .collect::<Result<_, _>>()?;
        Ok(Metadata {
            name,
            version,
            provides_extra,
            requires_dist,
        })
    }
}

/// The header block and the rest (from the blank line that ends the
/// headers), split where both the reader and the editor see the end.
fn split_head(text: &str) -> (&str, &str) {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']).is_empty() {
            return text.split_at(offset);
        }
        offset += line.len();
    }
    (text, "")
}

/// The header block as (name, value) pairs, continuation lines joined.
fn headers(text: &str) -> Result<Vec<(String, String)>, MetadataError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (index, line) in split_head(text).0.lines().enumerate() {
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = out.last_mut() {
                value.push('\n');
                value.push_str(line.trim());
                continue;
            }
        }
        let (key, value) = line
            .split_once(':')
            .ok_or_else(|| MetadataError::Malformed {
                line: index + 1,
                text: line.to_owned(),
            })?;
        out.push((key.trim().to_owned(), value.trim().to_owned()));
    }
    Ok(out)
}

/// Appends headers to a METADATA document, after its last header and
/// before the blank line and body, leaving every other byte as it was.
#[derive(Debug, Clone)]
pub struct MetadataEditor {
    head: String,
    added: Vec<String>,
    tail: String,
}

impl MetadataEditor {
    /// Starts from an existing document.
    pub fn new(text: &str) -> MetadataEditor {
        let (head, tail) = split_head(text);
        let mut head = head.to_owned();
        if !head.is_empty() && !head.ends_with('\n') {
            head.push('\n');
        }
        MetadataEditor {
            head,
            added: Vec::new(),
            tail: tail.to_owned(),
        }
    }

    /// Adds a header line `name: value`.
    pub fn push(&mut self, name: &str, value: &str) -> &mut Self {
        self.added.push(format!("{name}: {value}\n"));
        self
    }

    /// Adds `Provides-Extra: extra`.
    pub fn provides_extra(&mut self, extra: &ExtraName) -> &mut Self {
        self.push("Provides-Extra", extra.as_str())
    }

    /// Adds `Requires-Dist: requirement`.
    pub fn requires_dist(&mut self, requirement: &str) -> &mut Self {
        self.push("Requires-Dist", requirement)
    }

    /// Removes every `Requires-Dist` header whose value is `requirement`
    /// (as [`RequiresDist::text`] holds it), with its continuation lines;
    /// how many went.
    pub fn remove_requires_dist(&mut self, requirement: &str) -> usize {
        let mut kept = String::with_capacity(self.head.len());
        let mut removed = 0;
        let mut dropping = false;
        for line in self.head.split_inclusive('\n') {
            if dropping && line.starts_with([' ', '\t']) {
                continue;
            }
            dropping = line.split_once(':').is_some_and(|(key, value)| {
                key.trim().eq_ignore_ascii_case("Requires-Dist") && value.trim() == requirement
            });
            if dropping {
                removed += 1;
            } else {
                kept.push_str(line);
            }
        }
        self.head = kept;
        removed
    }

    /// The edited document.
    pub fn finish(&self) -> String {
        let mut out = self.head.clone();
        for line in &self.added {
            out.push_str(line);
        }
        out.push_str(&self.tail);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEMO: &str = "Metadata-Version: 2.1\nName: Demo_Pkg\nVersion: 1.0\n\
Summary: a demo\n  continued\nProvides-Extra: Device_GFX1100\n\
Requires-Dist: demo-device-gfx1100==1.0; extra == \"device-gfx1100\"\n\
Requires-Dist: numpy>=1\n\nThe body: with a colon.\n\nSecond paragraph.\n";

    #[test]
    fn reads_name_version_extras_and_requirements() {
        let metadata = Metadata::parse(DEMO).unwrap();
        assert_eq!(metadata.name.as_str(), "demo-pkg");
        assert_eq!(metadata.version, "1.0");
        assert_eq!(metadata.provides_extra[0].as_str(), "device-gfx1100");
        let device = &metadata.requires_dist[0];
        assert_eq!(device.name.as_str(), "demo-device-gfx1100");
        assert_eq!(
            device.marker.as_deref(),
            Some("extra == \"device-gfx1100\"")
        );
        assert_eq!(device.extra().unwrap().as_str(), "device-gfx1100");
        assert_eq!(device.pinned_version(), Some("1.0"));
        assert_eq!(device.without_marker(), "demo-device-gfx1100==1.0");
        assert_eq!(metadata.requires_dist[1].name.as_str(), "numpy");
        assert_eq!(metadata.requires_dist[1].pinned_version(), None);
        for (text, pinned) in [
            ("a == 2.0 ; extra == 'x'", Some("2.0")),
            ("a===2.0", None),
            ("a==2.*", None),
            ("a==1,!=1.5", None),
            ("a[x]==1", None),
        ] {
            assert_eq!(
                RequiresDist::parse(text).unwrap().pinned_version(),
                pinned,
                "{text}"
            );
        }
        assert_eq!(metadata.requires_dist[1].extra(), None);
    }

    #[test]
    fn missing_and_bad_headers_name_the_field() {
        let err = Metadata::parse("Name: demo\n").unwrap_err();
        assert!(matches!(err, MetadataError::Missing { field: "Version" }));
        let err = Metadata::parse("Name: demo\nVersion: 1\nProvides-Extra: a b\n").unwrap_err();
        assert!(matches!(
            err,
            MetadataError::Invalid {
                field: "Provides-Extra",
                ..
            }
        ));
        let err = Metadata::parse("Name: demo\nno colon here\n").unwrap_err();
        assert!(matches!(err, MetadataError::Malformed { line: 2, .. }));
    }

    #[test]
    fn editor_appends_headers_and_keeps_the_body() {
        let mut editor = MetadataEditor::new(DEMO);
        let extra = ExtraName::new("device-gfx90a").unwrap();
        editor
            .provides_extra(&extra)
            .requires_dist("demo-device-gfx90a == 1.0; extra == \"device-gfx90a\"");
        let out = editor.finish();
        assert!(out.ends_with("\n\nThe body: with a colon.\n\nSecond paragraph.\n"));
        let metadata = Metadata::parse(&out).unwrap();
        assert_eq!(metadata.provides_extra.len(), 2);
        assert_eq!(
            metadata.requires_dist[2].name.as_str(),
            "demo-device-gfx90a"
        );
        assert_eq!(out.replace("Provides-Extra: device-gfx90a\nRequires-Dist: demo-device-gfx90a == 1.0; extra == \"device-gfx90a\"\n", ""), DEMO);
    }

    #[test]
    fn reader_and_editor_agree_on_where_headers_end() {
        let text = "Name: demo\r\nVersion: 1\r\n\r\nProvides-Extra: not-a-header\r\n";
        assert!(Metadata::parse(text).unwrap().provides_extra.is_empty());
        let mut editor = MetadataEditor::new(text);
        editor.push("Provides-Extra", "device-all");
        let edited = Metadata::parse(&editor.finish()).unwrap();
        assert_eq!(edited.provides_extra.len(), 1);
    }

    #[test]
    fn editor_handles_documents_without_a_body() {
        let mut editor = MetadataEditor::new("Name: demo\nVersion: 1");
        editor.push("Provides-Extra", "device-all");
        assert_eq!(
            editor.finish(),
            "Name: demo\nVersion: 1\nProvides-Extra: device-all\n"
        );
    }

    #[test]
    fn a_requirement_names_the_extras_it_asks_for() {
        let all = RequiresDist::parse("torch[device-all, Other_Extra] == 2.9").unwrap();
        let extras = all.extras();
        let names: Vec<&str> = extras.iter().map(ExtraName::as_str).collect();
        assert_eq!(names, ["device-all", "other-extra"]);
        assert!(RequiresDist::parse("numpy>=1").unwrap().extras().is_empty());
    }

    #[test]
    fn removing_a_requirement_keeps_every_other_byte() {
        let text = "Metadata-Version: 2.1\nName: torch\nVersion: 2.9\n\
Requires-Dist: torch[device-all]\nRequires-Dist: numpy>=1\n\
Requires-Dist: torch-device-gfx1100 == 2.9; extra == \"device-gfx1100\"\n\nBody\nRequires-Dist: torch[device-all]\n";
        let mut editor = MetadataEditor::new(text);
        assert_eq!(editor.remove_requires_dist("torch[device-all]"), 1);
        assert_eq!(editor.remove_requires_dist("torch[device-all]"), 0);
        assert_eq!(
            editor.finish(),
            text.replacen("Requires-Dist: torch[device-all]\n", "", 1)
        );
        let metadata = Metadata::parse(&editor.finish()).unwrap();
        assert_eq!(metadata.requires_dist.len(), 2);
    }
}

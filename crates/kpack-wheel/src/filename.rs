//! Wheel file names: `{dist}-{ver}(-{build})?-{py}-{abi}-{plat}(-{label})?.whl`,
//! the label being PEP 825's variant label.

use std::fmt;
use std::str::FromStr;

use crate::names::{DistName, InvalidName};

/// A wheel file name that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{filename}` is not a wheel file name: {reason}")]
pub struct InvalidFilename {
    /// The file name given.
    pub filename: String,
    /// What is wrong with it.
    #[source]
    pub reason: FilenameProblem,
}

/// What is wrong with a wheel file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FilenameProblem {
    #[error("it does not end in .whl")]
    NotWhl,
    #[error("it has an empty part")]
    EmptyPart,
    #[error("it must have 5 to 7 `-`-separated parts")]
    PartCount,
    #[error("the build tag must start with a digit")]
    BuildTag,
    #[error("{0}")]
    Name(#[source] InvalidName),
    #[error("{0}")]
    Label(#[source] InvalidLabel),
}

/// A variant label (`[0-9a-z_.]+`), naming one variant of a wheel.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VariantLabel(String);

/// A string that is not a valid variant label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a variant label (one or more of 0-9, a-z, `_` and `.`)")]
pub struct InvalidLabel(pub String);

impl VariantLabel {
    /// The label of the property-less variant.
    pub const NULL: &'static str = "null";

    /// Validates a label.
    pub fn new(label: &str) -> Result<VariantLabel, InvalidLabel> {
        let ok = !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase() || b == b'_' || b == b'.');
        if ok {
            Ok(VariantLabel(label.to_owned()))
        } else {
            Err(InvalidLabel(label.to_owned()))
        }
    }

    /// The label as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for VariantLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for VariantLabel {
    type Err = InvalidLabel;
    fn from_str(s: &str) -> Result<Self, InvalidLabel> {
        VariantLabel::new(s)
    }
}

impl serde::Serialize for VariantLabel {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for VariantLabel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        VariantLabel::new(&text).map_err(serde::de::Error::custom)
    }
}

/// The parts of a wheel file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelFilename {
    /// The distribution (written `foo_bar` in the name).
    pub dist: DistName,
    /// The version, as written.
    pub version: String,
    /// The build tag (starts with a digit), if any.
    pub build: Option<String>,
    /// Python tag (`py3`, `cp312.cp313`).
    pub python: String,
    /// ABI tag (`none`, `cp312`).
    pub abi: String,
    /// Platform tag (`any`, `manylinux_2_28_x86_64`).
    pub platform: String,
    /// The variant label, for a variant wheel.
    pub label: Option<VariantLabel>,
}

impl WheelFilename {
    /// Parses a file name (no directory part).
    ///
    /// Six parts are a build tag or a label: a build tag must start with a
    /// digit where a Python tag never does, so the third part decides.
    pub fn parse(filename: &str) -> Result<WheelFilename, InvalidFilename> {
        let invalid = |reason| InvalidFilename {
            filename: filename.to_owned(),
            reason,
        };
        let stem = filename
            .strip_suffix(".whl")
            .ok_or_else(|| invalid(FilenameProblem::NotWhl))?;
        let parts: Vec<&str> = stem.split('-').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(invalid(FilenameProblem::EmptyPart));
        }
        let starts_with_digit = |s: &str| s.as_bytes().first().is_some_and(u8::is_ascii_digit);
        let (build, tags, label) = match parts.len() {
            5 => (None, &parts[2..5], None),
            6 if starts_with_digit(parts[2]) => (Some(parts[2]), &parts[3..6], None),
            6 => (None, &parts[2..5], Some(parts[5])),
            7 => (Some(parts[2]), &parts[3..6], Some(parts[6])),
            _ => return Err(invalid(FilenameProblem::PartCount)),
        };
        if let Some(build) = build {
            if !starts_with_digit(build) {
                return Err(invalid(FilenameProblem::BuildTag));
            }
        }
        let dist = DistName::new(parts[0]).map_err(|e| invalid(FilenameProblem::Name(e)))?;
        let label = label
            .map(VariantLabel::new)
            .transpose()
            .map_err(|e| invalid(FilenameProblem::Label(e)))?;
        Ok(WheelFilename {
            dist,
            version: parts[1].to_owned(),
            build: build.map(str::to_owned),
            python: tags[0].to_owned(),
            abi: tags[1].to_owned(),
            platform: tags[2].to_owned(),
            label,
        })
    }

    /// The same wheel with another label (or none).
    pub fn with_label(&self, label: Option<VariantLabel>) -> WheelFilename {
        WheelFilename {
            label,
            ..self.clone()
        }
    }
}

impl fmt::Display for WheelFilename {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.dist.wheel_name(), self.version)?;
        if let Some(build) = &self.build {
            write!(f, "-{build}")?;
        }
        write!(f, "-{}-{}-{}", self.python, self.abi, self.platform)?;
        if let Some(label) = &self.label {
            write!(f, "-{label}")?;
        }
        f.write_str(".whl")
    }
}

impl FromStr for WheelFilename {
    type Err = InvalidFilename;
    fn from_str(s: &str) -> Result<Self, InvalidFilename> {
        WheelFilename::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_every_shape() {
        let cases = [
            ("demo-1.0-py3-none-any.whl", None, None),
            ("demo-1.0-1-py3-none-any.whl", Some("1"), None),
            ("demo-1.0-py3-none-any-gfx1100.whl", None, Some("gfx1100")),
            (
                "demo-1.0-2b-py3-none-any-null.whl",
                Some("2b"),
                Some("null"),
            ),
            (
                "torch_device_gfx1100-2.7.0-cp312-cp312-manylinux_2_28_x86_64-36266d4d.whl",
                None,
                Some("36266d4d"),
            ),
        ];
        for (name, build, label) in cases {
            let parsed = WheelFilename::parse(name).unwrap();
            assert_eq!(parsed.build.as_deref(), build, "{name}");
            assert_eq!(parsed.label.as_ref().map(|l| l.as_str()), label, "{name}");
            assert_eq!(parsed.to_string(), name);
        }
    }

    #[test]
    fn reads_the_tags() {
        let parsed =
            WheelFilename::parse("Foo.Bar-2.0-cp312-cp312-manylinux_2_28_x86_64.whl").unwrap();
        assert_eq!(parsed.dist.as_str(), "foo-bar");
        assert_eq!(parsed.version, "2.0");
        assert_eq!(parsed.python, "cp312");
        assert_eq!(parsed.abi, "cp312");
        assert_eq!(parsed.platform, "manylinux_2_28_x86_64");
        assert_eq!(
            parsed.to_string(),
            "foo_bar-2.0-cp312-cp312-manylinux_2_28_x86_64.whl"
        );
    }

    #[test]
    fn bad_names_are_refused_with_a_reason() {
        for bad in [
            "demo-1.0-py3-none-any.zip",
            "demo-1.0-py3-none.whl",
            "demo-1.0-a-b-py3-none-any-x.whl",
            "demo-1.0-x1-py3-none-any-lbl.whl",
            "demo-1.0-py3-none-any-GFX.whl",
            "demo--1.0-py3-none-any.whl",
        ] {
            let err = WheelFilename::parse(bad).unwrap_err();
            assert_eq!(err.filename, bad);
        }
    }

    #[test]
    fn labels_are_validated() {
        assert!(VariantLabel::new("gfx90a").is_ok());
        assert!(VariantLabel::new("a.b_c").is_ok());
        for bad in ["", "Gfx", "a-b", "a b"] {
            assert!(VariantLabel::new(bad).is_err(), "{bad}");
        }
    }
}

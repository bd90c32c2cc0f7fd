//! Distribution and extra names, compared by their normalised forms:
//! PEP 503 for distributions and PEP 685 for extras (lowercase, every run of
//! `-`, `_` and `.` becomes one `-`).

use std::fmt;
use std::str::FromStr;

/// A name that is not a valid distribution or extra name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{name}` is not a valid {kind} name (ASCII letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit)")]
pub struct InvalidName {
    /// What was given.
    pub name: String,
    /// `distribution` or `extra`.
    pub kind: &'static str,
}

/// The normalised form of a name: lowercase, `[-_.]+` runs replaced by `-`.
pub fn normalise(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.push(c.to_ascii_lowercase());
            in_run = false;
        }
    }
    out
}

/// Whether `name` is a valid name under PEP 508 (`^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$`, case-insensitive).
fn valid(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: &u8| b.is_ascii_alphanumeric();
    bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

macro_rules! normalised_name {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Validates and normalises `name`.
            pub fn new(name: &str) -> Result<Self, InvalidName> {
                if valid(name) {
                    Ok(Self(normalise(name)))
                } else {
                    Err(InvalidName { name: name.to_owned(), kind: $kind })
                }
            }

            /// The normalised form (`my-package`).
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = InvalidName;
            fn from_str(s: &str) -> Result<Self, InvalidName> {
                Self::new(s)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                Self::new(&text).map_err(serde::de::Error::custom)
            }
        }
    };
}

normalised_name!(
    /// A distribution name, held PEP 503-normalised (`Foo_Bar` is `foo-bar`).
    DistName,
    "distribution"
);

normalised_name!(
    /// An extra name, held PEP 685-normalised (`Device_GFX1100` is `device-gfx1100`).
    ExtraName,
    "extra"
);

impl DistName {
    /// The form used in wheel file and `.dist-info` directory names
    /// (`foo_bar`): the normalised name with `-` replaced by `_`.
    pub fn wheel_name(&self) -> String {
        self.0.replace('-', "_")
    }

    /// The device distribution of this one for an extra's suffix
    /// (`torch` + `gfx1100` is `torch-device-gfx1100`).
    pub fn device(&self, suffix: &str) -> Result<DistName, InvalidName> {
        DistName::new(&format!("{}-device-{suffix}", self.0))
    }
}

impl ExtraName {
    /// The `device-<suffix>` extra (`device-gfx1100`, `device-gfx110x-all`).
    pub fn device(suffix: &str) -> Result<ExtraName, InvalidName> {
        ExtraName::new(&format!("device-{suffix}"))
    }

    /// What follows `device-` in a device extra (`gfx1100`), if it is one.
    pub fn device_suffix(&self) -> Option<&str> {
        self.0.strip_prefix("device-").filter(|s| !s.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dist_names_compare_by_normalised_form() {
        for (given, normal) in [
            ("Foo_Bar", "foo-bar"),
            ("foo.bar", "foo-bar"),
            ("FOO--_.bar", "foo-bar"),
            ("rocm-sdk-core", "rocm-sdk-core"),
        ] {
            assert_eq!(DistName::new(given).unwrap().as_str(), normal);
        }
        assert_eq!(
            DistName::new("Foo.Bar").unwrap(),
            DistName::new("foo_bar").unwrap()
        );
    }

    #[test]
    fn wheel_form_uses_underscores() {
        let name = DistName::new("Torch.Device-gfx1100").unwrap();
        assert_eq!(name.wheel_name(), "torch_device_gfx1100");
    }

    #[test]
    fn extras_are_normalised_as_pep_685_says() {
        assert_eq!(
            ExtraName::new("Device_GFX110X.all").unwrap().as_str(),
            "device-gfx110x-all"
        );
        let extra = ExtraName::device("gfx1100").unwrap();
        assert_eq!(extra.device_suffix(), Some("gfx1100"));
        assert_eq!(ExtraName::new("cuda").unwrap().device_suffix(), None);
    }

    #[test]
    fn invalid_names_are_refused() {
        for bad in ["", "-foo", "foo-", "foo bar", "foo!"] {
            let err = DistName::new(bad).unwrap_err();
            assert_eq!(err.name, bad);
        }
        assert!(ExtraName::new("x y").is_err());
    }

    #[test]
    fn device_dist_names_are_normalised() {
        let name = DistName::new("Torch").unwrap();
        assert_eq!(
            name.device("gfx110X-all").unwrap().as_str(),
            "torch-device-gfx110x-all"
        );
    }
}

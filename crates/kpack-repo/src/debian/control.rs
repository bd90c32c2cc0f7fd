//! A binary package's control data (`DEBIAN/control`, one deb822 stanza):
//! the fields a manifest takes from a `.deb`.

use super::relation::{parse_relations, Alternatives, RelationError};
use super::version::{DebianVersion, VersionError};

/// The fields of one control stanza, in their order; names compare
/// without case, as Debian's do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    fields: Vec<(String, String)>,
}

/// Control data that cannot be read, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("control data line {line}: {reason}")]
    Syntax { line: usize, reason: &'static str },
    #[error("control data has no {field} field")]
    Missing { field: &'static str },
    #[error("control field {field}: {value:?} is not a number")]
    Number { field: &'static str, value: String },
    #[error("control field Version")]
    Version(#[source] VersionError),
    #[error("control field {field}")]
    Relation {
        field: &'static str,
        #[source]
        source: RelationError,
    },
}

impl Control {
    /// Parses a stanza (as `dpkg-deb -f` prints it). Continuation lines
    /// start with a space or tab and are joined to their field's value.
    pub fn parse(text: &str) -> Result<Control, ControlError> {
        let mut fields: Vec<(String, String)> = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let syntax = |reason| ControlError::Syntax {
                line: index + 1,
                reason,
            };
            if line.trim().is_empty() {
                if fields.is_empty() {
                    continue;
                }
                return Err(syntax("a blank line: control data is one stanza"));
            }
            if line.starts_with([' ', '\t']) {
                let (_, value) = fields
                    .last_mut()
                    .ok_or_else(|| syntax("a continuation line before any field"))?;
                value.push('\n');
                value.push_str(line.trim());
                continue;
            }
            let (name, value) = line
                .split_once(':')
                .ok_or_else(|| syntax("a line without a field name"))?;
            if name.is_empty() || name.contains(char::is_whitespace) {
                return Err(syntax("a field name with spaces"));
            }
            if fields.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
                return Err(syntax("a field given twice"));
            }
            fields.push((name.to_owned(), value.trim().to_owned()));
        }
        Ok(Control { fields })
    }

    /// A field's value (continuation lines joined with newlines).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    fn required(&self, field: &'static str) -> Result<&str, ControlError> {
        self.field(field).ok_or(ControlError::Missing { field })
    }

    /// `Package`.
    pub fn package(&self) -> Result<&str, ControlError> {
        self.required("Package")
    }

    /// `Version`.
    pub fn version(&self) -> Result<DebianVersion, ControlError> {
        self.required("Version")?
            .parse()
            .map_err(ControlError::Version)
    }

    /// `Installed-Size`, in bytes (the field counts KiB).
    pub fn installed_size(&self) -> Result<Option<u64>, ControlError> {
        let field = "Installed-Size";
        self.field(field)
            .map(|value| {
                value
                    .parse::<u64>()
                    .map(|kib| kib * 1024)
                    .map_err(|_| ControlError::Number {
                        field,
                        value: value.to_owned(),
                    })
            })
            .transpose()
    }

    /// `Pre-Depends` then `Depends`: what must be installed for the
    /// package to work.
    pub fn depends(&self) -> Result<Vec<Alternatives>, ControlError> {
        let mut all = Vec::new();
        for field in ["Pre-Depends", "Depends"] {
            if let Some(value) = self.field(field) {
                let relations = parse_relations(value)
                    .map_err(|source| ControlError::Relation { field, source })?;
                all.extend(relations);
            }
        }
        Ok(all)
    }

    /// `Provides`: the virtual packages (and versions) this one stands for.
    pub fn provides(&self) -> Result<Vec<Alternatives>, ControlError> {
        let field = "Provides";
        self.field(field)
            .map(parse_relations)
            .transpose()
            .map_err(|source| ControlError::Relation { field, source })
            .map(Option::unwrap_or_default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuation_lines_join_their_field() {
        let control = Control::parse(
            "Package: librocsolver0\nVersion: 5.5.1-7\nDescription: ROCm LAPACK\n rocSOLVER is\n .\n more\n",
        )
        .unwrap();
        assert_eq!(control.package().unwrap(), "librocsolver0");
        assert_eq!(
            control.field("description").unwrap(),
            "ROCm LAPACK\nrocSOLVER is\n.\nmore"
        );
    }

    #[test]
    fn malformed_stanzas_name_the_line() {
        for (text, line) in [
            (" continued\n", 1),
            ("Package: a\nno colon here\n", 2),
            ("Package: a\n\nPackage: b\n", 2),
            ("Package: a\npackage: b\n", 2),
        ] {
            let error = Control::parse(text).unwrap_err();
            assert!(
                matches!(error, ControlError::Syntax { line: l, .. } if l == line),
                "{text:?}: {error}"
            );
        }
        let control = Control::parse("Package: a\nInstalled-Size: lots\n").unwrap();
        assert!(control.version().is_err());
        assert!(control.installed_size().is_err());
    }
}

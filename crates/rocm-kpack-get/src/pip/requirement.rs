//! Requirement text as users give it to pip: `name[extras] specifiers; marker`,
//! `name[extras] @ URL`, or the path of a wheel file. Only as much is
//! parsed as adding extras needs; the rest is passed on as written.

use std::path::{Path, PathBuf};

use kpack_wheel::{DistName, ExtraName, WheelFilename};

use super::PipError;

/// A requirement, split where extras go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// What the user wrote.
    pub text: String,
    /// The distribution.
    pub name: DistName,
    /// Extras already asked for.
    pub extras: Vec<String>,
    /// What follows the name and extras (`>=1.0; python_version > "3"`, `@ URL`).
    pub rest: String,
    /// For a wheel file given by path, the file.
    pub path: Option<PathBuf>,
    /// For a variant wheel staged under its plain name, the file or URL it
    /// came from: people are shown that, not the temporary copy.
    pub origin: Option<String>,
}

fn invalid(text: &str, reason: impl Into<String>) -> PipError {
    PipError::Requirement {
        text: text.to_owned(),
        reason: reason.into(),
    }
}

impl Requirement {
    /// Parses a requirement or a wheel path.
    pub fn parse(text: &str) -> Result<Requirement, PipError> {
        let trimmed = text.trim();
        if trimmed.ends_with(".whl") && !trimmed.contains('@') {
            return Self::wheel_path(text, Path::new(trimmed));
        }
        let end = trimmed
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
            .unwrap_or(trimmed.len());
        let name = DistName::new(&trimmed[..end]).map_err(|e| invalid(text, e.to_string()))?;
        let mut rest = trimmed[end..].trim_start();
        let mut extras = Vec::new();
        if let Some(inner) = rest.strip_prefix('[') {
            let (list, after) = inner
                .split_once(']')
                .ok_or_else(|| invalid(text, "`[` without `]`"))?;
            extras = list
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_owned)
                .collect();
            rest = after;
        }
        Ok(Requirement {
            text: text.to_owned(),
            name,
            extras,
            rest: rest.trim().to_owned(),
            path: None,
            origin: None,
        })
    }

    fn wheel_path(text: &str, path: &Path) -> Result<Requirement, PipError> {
        let file = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| invalid(text, "not a wheel file name"))?;
        let wheel = WheelFilename::parse(file).map_err(|e| invalid(text, e.to_string()))?;
        let absolute = std::path::absolute(path).map_err(PipError::Io)?;
        Ok(Requirement {
            text: text.to_owned(),
            name: wheel.dist,
            extras: Vec::new(),
            rest: format!("@ {}", file_url(&absolute)),
            path: Some(absolute),
            origin: None,
        })
    }

    /// A requirement for a local wheel file under the same name and extras,
    /// staged there from `origin`.
    pub fn for_file(&self, file: &Path, origin: String) -> Requirement {
        Requirement {
            rest: format!("@ {}", file_url(file)),
            path: Some(file.to_owned()),
            origin: Some(origin),
            ..self.clone()
        }
    }

    /// The requirement text with these extras added to its own.
    pub fn with_extras(&self, added: &[ExtraName]) -> String {
        self.written(added, &self.rest)
    }

    /// As [`Requirement::with_extras`], for people: a staged variant by
    /// where it came from.
    pub fn shown_with_extras(&self, added: &[ExtraName]) -> String {
        match &self.origin {
            Some(origin) => self.written(added, &format!("@ {origin}")),
            None => self.with_extras(added),
        }
    }

    fn written(&self, added: &[ExtraName], rest: &str) -> String {
        let mut extras = self.extras.clone();
        for extra in added {
            let present = extras
                .iter()
                .any(|e| ExtraName::new(e).is_ok_and(|e| &e == extra));
            if !present {
                extras.push(extra.to_string());
            }
        }
        if extras.is_empty() && self.path.is_none() {
            return self.text.trim().to_owned();
        }
        let list = if extras.is_empty() {
            String::new()
        } else {
            format!("[{}]", extras.join(","))
        };
        let space = if rest.starts_with('@') { " " } else { "" };
        format!("{}{list}{space}{rest}", self.name)
    }
}

/// `file://` URL of an absolute path (spaces and `%` escaped).
pub(crate) fn file_url(path: &Path) -> String {
    let text = path.to_string_lossy();
    let mut out = String::from("file://");
    for c in text.chars() {
        match c {
            ' ' => out.push_str("%20"),
            '%' => out.push_str("%25"),
            '#' => out.push_str("%23"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn extras(list: &[&str]) -> Vec<ExtraName> {
        list.iter().map(|e| ExtraName::new(e).unwrap()).collect()
    }

    #[test]
    fn extras_go_after_the_name() {
        let cases = [
            ("demo", "demo[device-gfx1100]"),
            ("demo>=1.0", "demo[device-gfx1100]>=1.0"),
            (
                "Demo[cli] ==1.0; python_version>'3'",
                "demo[cli,device-gfx1100]==1.0; python_version>'3'",
            ),
            ("demo[Device_GFX1100]", "demo[Device_GFX1100]"),
            (
                "demo @ https://example.org/demo-1.0-py3-none-any.whl",
                "demo[device-gfx1100] @ https://example.org/demo-1.0-py3-none-any.whl",
            ),
        ];
        for (given, expected) in cases {
            let requirement = Requirement::parse(given).unwrap();
            assert_eq!(
                requirement.with_extras(&extras(&["device-gfx1100"])),
                expected,
                "{given}"
            );
        }
    }

    #[test]
    fn no_extras_leaves_the_text_alone() {
        let requirement = Requirement::parse(" demo >= 1 ").unwrap();
        assert_eq!(requirement.with_extras(&[]), "demo >= 1");
    }

    #[test]
    fn wheel_paths_become_url_requirements() {
        let requirement = Requirement::parse("/w/demo-1.0-py3-none-any.whl").unwrap();
        assert_eq!(requirement.name.as_str(), "demo");
        assert_eq!(
            requirement.with_extras(&extras(&["device-gfx90a"])),
            "demo[device-gfx90a] @ file:///w/demo-1.0-py3-none-any.whl"
        );
        assert_eq!(
            requirement.with_extras(&[]),
            "demo @ file:///w/demo-1.0-py3-none-any.whl"
        );
    }

    #[test]
    fn bad_requirements_are_named() {
        for bad in ["-x", "demo[a", "x-1.0.whl"] {
            let err = Requirement::parse(bad).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }
}

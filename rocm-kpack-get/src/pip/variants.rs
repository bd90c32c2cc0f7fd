//! Variant wheels in find-links directories (PEP 825): pip ignores them,
//! so kpack-get picks the best for this machine itself, using the release's
//! `{name}-{version}-variants.json`, and hands the installer that file
//! under its plain wheel name (installers refuse labelled names).

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use kpack_wheel::variants::{
    index_filename, order_candidates, Candidate, SupportedProperties, VariantsDocument,
};
use kpack_wheel::{DistName, VariantLabel, WheelFilename};

use super::environment::PythonEnvironment;
use super::requirement::Requirement;
use super::PipError;

/// The local directories among installer arguments (`--find-links DIR`,
/// `--find-links=DIR`, `-f DIR`, `file://` URLs); remote ones are left to
/// the installer.
pub fn find_links_dirs(args: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let value = if arg == "--find-links" || arg == "-f" {
            iter.next().cloned()
        } else if let Some(v) = arg.strip_prefix("--find-links=") {
            Some(v.to_owned())
        } else {
            arg.strip_prefix("-f")
                .filter(|v| !v.is_empty() && !v.starts_with('-'))
                .map(str::to_owned)
        };
        let Some(value) = value else { continue };
        let path = match value.strip_prefix("file://") {
            Some(path) => PathBuf::from(path),
            None if value.contains("://") => continue,
            None => PathBuf::from(value),
        };
        if path.is_dir() {
            out.push(path);
        }
    }
    out
}

/// A wheel file found in a directory.
#[derive(Debug, Clone)]
pub struct FoundWheel {
    /// Where it is.
    pub path: PathBuf,
    /// Its parsed name.
    pub filename: WheelFilename,
}

/// What the directories offer a requirement.
#[derive(Debug, Clone)]
pub enum Selection {
    /// No variant wheels of it: left to the installer.
    NoVariants,
    /// Variant wheels without the index file describing them.
    NoIndex {
        /// The file looked for.
        expected: String,
    },
    /// Variants exist, but a non-variant wheel is the best (or only) fit.
    Plain,
    /// Variants exist, none fits this machine, and there is no plain wheel.
    NoneCompatible {
        /// The version looked at.
        version: String,
    },
    /// The variant to install.
    Variant(FoundWheel),
}

/// Compares versions by their dot-separated parts, numerically where both
/// parts are numbers.
fn compare_versions(a: &str, b: &str) -> Ordering {
    let mut left = a.split(['.', '+', '-']);
    let mut right = b.split(['.', '+', '-']);
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (Some(_), None) => return Ordering::Greater,
            (None, Some(_)) => return Ordering::Less,
            (Some(x), Some(y)) => {
                let order = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(x), Ok(y)) => x.cmp(&y),
                    _ => x.cmp(y),
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
        }
    }
}

/// The wheels of `dist` in the directories that install here.
fn wheels_of(
    dirs: &[PathBuf],
    dist: &DistName,
    env: &PythonEnvironment,
) -> Result<Vec<FoundWheel>, PipError> {
    let mut out = Vec::new();
    for dir in dirs {
        for entry in fs_err::read_dir(dir).map_err(PipError::Io)? {
            let path = entry.map_err(PipError::Io)?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let Ok(filename) = WheelFilename::parse(name) else {
                continue;
            };
            if &filename.dist == dist
                && env.accepts_tags(&filename.python, &filename.abi, &filename.platform)
            {
                out.push(FoundWheel { path, filename });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The version a requirement pins with `==`, if it does.
fn pinned(requirement: &Requirement) -> Option<&str> {
    let spec = requirement.rest.split(';').next()?.trim();
    let version = spec.strip_prefix("==")?.trim();
    (!version.is_empty() && !version.contains([',', '*'])).then_some(version)
}

/// Chooses among the variant wheels of a requirement in `dirs`: the pinned
/// or newest version, then the PEP 825 order for `supported`.
pub fn select(
    dirs: &[PathBuf],
    requirement: &Requirement,
    env: &PythonEnvironment,
    supported: &SupportedProperties,
) -> Result<Selection, PipError> {
    let wheels = wheels_of(dirs, &requirement.name, env)?;
    if !wheels.iter().any(|w| w.filename.label.is_some()) {
        return Ok(Selection::NoVariants);
    }
    let version = match pinned(requirement) {
        Some(version) => version.to_owned(),
        None => wheels
            .iter()
            .map(|w| w.filename.version.as_str())
            .max_by(|a, b| compare_versions(a, b))
            .unwrap_or_default()
            .to_owned(),
    };
    let release: Vec<&FoundWheel> = wheels
        .iter()
        .filter(|w| compare_versions(&w.filename.version, &version) == Ordering::Equal)
        .collect();
    if !release.iter().any(|w| w.filename.label.is_some()) {
        return Ok(Selection::NoVariants);
    }
    let expected = index_filename(&requirement.name, &release[0].filename.version);
    let Some(index) = dirs.iter().map(|d| d.join(&expected)).find(|p| p.is_file()) else {
        return Ok(Selection::NoIndex { expected });
    };
    let document = VariantsDocument::read(&index)?;
    let supported = supported
        .clone()
        .with_namespace_priority(&document.namespaces);
    let candidates: Vec<Candidate<'_>> = release
        .iter()
        .map(|w| match &w.filename.label {
            Some(label) => Candidate::Variant(label, document.properties(label)),
            None => Candidate::Plain,
        })
        .collect();
    let order = order_candidates(&candidates, &supported);
    Ok(match order.first().map(|&i| release[i]) {
        None => Selection::NoneCompatible { version },
        Some(best) if best.filename.label.is_none() => Selection::Plain,
        Some(best) => Selection::Variant(best.clone()),
    })
}

/// Puts the chosen variant in `dir` under its plain wheel name (a hard
/// link, else a copy) and returns the new path.
pub fn materialise(wheel: &FoundWheel, dir: &Path) -> Result<PathBuf, PipError> {
    let plain = wheel.filename.with_label(None).to_string();
    let target = dir.join(plain);
    if fs_err::hard_link(&wheel.path, &target).is_err() {
        fs_err::copy(&wheel.path, &target).map_err(PipError::Io)?;
    }
    Ok(target)
}

/// The label of a chosen wheel, for people.
pub fn label_of(wheel: &FoundWheel) -> Option<&VariantLabel> {
    wheel.filename.label.as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_links_in_every_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let args: Vec<String> = [
            "--no-index",
            "--find-links",
            &d,
            &format!("--find-links={d}"),
            "-f",
            &d,
            &format!("-f{d}"),
            &format!("file://{d}"),
            "--find-links",
            "https://example.org/wheels",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(find_links_dirs(&args).len(), 4);
    }

    #[test]
    fn versions_compare_numerically() {
        assert_eq!(compare_versions("1.10", "1.9"), Ordering::Greater);
        assert_eq!(compare_versions("2.0", "2.0"), Ordering::Equal);
        assert_eq!(compare_versions("2.0", "2.0.1"), Ordering::Less);
    }

    #[test]
    fn pins_are_read() {
        let requirement = Requirement::parse("demo==1.2; python_version > '3'").unwrap();
        assert_eq!(pinned(&requirement), Some("1.2"));
        assert_eq!(pinned(&Requirement::parse("demo>=1").unwrap()), None);
        assert_eq!(pinned(&Requirement::parse("demo==1.*").unwrap()), None);
    }
}

//! Variant wheels (PEP 825) in find-links directories and pages and in
//! package indexes: pip ignores them, so kpack-get picks the best for this
//! machine itself, using the release's `{name}-{version}-variants.json`,
//! and hands the installer that file under its plain wheel name
//! (installers refuse labelled names).

use std::cmp::Ordering;
use std::path::{Path, PathBuf};

use kpack_wheel::variants::{
    index_filename, order_candidates, Candidate, SupportedProperties, VariantsDocument,
};
use kpack_wheel::{DistName, WheelFilename};

use super::environment::PythonEnvironment;
use super::links::{Fetcher, FileKind, Link, LinkSource};
use super::requirement::Requirement;
use super::PipError;

/// A wheel file a source offers.
#[derive(Debug, Clone)]
pub struct FoundWheel {
    /// Where it is.
    pub link: Link,
    /// Its parsed name.
    pub filename: WheelFilename,
}

/// What the sources offer a requirement.
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
    Variant(Box<FoundWheel>),
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

/// The wheels of `dist` among links that install here.
fn wheels_of(links: &[Link], dist: &DistName, env: &PythonEnvironment) -> Vec<FoundWheel> {
    links
        .iter()
        .filter_map(|link| {
            let filename = WheelFilename::parse(&link.filename).ok()?;
            let fits = &filename.dist == dist
                && env.accepts_tags(&filename.python, &filename.abi, &filename.platform);
            fits.then(|| FoundWheel {
                link: link.clone(),
                filename,
            })
        })
        .collect()
}

/// The version a requirement pins with `==`, if it does.
fn pinned(requirement: &Requirement) -> Option<&str> {
    let spec = requirement.rest.split(';').next()?.trim();
    let version = spec.strip_prefix("==")?.trim();
    (!version.is_empty() && !version.contains([',', '*'])).then_some(version)
}

/// What kpack-get needs to choose variants: the sources, a fetcher, and
/// a directory for what it downloads.
#[derive(Debug)]
pub struct VariantSources<'a> {
    pub sources: Vec<LinkSource>,
    pub fetcher: Fetcher,
    pub staging: &'a Path,
}

/// The version to look at: the one pinned with `==`, else the newest.
fn release_version(wheels: &[FoundWheel], requirement: &Requirement) -> String {
    match pinned(requirement) {
        Some(version) => version.to_owned(),
        None => wheels
            .iter()
            .map(|w| w.filename.version.as_str())
            .max_by(|a, b| compare_versions(a, b))
            .unwrap_or_default()
            .to_owned(),
    }
}

/// Chooses among the variant wheels of a requirement: the pinned or newest
/// version, then the PEP 825 order for `supported`.
pub fn select(
    from: &mut VariantSources<'_>,
    requirement: &Requirement,
    env: &PythonEnvironment,
    supported: &SupportedProperties,
) -> Result<Selection, PipError> {
    let mut links = Vec::new();
    for source in &from.sources {
        links.extend(from.fetcher.links(source, &requirement.name)?);
    }
    let wheels = wheels_of(&links, &requirement.name, env);
    if !wheels.iter().any(|w| w.filename.label.is_some()) {
        return Ok(Selection::NoVariants);
    }
    let version = release_version(&wheels, requirement);
    let release: Vec<&FoundWheel> = wheels
        .iter()
        .filter(|w| compare_versions(&w.filename.version, &version) == Ordering::Equal)
        .collect();
    let Some(first) = release.iter().find(|w| w.filename.label.is_some()) else {
        return Ok(Selection::NoVariants);
    };
    let expected = index_filename(&requirement.name, &first.filename.version);
    let Some(index) = links.iter().find(|l| l.filename == expected) else {
        return Ok(Selection::NoIndex { expected });
    };
    let index = from
        .fetcher
        .fetch(index, FileKind::Index, from.staging, &expected)?;
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
        Some(best) => Selection::Variant(Box::new(best.clone())),
    })
}

/// Puts the chosen variant in the staging directory under its plain wheel
/// name (a hard link, a copy, or a download) and returns its path.
pub fn materialise(from: &mut VariantSources<'_>, wheel: &FoundWheel) -> Result<PathBuf, PipError> {
    let plain = wheel.filename.with_label(None).to_string();
    from.fetcher
        .fetch(&wheel.link, FileKind::Wheel, from.staging, &plain)
}

#[cfg(test)]
mod tests {
    use super::*;

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

//! The resolver's view of requirements: `pip install --dry-run --report -`,
//! whose JSON lists every distribution it would install with its metadata,
//! `provides_extra` included. Nothing is installed.

use std::process::Command;

use kpack_wheel::{DistName, ExtraName, RequiresDist};

use super::installer::run;
use super::PipError;

#[derive(Debug, serde::Deserialize)]
struct Report {
    #[serde(default)]
    install: Vec<Item>,
}

#[derive(Debug, serde::Deserialize)]
struct Item {
    metadata: ItemMetadata,
    #[serde(default)]
    requested: bool,
}

#[derive(Debug, serde::Deserialize)]
struct ItemMetadata {
    name: DistName,
    version: String,
    #[serde(default)]
    provides_extra: Vec<ExtraName>,
    #[serde(default)]
    requires_dist: Vec<String>,
}

/// One distribution the resolver would install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its name.
    pub name: DistName,
    /// The version chosen.
    pub version: String,
    /// The extras it provides.
    pub provides_extra: Vec<ExtraName>,
    /// Whether it was asked for (not only a dependency).
    pub requested: bool,
    /// Its requirements (those that cannot be read left out).
    pub requires_dist: Vec<RequiresDist>,
}

/// Parses a report.
pub fn parse(json: &[u8]) -> Result<Vec<Candidate>, PipError> {
    let report: Report = serde_json::from_slice(json).map_err(PipError::Report)?;
    Ok(report
        .install
        .into_iter()
        .map(|item| Candidate {
            name: item.metadata.name,
            version: item.metadata.version,
            provides_extra: item.metadata.provides_extra,
            requested: item.requested,
            requires_dist: item
                .metadata
                .requires_dist
                .iter()
                .filter_map(|text| RequiresDist::parse(text).ok())
                .collect(),
        })
        .collect())
}

/// Runs the resolver (`pip` as built by the caller) on requirements and
/// installer arguments; every candidate, installed or not.
pub fn resolve(
    mut pip: Command,
    requirements: &[String],
    args: &[String],
) -> Result<Vec<Candidate>, PipError> {
    pip.args([
        "install",
        "--dry-run",
        "--ignore-installed",
        "--report",
        "-",
        "--quiet",
    ])
    .args(args)
    .arg("--")
    .args(requirements)
    .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
    let output = run(&mut pip)?;
    parse(&output.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_versions_and_extras() {
        let json = br#"{"version": "1", "install": [
            {"metadata": {"name": "Demo", "version": "1.0", "provides_extra": ["device-gfx1100", "device-all"]},
             "requested": true, "download_info": {"url": "file:///w/demo-1.0-py3-none-any.whl"}},
            {"metadata": {"name": "numpy", "version": "2.0"}, "requested": false}]}"#;
        let candidates = parse(json).unwrap();
        assert_eq!(candidates[0].name.as_str(), "demo");
        assert_eq!(candidates[0].provides_extra.len(), 2);
        assert!(candidates[0].requested);
        assert!(candidates[1].provides_extra.is_empty());
        assert!(parse(br#"{"install": 3}"#).is_err());
    }
}

//! Requirements with the device extras this machine needs, learnt from
//! pip's resolver report ([`super::report`]); dependencies that provide
//! device extras are added as requirements of their own. What `pip
//! resolve` prints and `pip install` installs.

use std::process::Command;

use kpack_gpu::Target;
use kpack_wheel::ExtraName;
use serde::Serialize;

use super::extras::{choose, device_extras, unmatched_warning};
use super::prune::demanded_all;
use super::report;
use super::requirement::Requirement;
use super::PipError;
use crate::output::Output;

/// A requirement with the extras chosen for it.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub requirement: Requirement,
    /// The version the resolver chose, when it listed the distribution.
    pub version: Option<String>,
    /// The `device-*` extras it offers.
    pub offered: Vec<ExtraName>,
    /// The extras chosen for this machine.
    pub extras: Vec<ExtraName>,
    /// Whether it was added as a dependency offering device extras.
    pub dependency: bool,
    /// Its requirement demanding every GPU's device distributions, as an
    /// every-GPU index republishes an entry wheel (`torch[device-all]`).
    pub demands_all: Option<String>,
}

impl Resolved {
    /// A requirement before the resolver has said anything about it.
    fn new(requirement: Requirement, dependency: bool) -> Resolved {
        Resolved {
            requirement,
            version: None,
            offered: Vec::new(),
            extras: Vec::new(),
            dependency,
            demands_all: None,
        }
    }

    /// The requirement text to install.
    pub fn text(&self) -> String {
        self.requirement.with_extras(&self.extras)
    }

    /// The requirement text for people (a staged variant by its origin).
    pub fn shown(&self) -> String {
        self.requirement.shown_with_extras(&self.extras)
    }

    /// The requirement in a report.
    pub fn report(&self) -> ResolvedReport<'_> {
        ResolvedReport {
            dependency: self.dependency,
            extras: self.extras.iter().map(ExtraName::as_str).collect(),
            name: self.requirement.name.as_str(),
            offered: self.offered.iter().map(ExtraName::as_str).collect(),
            requirement: &self.requirement.text,
            resolved: self.text(),
            version: &self.version,
        }
    }
}

/// A requirement resolved, with its extras, in a report.
#[derive(Debug, Serialize)]
pub struct ResolvedReport<'a> {
    dependency: bool,
    extras: Vec<&'a str>,
    name: &'a str,
    offered: Vec<&'a str>,
    requirement: &'a str,
    /// The requirement text to install, with its extras.
    pub resolved: String,
    version: &'a Option<String>,
}

/// Resolves requirements (with `pip` as the caller built it) and chooses
/// each one's extras for `targets`, warning on `output` for every GPU a
/// distribution has no device code for.
pub fn resolve_requirements(
    pip: Command,
    targets: &[Target],
    requirements: &[Requirement],
    all_targets: bool,
    args: &[String],
    output: &dyn Output,
) -> Result<Vec<Resolved>, PipError> {
    let texts: Vec<String> = requirements.iter().map(|r| r.with_extras(&[])).collect();
    let candidates = report::resolve(pip, &texts, args)?;
    let mut out: Vec<Resolved> = requirements
        .iter()
        .map(|requirement| Resolved::new(requirement.clone(), false))
        .collect();
    for candidate in &candidates {
        let offered = device_extras(&candidate.provides_extra);
        let index = match out
            .iter()
            .position(|r| r.requirement.name == candidate.name)
        {
            Some(index) => index,
            None if offered.is_empty() => continue,
            None => {
                let requirement = Requirement::parse(candidate.name.as_str())?;
                out.push(Resolved::new(requirement, true));
                out.len() - 1
            }
        };
        let choice = choose(&candidate.provides_extra, targets, all_targets);
        for target in &choice.unmatched {
            output.warn(&unmatched_warning(
                candidate.name.as_str(),
                target,
                &offered,
            ));
        }
        let entry = &mut out[index];
        entry.version = Some(candidate.version.clone());
        entry.offered = offered;
        entry.extras = choice.extras;
        entry.demands_all = candidate
            .requires_dist
            .iter()
            .filter(|r| r.marker.is_none())
            .find(|r| demanded_all(&candidate.name, r).is_some())
            .map(|r| r.text.clone());
    }
    Ok(out)
}

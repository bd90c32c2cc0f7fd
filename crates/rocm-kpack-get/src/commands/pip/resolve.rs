//! `pip resolve`: each requirement with the device extras this machine
//! needs, learnt from pip's resolver report; dependencies that provide
//! device extras are added as requirements of their own.

use kpack_wheel::ExtraName;
use rocm_kpack_get::pip::extras::{choose, device_extras};
use rocm_kpack_get::pip::installer::resolver;
use rocm_kpack_get::pip::report;
use rocm_kpack_get::pip::requirement::Requirement;
use serde::Serialize;

use super::{environment, machine, unmatched_warning, Machine, MachineReport};
use crate::cli::PipOptions;
use crate::commands::{Context, Failure};
use crate::printer::SCHEMA;

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
}

impl Resolved {
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
    resolved: String,
    version: &'a Option<String>,
}

/// `pip resolve`'s report.
#[derive(Debug, Serialize)]
struct ResolveReport<'a> {
    schema: u32,
    machine: MachineReport,
    requirements: Vec<ResolvedReport<'a>>,
}

/// Resolves requirements and chooses each one's extras, warning for every
/// GPU a distribution has no device code for.
pub fn resolve_requirements(
    context: &Context,
    pip: std::process::Command,
    machine: &Machine,
    requirements: &[Requirement],
    all_targets: bool,
    args: &[String],
) -> Result<Vec<Resolved>, Failure> {
    let texts: Vec<String> = requirements.iter().map(|r| r.with_extras(&[])).collect();
    let candidates = report::resolve(pip, &texts, args)?;
    let mut out: Vec<Resolved> = requirements
        .iter()
        .map(|requirement| Resolved {
            requirement: requirement.clone(),
            version: None,
            offered: Vec::new(),
            extras: Vec::new(),
            dependency: false,
        })
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
                out.push(Resolved {
                    requirement,
                    version: None,
                    offered: Vec::new(),
                    extras: Vec::new(),
                    dependency: true,
                });
                out.len() - 1
            }
        };
        let choice = choose(&candidate.provides_extra, &machine.targets, all_targets);
        for target in &choice.unmatched {
            context
                .printer
                .warn(unmatched_warning(candidate.name.as_str(), target, &offered));
        }
        let entry = &mut out[index];
        entry.version = Some(candidate.version.clone());
        entry.offered = offered;
        entry.extras = choice.extras;
    }
    Ok(out)
}

pub fn resolve(
    context: &Context,
    requirements: &[String],
    options: &PipOptions,
    args: &[String],
) -> Result<(), Failure> {
    let machine = machine(context)?;
    machine.note_without_gpu(context);
    let env = environment(options.python.as_deref())?;
    let requirements = requirements
        .iter()
        .map(|r| Requirement::parse(r))
        .collect::<Result<Vec<_>, _>>()?;
    let resolved = resolve_requirements(
        context,
        resolver(&env)?,
        &machine,
        &requirements,
        options.all_targets,
        args,
    )?;
    for entry in &resolved {
        context.printer.line(entry.text());
    }
    context.printer.report(&ResolveReport {
        schema: SCHEMA,
        machine: machine.report(),
        requirements: resolved.iter().map(Resolved::report).collect(),
    });
    Ok(())
}

//! `pip resolve`: each requirement with the device extras this machine
//! needs, learnt from pip's resolver report; dependencies that provide
//! device extras are added as requirements of their own.

use rocm_kpack_get::pip::installer::resolver;
use rocm_kpack_get::pip::resolution::{resolve_requirements, Resolved, ResolvedReport};
use serde::Serialize;

use super::{environment, machine, MachineReport};
use crate::cli::PipOptions;
use crate::commands::{Context, Failure};
use crate::printer::SCHEMA;

/// `pip resolve`'s report.
#[derive(Debug, Serialize)]
struct ResolveReport<'a> {
    schema: u32,
    machine: MachineReport,
    requirements: Vec<ResolvedReport<'a>>,
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
    let requirements = super::requirements(requirements)?;
    let resolved = resolve_requirements(
        resolver(&env)?,
        &machine.targets,
        &requirements,
        options.all_targets,
        args,
        &context.printer,
    )?;
    let report = ResolveReport {
        schema: SCHEMA,
        machine: machine.report(),
        requirements: resolved.iter().map(Resolved::report).collect(),
    };
    for requirement in &report.requirements {
        context.printer.line(&requirement.resolved);
    }
    context.printer.report(&report);
    Ok(())
}

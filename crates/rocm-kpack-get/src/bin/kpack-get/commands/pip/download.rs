//! `pip download`: a fleet's wheels for offline installs
//! ([`rocm_kpack_get::pip::download`]).

use std::path::Path;

use rocm_kpack_get::pip::download::{download as fetch, Downloaded};
use rocm_kpack_get::pip::installer::resolver;
use serde::Serialize;

use super::{environment, machine, MachineReport};
use crate::cli::PipOptions;
use crate::commands::{Context, Failure};
use crate::printer::SCHEMA;

/// `pip download`'s report.
#[derive(Debug, Serialize)]
struct DownloadReport {
    schema: u32,
    #[serde(flatten)]
    downloaded: Downloaded,
    machine: MachineReport,
}

pub fn download(
    context: &Context,
    dest: &Path,
    requirements: &[String],
    options: &PipOptions,
    args: &[String],
) -> Result<(), Failure> {
    let machine = machine(context)?;
    machine.note_without_gpu(context);
    let env = environment(options.python.as_deref())?;
    let requirements = super::requirements(requirements)?;
    let downloaded = fetch(
        || resolver(&env),
        &machine.targets,
        &requirements,
        options.all_targets,
        args,
        dest,
        &context.printer,
    )?;
    context.printer.report(&DownloadReport {
        schema: SCHEMA,
        downloaded,
        machine: machine.report(),
    });
    Ok(())
}

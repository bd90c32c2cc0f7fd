//! `pip install`: variant wheels chosen for this machine from the
//! installer's sources (find-links directories and pages, package indexes),
//! the requirements installed by the environment's installer (pip, or uv
//! where there is no pip), then the device distributions they offer for
//! this machine, as `sync` installs them; then the split binaries laid out
//! for the environment's HIP runtime. A dry run resolves the requirements
//! with their device extras instead.

use kpack_wheel::variants::SupportedProperties;
use rocm_kpack_get::pip::environment::PythonEnvironment;
use rocm_kpack_get::pip::install::{self as variants, ChosenVariant, InstallJob, InstalledReport};
use rocm_kpack_get::pip::installer::{resolver, Installer, InstallerArgs};
use rocm_kpack_get::pip::layout::{lay_out, LayoutReport};
use rocm_kpack_get::pip::links::{sources, Fetcher};
use rocm_kpack_get::pip::requirement::Requirement;
use rocm_kpack_get::pip::variants::VariantSources;
use rocm_kpack_get::pip::PipError;
use serde::Serialize;

use super::{environment, machine, MachineReport};
use crate::cli::PipOptions;
use crate::commands::{Context, Exit, Failure};
use crate::printer::SCHEMA;
use crate::progress::{Files, Lines};

/// `pip install`'s report.
#[derive(Debug, Serialize)]
struct InstallReport<'a> {
    schema: u32,
    dry_run: bool,
    installer: String,
    layout: Option<LayoutReport>,
    machine: MachineReport,
    requirements: InstalledReport<'a>,
    variants: &'a [ChosenVariant],
}

/// Replaces requirements that have variant wheels in the installer's
/// sources (`args`) with the best variant, placed under its plain name in
/// `dir`.
fn choose_variants(
    context: &Context,
    env: &PythonEnvironment,
    supported: &SupportedProperties,
    requirements: &mut [Requirement],
    args: &[String],
    dir: &std::path::Path,
) -> Result<Vec<ChosenVariant>, Failure> {
    let sources = sources(args);
    if sources.is_empty() {
        return Ok(Vec::new());
    }
    let progress = Box::new(Lines::new(context.printer, Files::new()));
    let mut from = VariantSources {
        sources,
        fetcher: Fetcher::new(context.client()?, progress),
        staging: dir,
    };
    Ok(variants::choose_variants(
        &mut from,
        requirements,
        env,
        supported,
        &context.printer,
    )?)
}

pub fn install(
    context: &Context,
    requirements: &[String],
    options: &PipOptions,
    dry_run: bool,
    args: &[String],
) -> Result<(), Failure> {
    let machine = machine(context)?;
    machine.note_without_gpu(context);
    let env = environment(options.python.as_deref())?;
    let installer = Installer::for_environment(&env)?;
    let mut requirements = super::requirements(requirements)?;
    let staging = tempfile::Builder::new()
        .prefix("kpack-get-variants")
        .tempdir()
        .map_err(|e| Failure::new(Exit::Local, e))?;
    let supported = machine.supported()?;
    let variants = choose_variants(
        context,
        &env,
        &supported,
        &mut requirements,
        args,
        staging.path(),
    )?;
    let args = InstallerArgs::new(args);
    let job = InstallJob {
        env: &env,
        installer: &installer,
        targets: &machine.targets,
        all_targets: options.all_targets,
        dry_run,
        args: &args,
        output: &context.printer,
    };
    let installed = match resolver(&env) {
        Ok(pip) if dry_run => job.would_install(pip, &requirements)?,
        Ok(_) => job.install_then_sync(&requirements)?,
        Err(PipError::NoResolver { .. }) => {
            context.printer.note(
                "no pip to learn extras from (neither the environment's nor a python3 on PATH): \
                 installing as given, then the device extras of what is installed",
            );
            job.install_then_sync(&requirements)?
        }
        Err(error) => return Err(error.into()),
    };
    // Nothing is installed yet in a dry run, so there is nothing to lay out.
    let layout = if dry_run {
        None
    } else {
        let printer = &context.printer;
        lay_out(&env, &context.settings, &machine.targets, false, printer)?
    };
    context.printer.report(&InstallReport {
        schema: SCHEMA,
        dry_run,
        installer: installer.describe(),
        layout,
        machine: machine.report(),
        requirements: installed.report(),
        variants: &variants,
    });
    Ok(())
}

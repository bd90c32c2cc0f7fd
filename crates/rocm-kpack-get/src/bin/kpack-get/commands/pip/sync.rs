//! `pip sync`: after any install, installs the device distributions this
//! machine needs that the environment's distributions offering `device-*`
//! extras lack ([`rocm_kpack_get::pip::sync`]), then lays out their split
//! binaries for the environment's HIP runtime
//! ([`rocm_kpack_get::pip::layout`]): materialized where it does not follow
//! kpack markers, and again whenever a device distribution or the targets
//! changed. With `--prune`, the device distributions no GPU here needs
//! go too ([`rocm_kpack_get::pip::prune`]).

use rocm_kpack_get::pip::layout::{lay_out, LayoutReport};
use rocm_kpack_get::pip::prune::{prune_environment, PruneOutcome};
use rocm_kpack_get::pip::sync::{sync_environment, MissingReport};
use serde::Serialize;

use super::{environment, machine, MachineReport};
use crate::cli::PipOptions;
use crate::commands::{Context, Failure};
use crate::printer::SCHEMA;

/// `pip sync`'s report: the sync, the machine, the layout.
#[derive(Debug, Serialize)]
struct SyncCommandReport<'a> {
    schema: u32,
    dry_run: bool,
    installed: Vec<String>,
    installer: &'a Option<String>,
    layout: Option<LayoutReport>,
    machine: MachineReport,
    missing: Vec<MissingReport<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prune: Option<PruneOutcome>,
    with_device_extras: usize,
}

pub fn sync(
    context: &Context,
    options: &PipOptions,
    dry_run: bool,
    prune: bool,
    args: &[String],
) -> Result<(), Failure> {
    let machine = machine(context)?;
    machine.note_without_gpu(context);
    let env = environment(options.python.as_deref())?;
    let printer = &context.printer;
    let outcome = sync_environment(
        &env,
        &machine.targets,
        options.all_targets,
        dry_run,
        args,
        printer,
    )?;
    let pruned = match prune {
        true => Some(prune_environment(
            &env,
            &machine.targets,
            options.all_targets,
            dry_run,
            printer,
        )?),
        false => None,
    };
    let layout = lay_out(&env, &context.settings, &machine.targets, dry_run, printer)?;
    let sync = outcome.report();
    printer.report(&SyncCommandReport {
        schema: SCHEMA,
        dry_run: sync.dry_run,
        installed: sync.installed,
        installer: sync.installer,
        layout,
        machine: machine.report(),
        missing: sync.missing,
        prune: pruned,
        with_device_extras: sync.with_device_extras,
    });
    Ok(())
}

//! `pip sync`: after any install, reads what the environment has
//! (`*.dist-info/METADATA`, no pip needed), and for every distribution
//! offering `device-*` extras installs the device distributions this
//! machine needs that are missing, or installed at another version than
//! the host pins (after the host was upgraded).
//!
//! A missing device distribution is installed by the host's own
//! requirement for it, its `Requires-Dist: demo-device-gfx1100 == 1.0;
//! extra == "device-gfx1100"` without the marker: the installed host stays
//! the one authority for which device distributions and versions go with it
//! (whatever the publisher named them), and, unlike `demo[device-X]`, it
//! also works with the installer's `--no-deps`.
//!
//! Then the host distributions' split binaries are laid out for the
//! environment's HIP runtime ([`super::layout`]): materialized where it does
//! not follow kpack markers, and again whenever a device distribution or
//! the targets changed.

use kpack_wheel::{DistName, ExtraName, RequiresDist};
use rocm_kpack_get::pip::environment::{is_installed, InstalledDist, PythonEnvironment};
use rocm_kpack_get::pip::extras::{choose, device_extras};
use rocm_kpack_get::pip::installer::Installer;
use serde::Serialize;

use super::layout::{lay_out, LayoutReport};
use super::{environment, machine, unmatched_warning, Machine, MachineReport};
use crate::cli::PipOptions;
use crate::commands::{Context, Failure};
use crate::printer::SCHEMA;

/// A host distribution's device extra whose distributions are not all installed.
#[derive(Debug, Clone)]
struct Missing {
    host: DistName,
    version: String,
    extra: ExtraName,
    dists: Vec<DistName>,
    /// The host's requirements for them, without markers.
    requirements: Vec<String>,
}

/// What the machine needs from the installed distributions and lacks.
fn missing(
    context: &Context,
    installed: &[InstalledDist],
    machine: &Machine,
    all_targets: bool,
) -> (Vec<Missing>, usize) {
    let mut out = Vec::new();
    let mut hosts = 0;
    for dist in installed {
        let metadata = &dist.metadata;
        let offered = device_extras(&metadata.provides_extra);
        if offered.is_empty() {
            continue;
        }
        hosts += 1;
        let choice = choose(&metadata.provides_extra, &machine.targets, all_targets);
        for target in &choice.unmatched {
            context
                .printer
                .warn(unmatched_warning(metadata.name.as_str(), target, &offered));
        }
        for extra in choice.extras {
            let lacking: Vec<&RequiresDist> = metadata
                .requires_dist
                .iter()
                .filter(|r| r.extra().as_ref() == Some(&extra))
                .filter(|r| !is_installed(installed, &r.name, r.pinned_version()))
                .collect();
            if !lacking.is_empty() {
                out.push(Missing {
                    host: metadata.name.clone(),
                    version: metadata.version.clone(),
                    extra,
                    dists: lacking.iter().map(|r| r.name.clone()).collect(),
                    requirements: lacking
                        .iter()
                        .map(|r| r.without_marker().to_owned())
                        .collect(),
                });
            }
        }
    }
    (out, hosts)
}

/// What a sync found and did.
#[derive(Debug)]
pub struct SyncOutcome {
    missing: Vec<Missing>,
    /// How many installed distributions offer device extras.
    hosts: usize,
    /// The installer used, when something was missing.
    installer: Option<String>,
    dry_run: bool,
}

impl SyncOutcome {
    /// The requirements installed (or that would be, with `--dry-run`).
    fn requirements(&self) -> Vec<String> {
        self.missing
            .iter()
            .flat_map(|m| m.requirements.iter().cloned())
            .collect()
    }

    /// What was installed (nothing in a dry run).
    fn installed(&self) -> Vec<String> {
        if self.dry_run {
            Vec::new()
        } else {
            self.requirements()
        }
    }

    /// The sync in a report, as a step of another command.
    pub fn report(&self) -> SyncReport<'_> {
        SyncReport {
            dry_run: self.dry_run,
            installed: self.installed(),
            installer: &self.installer,
            missing: self.missing.iter().map(MissingReport::from).collect(),
            with_device_extras: self.hosts,
        }
    }
}

/// A sync in a report.
#[derive(Debug, Serialize)]
pub struct SyncReport<'a> {
    dry_run: bool,
    installed: Vec<String>,
    installer: &'a Option<String>,
    missing: Vec<MissingReport<'a>>,
    with_device_extras: usize,
}

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
    with_device_extras: usize,
}

/// A host's device extra that lacks distributions.
#[derive(Debug, Serialize)]
struct MissingReport<'a> {
    dists: Vec<&'a str>,
    extra: &'a str,
    host: &'a str,
    requirements: &'a [String],
    version: &'a str,
}

impl<'a> From<&'a Missing> for MissingReport<'a> {
    fn from(missing: &'a Missing) -> MissingReport<'a> {
        MissingReport {
            dists: missing.dists.iter().map(DistName::as_str).collect(),
            extra: missing.extra.as_str(),
            host: missing.host.as_str(),
            requirements: &missing.requirements,
            version: &missing.version,
        }
    }
}

/// Installs into `env` what the machine needs and lacks, saying what.
pub fn sync_environment(
    context: &Context,
    env: &PythonEnvironment,
    machine: &Machine,
    all_targets: bool,
    dry_run: bool,
    args: &[String],
) -> Result<SyncOutcome, Failure> {
    let installed = env.installed()?;
    let (missing, hosts) = missing(context, &installed, machine, all_targets);
    let mut outcome = SyncOutcome {
        missing,
        hosts,
        installer: None,
        dry_run,
    };
    if outcome.missing.is_empty() {
        context.printer.line(if hosts == 0 {
            "nothing to install: no installed distribution offers device extras".to_owned()
        } else {
            format!("nothing to install: the {hosts} distribution(s) with device extras have what this machine needs")
        });
        return Ok(outcome);
    }
    let installer = Installer::for_environment(env)?;
    for entry in &outcome.missing {
        let names: Vec<&str> = entry.dists.iter().map(DistName::as_str).collect();
        context.printer.line(format!(
            "{}: {} ({})",
            entry.host,
            entry.extra,
            names.join(", ")
        ));
    }
    let requirements = outcome.requirements();
    if !dry_run {
        let output = installer.install(&requirements, args)?;
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            context.printer.detail(line);
        }
    }
    let verb = if dry_run {
        "would install"
    } else {
        "installed"
    };
    context.printer.line(format!(
        "{verb} {} with {}",
        requirements.join(" "),
        installer.describe()
    ));
    outcome.installer = Some(installer.describe());
    Ok(outcome)
}

pub fn sync(
    context: &Context,
    options: &PipOptions,
    dry_run: bool,
    args: &[String],
) -> Result<(), Failure> {
    let machine = machine(context)?;
    machine.note_without_gpu(context);
    let env = environment(options.python.as_deref())?;
    let outcome = sync_environment(context, &env, &machine, options.all_targets, dry_run, args)?;
    let layout = lay_out(context, &env, &machine.targets, dry_run)?;
    let sync = outcome.report();
    context.printer.report(&SyncCommandReport {
        schema: SCHEMA,
        dry_run: sync.dry_run,
        installed: sync.installed,
        installer: sync.installer,
        layout,
        machine: machine.report(),
        missing: sync.missing,
        with_device_extras: sync.with_device_extras,
    });
    Ok(())
}

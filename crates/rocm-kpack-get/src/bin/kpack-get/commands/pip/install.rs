//! `pip install`: variant wheels chosen for this machine from the
//! installer's sources (find-links directories and pages, package indexes),
//! the requirements installed by the environment's installer (pip, or uv
//! where there is no pip), then the device distributions they offer for
//! this machine, as `sync` installs them; then the split binaries laid out
//! for the environment's HIP runtime. A dry run resolves the requirements
//! with their device extras instead.

use kpack_wheel::variants::SupportedProperties;
use rocm_kpack_get::pip::environment::PythonEnvironment;
use rocm_kpack_get::pip::installer::{resolver, Installer, InstallerArgs};
use rocm_kpack_get::pip::layout::{lay_out, LayoutReport};
use rocm_kpack_get::pip::links::{sources, Fetcher, LinkedFile};
use rocm_kpack_get::pip::requirement::Requirement;
use rocm_kpack_get::pip::resolution::{resolve_requirements, Resolved, ResolvedReport};
use rocm_kpack_get::pip::sync::{sync_environment, SyncOutcome, SyncReport};
use rocm_kpack_get::pip::variants::{materialise, select, Selection, VariantSources};
use rocm_kpack_get::pip::PipError;
use serde::Serialize;

use super::{environment, machine, Machine, MachineReport};
use crate::cli::PipOptions;
use crate::commands::{Context, Exit, Failure};
use crate::printer::SCHEMA;
use crate::progress::{Files, Lines};

/// A variant wheel chosen for a requirement.
#[derive(Debug, Serialize)]
struct Chosen {
    /// The file or URL it came from.
    #[serde(rename = "file")]
    source: String,
    label: String,
    name: String,
}

/// What the installer was given, and a sync after it when one was needed.
enum Installed {
    /// Requirements resolved with their extras.
    Resolved {
        resolved: Vec<Resolved>,
        sync: Option<SyncOutcome>,
    },
    /// Requirements as given, without pip to resolve them.
    AsGiven {
        texts: Vec<String>,
        sync: Option<SyncOutcome>,
    },
}

/// `requirements` in `pip install`'s report: the resolved requirements,
/// or with a sync after them both.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum InstalledReport<'a> {
    Resolved(Vec<ResolvedReport<'a>>),
    WithSync {
        requirements: Vec<ResolvedReport<'a>>,
        sync: SyncReport<'a>,
    },
    AsGiven {
        requirements: &'a [String],
        #[serde(skip_serializing_if = "Option::is_none")]
        sync: Option<SyncReport<'a>>,
    },
}

impl Installed {
    fn report(&self) -> InstalledReport<'_> {
        match self {
            Installed::Resolved { resolved, sync } => {
                let requirements = resolved.iter().map(Resolved::report).collect();
                match sync {
                    Some(sync) => InstalledReport::WithSync {
                        requirements,
                        sync: sync.report(),
                    },
                    None => InstalledReport::Resolved(requirements),
                }
            }
            Installed::AsGiven { texts, sync } => InstalledReport::AsGiven {
                requirements: texts,
                sync: sync.as_ref().map(SyncOutcome::report),
            },
        }
    }
}

/// `pip install`'s report.
#[derive(Debug, Serialize)]
struct InstallReport<'a> {
    schema: u32,
    dry_run: bool,
    installer: String,
    layout: Option<LayoutReport>,
    machine: MachineReport,
    requirements: InstalledReport<'a>,
    variants: &'a [Chosen],
}

/// Replaces requirements that have variant wheels in the installer's
/// sources with the best variant, placed under its plain name in `dir`.
fn choose_variants(
    context: &Context,
    env: &PythonEnvironment,
    supported: &SupportedProperties,
    requirements: &mut [Requirement],
    args: &[String],
    dir: &std::path::Path,
) -> Result<Vec<Chosen>, Failure> {
    let mut chosen = Vec::new();
    let sources = sources(args);
    if sources.is_empty() {
        return Ok(chosen);
    }
    let progress = Box::new(Lines::new(context.printer, Files::new()));
    let mut from = VariantSources {
        sources,
        fetcher: Fetcher::new(context.client()?, progress),
        staging: dir,
    };
    for requirement in requirements.iter_mut().filter(|r| r.path.is_none()) {
        let name = requirement.name.to_string();
        match select(&mut from, requirement, env, supported)? {
            Selection::NoVariants => {}
            Selection::Plain => context
                .printer
                .detail(format!("{name}: no variant fits this machine better than the plain wheel")),
            Selection::NoIndex { expected } => context.printer.warn(format!(
                "{name} has variant wheels but no {expected} describing them; they are ignored"
            )),
            Selection::NoneCompatible { version } => context.printer.warn(format!(
                "{name} {version}: no variant wheel fits this machine's GPUs and there is no plain wheel"
            )),
            Selection::Variant(wheel) => {
                let file = materialise(&mut from, &wheel)?;
                let label = wheel.filename.label.as_ref().map(ToString::to_string).unwrap_or_default();
                context
                    .printer
                    .line(format!("{name}: variant {label} ({})", wheel.link.filename));
                let source = match &wheel.link.location {
                    LinkedFile::File(path) => path.display().to_string(),
                    LinkedFile::Url(url) => url.to_string(),
                };
                *requirement = requirement.for_file(&file, source.clone());
                chosen.push(Chosen {
                    name,
                    label,
                    source,
                });
            }
        }
    }
    Ok(chosen)
}

/// What an install works with.
struct Job<'a> {
    context: &'a Context,
    env: &'a PythonEnvironment,
    installer: &'a Installer,
    machine: &'a Machine,
    options: &'a PipOptions,
    dry_run: bool,
    args: &'a InstallerArgs,
}

impl Job<'_> {
    /// A dry run: requirements resolved with their extras by pip's report,
    /// said as what would be installed.
    fn would_install(
        &self,
        pip: std::process::Command,
        requirements: &[Requirement],
    ) -> Result<Installed, Failure> {
        let resolved = resolve_requirements(
            pip,
            &self.machine.targets,
            requirements,
            self.options.all_targets,
            &self.args.args,
            &self.context.printer,
        )?;
        let shown: Vec<String> = resolved.iter().map(Resolved::shown).collect();
        self.context.printer.line(format!(
            "would install {} with {}",
            shown.join(" "),
            self.installer.describe()
        ));
        Ok(Installed::Resolved {
            resolved,
            sync: None,
        })
    }

    /// Installs the device distributions the environment lacks, as `sync`.
    fn sync(&self) -> Result<SyncOutcome, Failure> {
        let outcome = sync_environment(
            self.env,
            &self.machine.targets,
            self.options.all_targets,
            false,
            &self.args.args,
            &self.context.printer,
        )?;
        Ok(outcome)
    }

    /// Installs the requirements as given, then what a sync finds the
    /// environment lacks: each wheel is fetched once, where resolving the
    /// extras first would fetch the host wheels twice.
    fn install_then_sync(&self, requirements: &[Requirement]) -> Result<Installed, Failure> {
        let printer = &self.context.printer;
        let texts: Vec<String> = requirements.iter().map(|r| r.with_extras(&[])).collect();
        let shown: Vec<String> = requirements
            .iter()
            .map(|r| r.shown_with_extras(&[]))
            .collect();
        if self.dry_run {
            printer.line(format!(
                "would install {} with {}, then the device extras it offers",
                shown.join(" "),
                self.installer.describe()
            ));
            return Ok(Installed::AsGiven { texts, sync: None });
        }
        let output = self
            .installer
            .install(&texts, &self.args.args, printer.bars)?;
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            printer.detail(line);
        }
        printer.line(format!(
            "installed {} with {}",
            shown.join(" "),
            self.installer.describe()
        ));
        let sync = Some(self.sync()?);
        Ok(Installed::AsGiven { texts, sync })
    }
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
    let mut requirements = requirements
        .iter()
        .map(|r| Requirement::parse(r))
        .collect::<Result<Vec<_>, _>>()?;
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
    let job = Job {
        context,
        env: &env,
        installer: &installer,
        machine: &machine,
        options,
        dry_run,
        args: &args,
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

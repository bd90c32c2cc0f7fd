//! `pip install`: variant wheels chosen for this machine from the
//! installer's sources (find-links directories and pages, package indexes),
//! requirements resolved with their device extras, then the environment's
//! installer (pip, or uv where there is no pip); then the split binaries
//! laid out for the environment's HIP runtime, as `sync` does.

use kpack_wheel::variants::SupportedProperties;
use rocm_kpack_get::pip::environment::PythonEnvironment;
use rocm_kpack_get::pip::installer::{resolver, Installer};
use rocm_kpack_get::pip::links::{sources, Fetcher, LinkedFile};
use rocm_kpack_get::pip::requirement::{file_url, Requirement};
use rocm_kpack_get::pip::variants::{materialise, select, Selection, VariantSources};
use rocm_kpack_get::pip::PipError;
use serde_json::json;

use super::layout::lay_out;
use super::resolve::{resolve_requirements, Resolved};
use super::sync::sync_environment;
use super::{environment, machine, Machine};
use crate::cli::PipOptions;
use crate::commands::{Context, Exit, Failure};
use crate::progress::Lines;

/// A variant wheel chosen for a requirement.
struct Chosen {
    name: String,
    label: String,
    /// The file or URL it came from.
    source: String,
    /// The `file://` URL of its copy under the plain name, which the
    /// installer is given.
    staged: String,
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
    let progress = Box::new(Lines::new(context.printer));
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
                *requirement = requirement.for_file(&file);
                chosen.push(Chosen {
                    name,
                    label,
                    staged: file_url(&file),
                    source: match &wheel.link.location {
                        LinkedFile::File(path) => path.display().to_string(),
                        LinkedFile::Url(url) => url.to_string(),
                    },
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
    args: &'a [String],
    variants: &'a [Chosen],
}

impl Job<'_> {
    /// The requirements given to the installer as the user reads them: a
    /// chosen variant by where it came from, not by its temporary copy.
    fn shown(&self, texts: &[String]) -> String {
        let mut shown = texts.join(" ");
        for variant in self.variants {
            shown = shown.replace(&variant.staged, &variant.source);
        }
        shown
    }

    /// Installs requirements resolved with their extras by pip's report.
    fn install_resolved(
        &self,
        pip: std::process::Command,
        requirements: &[Requirement],
    ) -> Result<serde_json::Value, Failure> {
        let resolved = resolve_requirements(
            self.context,
            pip,
            self.machine,
            requirements,
            self.options.all_targets,
            self.args,
        )?;
        let texts: Vec<String> = resolved.iter().map(Resolved::text).collect();
        if !self.dry_run {
            let output = self.installer.install(&texts, self.args)?;
            for line in String::from_utf8_lossy(&output.stdout).lines() {
                self.context.printer.detail(line);
            }
        }
        let verb = if self.dry_run {
            "would install"
        } else {
            "installed"
        };
        self.context.printer.line(format!(
            "{verb} {} with {}",
            self.shown(&texts),
            self.installer.describe()
        ));
        let resolved = json!(resolved.iter().map(Resolved::json).collect::<Vec<_>>());
        // `--no-deps` leaves an extra's requirements out, device
        // distributions included: bring those in as a sync does.
        if !self.dry_run && self.args.iter().any(|a| a == "--no-deps") {
            return Ok(json!({ "requirements": resolved, "sync": self.sync()? }));
        }
        Ok(resolved)
    }

    /// Installs the device distributions the environment lacks, as `sync`.
    fn sync(&self) -> Result<serde_json::Value, Failure> {
        let outcome = sync_environment(
            self.context,
            self.env,
            self.machine,
            self.options.all_targets,
            false,
            self.args,
        )?;
        Ok(outcome.json())
    }

    /// Without pip anywhere to resolve with: installs the requirements as
    /// given, then what a sync finds missing in the environment.
    fn install_then_sync(
        &self,
        requirements: &[Requirement],
    ) -> Result<serde_json::Value, Failure> {
        let printer = &self.context.printer;
        printer.note(
            "no pip to learn extras from (neither the environment's nor a python3 on PATH): \
             installing as given, then the device extras of what is installed",
        );
        let texts: Vec<String> = requirements.iter().map(|r| r.with_extras(&[])).collect();
        if self.dry_run {
            printer.line(format!(
                "would install {} with {}, then the device extras it offers",
                self.shown(&texts),
                self.installer.describe()
            ));
            return Ok(json!({ "requirements": texts }));
        }
        self.installer.install(&texts, self.args)?;
        printer.line(format!(
            "installed {} with {}",
            self.shown(&texts),
            self.installer.describe()
        ));
        Ok(json!({ "requirements": texts, "sync": self.sync()? }))
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
    let job = Job {
        context,
        env: &env,
        installer: &installer,
        machine: &machine,
        options,
        dry_run,
        args,
        variants: &variants,
    };
    let installed = match resolver(&env) {
        Ok(pip) => job.install_resolved(pip, &requirements)?,
        Err(PipError::NoResolver { .. }) => job.install_then_sync(&requirements)?,
        Err(error) => return Err(error.into()),
    };
    // Nothing is installed yet in a dry run, so there is nothing to lay out.
    let layout = if dry_run {
        None
    } else {
        lay_out(context, &env, &machine.targets, false)?
    };
    context.printer.json(&json!({
        "machine": machine.json(),
        "dry_run": dry_run,
        "installer": installer.describe(),
        "requirements": installed,
        "layout": layout,
        "variants": variants.iter().map(|v| json!({
            "name": v.name, "label": v.label, "file": v.source,
        })).collect::<Vec<_>>(),
    }));
    Ok(())
}

//! `pip install` as kpack-get runs it: variant wheels chosen for this
//! machine from the installer's sources, the requirements installed by the
//! environment's installer as given, then the device distributions they
//! offer for this machine, as a sync installs them; a dry run resolves the
//! requirements with their device extras instead.

use kpack_gpu::Target;
use kpack_wheel::variants::SupportedProperties;
use serde::Serialize;

use super::environment::PythonEnvironment;
use super::installer::{Installer, InstallerArgs};
use super::links::LinkedFile;
use super::requirement::Requirement;
use super::resolution::{resolve_requirements, Resolved, ResolvedReport};
use super::sync::{sync_environment, SyncOutcome, SyncReport};
use super::variants::{materialise, select, Selection, VariantSources};
use super::PipError;
use crate::output::Output;

/// A variant wheel chosen for a requirement.
#[derive(Debug, Serialize)]
pub struct ChosenVariant {
    /// The file or URL it came from.
    #[serde(rename = "file")]
    pub source: String,
    pub label: String,
    pub name: String,
}

/// Replaces the requirements that have variant wheels in `from` with the
/// best variant for `supported`, placed under its plain name in `from`'s
/// staging directory; says what it chose and why not.
pub fn choose_variants(
    from: &mut VariantSources<'_>,
    requirements: &mut [Requirement],
    env: &PythonEnvironment,
    supported: &SupportedProperties,
    output: &dyn Output,
) -> Result<Vec<ChosenVariant>, PipError> {
    let mut chosen = Vec::new();
    for requirement in requirements.iter_mut().filter(|r| r.path.is_none()) {
        let name = requirement.name.to_string();
        match select(from, requirement, env, supported)? {
            Selection::NoVariants => {}
            Selection::Plain => output.detail(&format!(
                "{name}: no variant fits this machine better than the plain wheel"
            )),
            Selection::NoIndex { expected } => output.warn(&format!(
                "{name} has variant wheels but no {expected} describing them; they are ignored"
            )),
            Selection::NoneCompatible { version } => output.warn(&format!(
                "{name} {version}: no variant wheel fits this machine's GPUs and there is no plain wheel"
            )),
            Selection::Variant(wheel) => {
                let file = materialise(from, &wheel)?;
                let label = wheel.filename.label.as_ref().map(ToString::to_string).unwrap_or_default();
                output.line(&format!("{name}: variant {label} ({})", wheel.link.filename));
                let source = match &wheel.link.location {
                    LinkedFile::File(path) => path.display().to_string(),
                    LinkedFile::Url(url) => url.to_string(),
                };
                *requirement = requirement.for_file(&file, source.clone());
                chosen.push(ChosenVariant {
                    name,
                    label,
                    source,
                });
            }
        }
    }
    Ok(chosen)
}

/// What the installer was given, and a sync after it when one was needed.
#[derive(Debug)]
pub enum Installed {
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
pub enum InstalledReport<'a> {
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
    pub fn report(&self) -> InstalledReport<'_> {
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

/// An install into one environment, for one machine's GPUs.
pub struct InstallJob<'a> {
    pub env: &'a PythonEnvironment,
    pub installer: &'a Installer,
    pub targets: &'a [Target],
    /// Every target's device extras, not only the machine's.
    pub all_targets: bool,
    pub dry_run: bool,
    pub args: &'a InstallerArgs,
    pub output: &'a dyn Output,
}

impl std::fmt::Debug for InstallJob<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstallJob")
            .field("env", self.env)
            .field("installer", self.installer)
            .field("targets", &self.targets)
            .field("dry_run", &self.dry_run)
            .finish_non_exhaustive()
    }
}

impl InstallJob<'_> {
    /// A dry run: requirements resolved with their extras by pip's report
    /// (`pip`), said as what would be installed.
    pub fn would_install(
        &self,
        pip: std::process::Command,
        requirements: &[Requirement],
    ) -> Result<Installed, PipError> {
        let resolved = resolve_requirements(
            pip,
            self.targets,
            requirements,
            self.all_targets,
            &self.args.args,
            self.output,
        )?;
        let shown: Vec<String> = resolved.iter().map(Resolved::shown).collect();
        self.output.line(&format!(
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
    fn sync(&self) -> Result<SyncOutcome, PipError> {
        sync_environment(
            self.env,
            self.targets,
            self.all_targets,
            false,
            &self.args.args,
            self.output,
        )
    }

    /// Installs the requirements as given, then what a sync finds the
    /// environment lacks: each wheel is fetched once, where resolving the
    /// extras first would fetch the host wheels twice.
    pub fn install_then_sync(&self, requirements: &[Requirement]) -> Result<Installed, PipError> {
        let output = self.output;
        let texts: Vec<String> = requirements.iter().map(|r| r.with_extras(&[])).collect();
        let shown: Vec<String> = requirements
            .iter()
            .map(|r| r.shown_with_extras(&[]))
            .collect();
        if self.dry_run {
            output.line(&format!(
                "would install {} with {}, then the device extras it offers",
                shown.join(" "),
                self.installer.describe()
            ));
            return Ok(Installed::AsGiven { texts, sync: None });
        }
        let installed = self
            .installer
            .install(&texts, &self.args.args, output.watched())?;
        for line in String::from_utf8_lossy(&installed.stdout).lines() {
            output.detail(line);
        }
        output.line(&format!(
            "installed {} with {}",
            shown.join(" "),
            self.installer.describe()
        ));
        let sync = Some(self.sync()?);
        Ok(Installed::AsGiven { texts, sync })
    }
}

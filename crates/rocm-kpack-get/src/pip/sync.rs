//! The device distributions an environment lacks, and installing them:
//! reads what the environment has (`*.dist-info/METADATA`, no pip needed),
//! and for every distribution offering `device-*` extras installs the
//! device distributions this machine needs that are missing, or installed
//! at another version than the host pins (after the host was upgraded).
//!
//! A missing device distribution is installed by the host's own
//! requirement for it, its `Requires-Dist: demo-device-gfx1100 == 1.0;
//! extra == "device-gfx1100"` without the marker: the installed host stays
//! the one authority for which device distributions and versions go with it
//! (whatever the publisher named them), and, unlike `demo[device-X]`, it
//! also works with the installer's `--no-deps`. `pip sync` runs it, and
//! `pip install` after an installer that left extras out.

use kpack_gpu::Target;
use kpack_wheel::{DistName, ExtraName, RequiresDist};
use serde::Serialize;

use super::environment::{is_installed, InstalledDist, PythonEnvironment};
use super::extras::{choose, device_extras, unmatched_warning};
use super::installer::Installer;
use super::PipError;
use crate::output::Output;

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

impl Missing {
    /// `demo: device-gfx1100 (demo-device-gfx1100)`.
    fn line(&self) -> String {
        let names: Vec<&str> = self.dists.iter().map(DistName::as_str).collect();
        format!("{}: {} ({})", self.host, self.extra, names.join(", "))
    }
}

/// What the machine needs from the installed distributions and lacks, and
/// how many of them offer device extras; warns for every GPU one has no
/// device code for.
fn missing(
    installed: &[InstalledDist],
    targets: &[Target],
    all_targets: bool,
    output: &dyn Output,
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
        let choice = choose(&metadata.provides_extra, targets, all_targets);
        for target in &choice.unmatched {
            output.warn(&unmatched_warning(metadata.name.as_str(), target, &offered));
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

    /// The line saying that nothing is missing.
    fn nothing_line(&self) -> String {
        match self.hosts {
            0 => "nothing to install: no installed distribution offers device extras".to_owned(),
            hosts => format!("nothing to install: the {hosts} distribution(s) with device extras have what this machine needs"),
        }
    }

    /// The sync in a report.
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
    pub dry_run: bool,
    pub installed: Vec<String>,
    pub installer: &'a Option<String>,
    pub missing: Vec<MissingReport<'a>>,
    pub with_device_extras: usize,
}

/// A host's device extra that lacks distributions.
#[derive(Debug, Serialize)]
pub struct MissingReport<'a> {
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

/// Installs into `env` what the machine's `targets` need and it lacks
/// (nothing with `dry_run`), saying what on `output`.
pub fn sync_environment(
    env: &PythonEnvironment,
    targets: &[Target],
    all_targets: bool,
    dry_run: bool,
    args: &[String],
    output: &dyn Output,
) -> Result<SyncOutcome, PipError> {
    let installed = env.installed()?;
    for line in &installed.skipped {
        output.warn(line);
    }
    let (missing, hosts) = missing(&installed.dists, targets, all_targets, output);
    let mut outcome = SyncOutcome {
        missing,
        hosts,
        installer: None,
        dry_run,
    };
    if outcome.missing.is_empty() {
        output.line(&outcome.nothing_line());
        return Ok(outcome);
    }
    let installer = Installer::for_environment(env)?;
    for entry in &outcome.missing {
        output.line(&entry.line());
    }
    let requirements = outcome.requirements();
    if !dry_run {
        let installed = installer.install(&requirements, args, output.watched())?;
        for line in String::from_utf8_lossy(&installed.stdout).lines() {
            output.detail(line);
        }
    }
    let verb = if dry_run {
        "would install"
    } else {
        "installed"
    };
    output.line(&format!(
        "{verb} {} with {}",
        requirements.join(" "),
        installer.describe()
    ));
    outcome.installer = Some(installer.describe());
    Ok(outcome)
}

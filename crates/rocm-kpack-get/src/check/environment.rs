//! Checking a Python environment: every installed distribution offering
//! device extras, for every GPU, against the extra chosen for it (as `pip
//! sync` chooses): its device distributions installed, or another GPU's
//! installed instead, or none; and the distribution's split binaries as
//! installed (host-only ones through the runtime's loader, materialized
//! ones as fat binaries).

use std::path::Path;

use kpack_gpu::Target;
use kpack_wheel::{DistName, ExtraName, RequiresDist};
use rocm_kpack::{Loader, LoaderConfig};

use super::binary::{check_binary, BinaryKind};
use super::fix::Invocation;
use super::report::{CheckReport, Checked, Finding, Place, Reason, Remedy};
use super::CheckError;
use crate::pip::environment::{is_installed, InstalledDist, PythonEnvironment};
use crate::pip::extras::{choose, device_extras, join_extras, ALL};
use crate::pip::materialize::HostBinaries;

/// A Python environment to check, and for which GPUs.
#[derive(Debug)]
pub struct EnvironmentCheck<'a> {
    pub env: &'a PythonEnvironment,
    pub gpus: &'a [Target],
    /// Device code for every target (`device-all`) was asked for.
    pub all_targets: bool,
    pub invocation: &'a Invocation,
}

impl EnvironmentCheck<'_> {
    /// Checks every distribution offering device extras for every GPU.
    pub fn run(&self) -> Result<CheckReport, CheckError> {
        let environment = self.env.installed()?;
        let installed = environment.dists;
        let loader = Loader::new(LoaderConfig::default());
        let mut findings = Vec::new();
        let mut notes = environment.skipped;
        let (mut hosts, mut split, mut fat) = (0, 0, 0);
        for dist in &installed {
            if device_extras(&dist.metadata.provides_extra).is_empty() {
                continue;
            }
            hosts += 1;
            let host = Host {
                dist,
                installed: &installed,
            };
            let own: Vec<Finding> = self
                .gpus
                .iter()
                .filter_map(|gpu| host.finding(gpu, self.all_targets))
                .collect();
            let binaries = HostBinaries::find(dist)?;
            notes.extend(
                binaries
                    .skipped
                    .iter()
                    .map(|line| format!("{}: {line}", binaries.name)),
            );
            let site = dist.dist_info.parent().unwrap_or(Path::new("/"));
            for binary in &binaries.binaries {
                let Some(check) = check_binary(&loader, &binary.installed, site, self.gpus) else {
                    continue;
                };
                match check.kind {
                    BinaryKind::Split => split += 1,
                    BinaryKind::Fat => fat += 1,
                }
                for failure in check.failures {
                    let remedy = match own.iter().find(|f| f.gpu == failure.gpu) {
                        Some(finding) => finding.remedy,
                        None if check.kind == BinaryKind::Fat => Remedy::Sync,
                        None => Remedy::None,
                    };
                    findings.push(Finding {
                        path: Some(binary.path.clone()),
                        reason: failure.reason,
                        detail: failure.detail,
                        remedy,
                        ..host.finding_for(failure.gpu)
                    });
                }
            }
            findings.extend(own);
        }
        let position = |gpu: &Target| self.gpus.iter().position(|g| g == gpu);
        findings.sort_by_key(|f| (position(&f.gpu), f.package.clone(), f.path.is_some()));
        let checked = Checked {
            place: Place::Python {
                python: self.env.python.clone(),
                site_dirs: self.env.site_dirs.clone(),
            },
            packages: hosts,
            split_binaries: split,
            fat_binaries: fat,
        };
        notes.extend(orphans(&installed));
        let fix = self.invocation.sync(&findings);
        if fix.is_some() {
            notes.push(INSTALLER_ARGS.to_owned());
        }
        Ok(CheckReport::new(checked, self.gpus, findings, fix, notes))
    }
}

/// What `pip sync` cannot know of how the distributions were installed.
pub(crate) const INSTALLER_ARGS: &str =
    "pip sync installs with the environment's installer and its \
configuration: if the distributions came from a find-links directory or another index, or were \
installed with --no-deps, give the same installer arguments after `--` \
(`kpack-get pip sync -- --find-links DIR`)";

/// Device distributions whose host distribution is not installed (it was
/// uninstalled after them): nothing loads their code.
fn orphans(installed: &[InstalledDist]) -> Vec<String> {
    let names: Vec<&str> = installed.iter().map(|d| d.metadata.name.as_str()).collect();
    installed
        .iter()
        .filter_map(|dist| {
            let name = dist.metadata.name.as_str();
            let (host, _) = name.rsplit_once("-device-")?;
            (!names.contains(&host)).then(|| {
                format!(
                    "{name} {} is installed without {host}, whose device code it holds: \
                     `pip uninstall {name}` removes it",
                    dist.metadata.version
                )
            })
        })
        .collect()
}

/// An installed distribution with device extras, among all installed.
struct Host<'a> {
    dist: &'a InstalledDist,
    installed: &'a [InstalledDist],
}

impl Host<'_> {
    /// A finding about this distribution for `gpu`, to fill in.
    fn finding_for(&self, gpu: Target) -> Finding {
        Finding {
            gpu,
            package: self.dist.metadata.name.to_string(),
            version: self.dist.metadata.version.clone(),
            path: None,
            reason: Reason::DevicePackageMissing,
            detail: String::new(),
            remedy: Remedy::Sync,
        }
    }

    /// What the distribution lacks for `gpu`: no extra for it, or the
    /// chosen extra's device distributions not installed (another GPU's
    /// installed instead, or none).
    fn finding(&self, gpu: &Target, all_targets: bool) -> Option<Finding> {
        let metadata = &self.dist.metadata;
        let choice = choose(
            &metadata.provides_extra,
            std::slice::from_ref(gpu),
            all_targets,
        );
        if !choice.unmatched.is_empty() {
            let offered = device_extras(&metadata.provides_extra);
            return Some(Finding {
                reason: Reason::NotPublished,
                detail: format!("it offers {} only", join_extras(&offered)),
                remedy: Remedy::None,
                ..self.finding_for(gpu.clone())
            });
        }
        let extra = choice.extras.first()?;
        let wanted = self.requirements(|e| e == extra);
        let lacking: Vec<&RequiresDist> = wanted
            .iter()
            .copied()
            .filter(|r| !is_installed(self.installed, &r.name, r.pinned_version()))
            .collect();
        if lacking.is_empty() {
            return None;
        }
        let needed = lacking
            .iter()
            .map(|r| self.requirement_state(r))
            .collect::<Vec<_>>()
            .join(", ");
        let others: Vec<String> = self
            .requirements(|e| e != extra && e.as_str() != ALL)
            .iter()
            .filter(|r| !wanted.iter().any(|w| w.name == r.name))
            .filter_map(|r| self.installed_version(&r.name))
            .collect();
        let (reason, detail) = if others.is_empty() {
            (
                Reason::DevicePackageMissing,
                format!("{extra} needs {needed}"),
            )
        } else {
            (
                Reason::WrongDevicePackage,
                format!("{} installed; {extra} needs {needed}", others.join(", ")),
            )
        };
        Some(Finding {
            reason,
            detail,
            ..self.finding_for(gpu.clone())
        })
    }

    /// The distribution's requirements for the device extras `which` takes.
    fn requirements(&self, which: impl Fn(&ExtraName) -> bool) -> Vec<&RequiresDist> {
        let mut found: Vec<&RequiresDist> = Vec::new();
        for requirement in &self.dist.metadata.requires_dist {
            let Some(extra) = requirement.extra() else {
                continue;
            };
            let new = !found.iter().any(|r| r.name == requirement.name);
            if extra.device_suffix().is_some() && which(&extra) && new {
                found.push(requirement);
            }
        }
        found
    }

    /// `NAME VERSION` of an installed distribution.
    fn installed_version(&self, name: &DistName) -> Option<String> {
        self.installed
            .iter()
            .find(|d| &d.metadata.name == name)
            .map(|d| format!("{} {}", d.metadata.name, d.metadata.version))
    }

    /// A requirement and what is installed of it: `demo-device-gfx1100==1.0
    /// (not installed)`, or `(0.9 installed)`.
    fn requirement_state(&self, requirement: &RequiresDist) -> String {
        let installed = self
            .installed
            .iter()
            .find(|d| d.metadata.name == requirement.name);
        match installed {
            Some(dist) => format!(
                "{} ({} installed)",
                requirement.without_marker(),
                dist.metadata.version
            ),
            None => format!("{} (not installed)", requirement.without_marker()),
        }
    }
}

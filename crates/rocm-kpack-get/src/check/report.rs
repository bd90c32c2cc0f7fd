//! The report of `check` and `pip check`, built once and rendered as text
//! or JSON: what was checked, each GPU and whether it is served, every
//! way one is not (a finding), and the one command that fixes them.

use std::fmt;
use std::path::PathBuf;

use kpack_gpu::Target;
use serde::Serialize;

use crate::output::Output;

/// A command that fixes findings (made in `fix`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FixCommand {
    /// For a shell: each argument quoted where it needs to be.
    pub command: String,
    /// The program and its arguments, as a process runs them.
    pub argv: Vec<String>,
}

/// The report's format version, `schema` in JSON; fields are added, never
/// repurposed.
pub const SCHEMA: u32 = 1;

/// What a check found.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub schema: u32,
    /// Where and how much was checked.
    pub checked: Checked,
    /// Each GPU, and whether everything installed serves it.
    pub gpus: Vec<GpuStatus>,
    /// Every way a GPU is not served, GPU by GPU.
    pub findings: Vec<Finding>,
    /// The one command that fixes what a command can fix; none when
    /// nothing needs fixing or no command can.
    pub fix: Option<FixCommand>,
    /// Whether every GPU is served (also when there is no GPU).
    pub served: bool,
    /// What the check could not look at, and why.
    pub notes: Vec<String>,
    /// What is wrong beyond what is installed: gfx1250 A0 silicon the
    /// runtime reports by B0's name.
    pub warnings: Vec<String>,
}

/// What was checked.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    pub place: Place,
    /// Packages of the prefix, or distributions offering device extras.
    pub packages: usize,
    /// Split binaries, checked through the runtime's loader.
    pub split_binaries: usize,
    /// Fat binaries (and materialized ones), checked by their bundles.
    pub fat_binaries: usize,
}

/// The prefix or Python environment checked.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Place {
    Prefix {
        path: PathBuf,
    },
    Python {
        python: PathBuf,
        site_dirs: Vec<PathBuf>,
    },
}

/// One GPU and whether it is served.
#[derive(Debug, Clone, Serialize)]
pub struct GpuStatus {
    pub target: Target,
    pub served: bool,
}

/// One way a GPU is not served: by a package (or distribution) as a
/// whole, by one of its files, or by one of its binaries.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub gpu: Target,
    /// The package or distribution.
    pub package: String,
    pub version: String,
    /// The binary or file, relative to the prefix or site directory; none
    /// for the package as a whole.
    pub path: Option<String>,
    pub reason: Reason,
    /// For people: what exactly is wrong.
    pub detail: String,
    /// What fixes it.
    pub remedy: Remedy,
}

/// Why a GPU is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// No archive the binary's marker names is there, or an installed
    /// archive is gone.
    ArchiveMissing,
    /// The archives there hold no code for this GPU's targets.
    TargetMissing,
    /// An archive for this GPU lacks the binary's code.
    KernelMissing,
    /// The package, or a device distribution, is installed for other GPUs.
    WrongDevicePackage,
    /// A distribution's device distribution for this GPU is not installed.
    DevicePackageMissing,
    /// A fat binary holds no code for this GPU.
    FatForOtherGpus,
    /// A kernel database payload this GPU needs is missing.
    PayloadMissing,
    /// The package has no device code for this GPU at all.
    NotPublished,
    /// A binary or archive cannot be read.
    Unreadable,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reason::ArchiveMissing => "archive missing",
            Reason::TargetMissing => "no code for this GPU",
            Reason::KernelMissing => "kernel missing",
            Reason::WrongDevicePackage => "wrong device package installed",
            Reason::DevicePackageMissing => "device package missing",
            Reason::FatForOtherGpus => "a fat binary made for other GPUs",
            Reason::PayloadMissing => "database payload missing",
            Reason::NotPublished => "no device code published for this GPU",
            Reason::Unreadable => "unreadable",
        })
    }
}

/// What fixes a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Remedy {
    /// `kpack-get install NAME`: an install for these GPUs differs from
    /// what is installed, so installing writes it anew.
    Install,
    /// `kpack-get install --reinstall NAME`: what is installed is what an
    /// install would choose, but files of it are gone or broken.
    Reinstall,
    /// `kpack-get pip sync`: installs the missing device distributions and
    /// lays the binaries out again.
    Sync,
    /// No kpack-get command: nothing published serves the GPU, or a
    /// distribution's files are broken (reinstall it with its installer).
    None,
}

impl CheckReport {
    /// The report of `findings` for `gpus`, each GPU served when no
    /// finding names it.
    pub fn new(
        checked: Checked,
        gpus: &[Target],
        findings: Vec<Finding>,
        fix: Option<FixCommand>,
        notes: Vec<String>,
    ) -> CheckReport {
        let gpus: Vec<GpuStatus> = gpus
            .iter()
            .map(|gpu| GpuStatus {
                target: gpu.clone(),
                served: !findings.iter().any(|f| &f.gpu == gpu),
            })
            .collect();
        CheckReport {
            schema: SCHEMA,
            served: gpus.iter().all(|gpu| gpu.served),
            checked,
            gpus,
            findings,
            fix,
            notes,
            warnings: Vec::new(),
        }
    }

    /// This report with `warnings`.
    pub fn with_warnings(mut self, warnings: Vec<String>) -> CheckReport {
        self.warnings = warnings;
        self
    }

    /// The GPUs not served.
    pub fn unserved(&self) -> Vec<Target> {
        self.gpus
            .iter()
            .filter(|gpu| !gpu.served)
            .map(|gpu| gpu.target.clone())
            .collect()
    }

    /// The report for people, on `output`: what was checked, each GPU
    /// with the findings that keep it from being served, the notes, and
    /// the fix.
    pub fn render_text(&self, output: &dyn Output) {
        output.line(&self.checked.to_string());
        if self.gpus.is_empty() {
            output.line("no GPU found: nothing to serve (--target names GPUs to check for)");
        }
        if self.checked.packages == 0 && self.findings.is_empty() {
            // Nothing there serves a GPU, nor fails one.
            output.line(match self.checked.place {
                Place::Prefix { .. } => "nothing installed",
                Place::Python { .. } => "no distribution with device extras installed",
            });
        }
        let gpus = match self.checked.packages == 0 && self.findings.is_empty() {
            true => &[][..],
            false => &self.gpus[..],
        };
        for gpu in gpus {
            let verdict = if gpu.served { "served" } else { "not served" };
            output.line(&format!("{}: {verdict}", gpu.target));
            for finding in self.findings.iter().filter(|f| f.gpu == gpu.target) {
                let path = match &finding.path {
                    Some(path) => format!("{path}: "),
                    None => String::new(),
                };
                output.line(&format!(
                    "  {} {}: {path}{}: {}",
                    finding.package, finding.version, finding.reason, finding.detail
                ));
            }
        }
        for warning in &self.warnings {
            output.warn(warning);
        }
        for note in &self.notes {
            output.note(note);
        }
        match &self.fix {
            Some(fix) => output.line(&format!("fix: {}", fix.command)),
            None if !self.served => {
                output.line("fix: no kpack-get command fixes this (see the findings above)")
            }
            None => {}
        }
    }
}

/// `checked PLACE: N packages, N split binaries, N fat binaries`.
impl fmt::Display for Checked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let (place, what) = match &self.place {
            Place::Prefix { path } => (
                path.display().to_string(),
                count(self.packages, "package", "packages"),
            ),
            Place::Python { python, .. } => (
                format!("the environment of {}", python.display()),
                count(
                    self.packages,
                    "distribution with device extras",
                    "distributions with device extras",
                ),
            ),
        };
        write!(
            f,
            "checked {place}: {what}, {}, {}",
            count(self.split_binaries, "split binary", "split binaries"),
            count(self.fat_binaries, "fat binary", "fat binaries")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_is_served_when_no_finding_names_it() {
        let gpus = [
            Target::parse("gfx1100").unwrap(),
            Target::parse("gfx1030").unwrap(),
        ];
        let checked = Checked {
            place: Place::Prefix {
                path: "/opt/rocm".into(),
            },
            packages: 1,
            split_binaries: 1,
            fat_binaries: 0,
        };
        let finding = Finding {
            gpu: gpus[1].clone(),
            package: "rocm-rand".into(),
            version: "5.3.3".into(),
            path: Some("lib/librocrand.so.1.1".into()),
            reason: Reason::TargetMissing,
            detail: String::new(),
            remedy: Remedy::Install,
        };
        let report = CheckReport::new(checked.clone(), &gpus, vec![finding], None, Vec::new());
        assert!(!report.served);
        assert_eq!(report.unserved(), [gpus[1].clone()]);
        assert!(report.gpus[0].served);
        let none = CheckReport::new(checked, &[], Vec::new(), None, Vec::new());
        assert!(none.served, "no GPU: nothing to serve");
        assert_eq!(none.schema, SCHEMA);
    }
}

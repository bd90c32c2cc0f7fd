//! Checking a prefix: for every installed package and every GPU, the
//! package as a whole ([`super::package`]), its recorded files that are
//! gone (an archive or a kernel database payload the GPU needs), and each
//! of its split and fat binaries as their runtime loads them
//! ([`super::binary`]).

use std::collections::BTreeMap;
use std::path::Path;

use kpack_binary::databases::{Recognisers, Role};
use kpack_gpu::Target;
use kpack_repo_index::{Artifact, Families, PackageName};
use rocm_kpack::{Loader, LoaderConfig};

use super::binary::{check_binary, BinaryKind};
use super::fix::Invocation;
use super::index::Published;
use super::package::{coverage, serves, Coverage};
use super::report::{CheckReport, Checked, Finding, Place, Reason, Remedy};
use crate::install::record::{InstalledFile, InstalledPackage, InstalledRecord};
use rocm_kpack::format::KPACK_DIR;

/// A prefix to check, and for which GPUs.
#[derive(Debug)]
pub struct PrefixCheck<'a> {
    pub root: &'a Path,
    pub record: &'a InstalledRecord,
    pub gpus: &'a [Target],
    pub published: &'a Published,
    pub invocation: &'a Invocation,
}

/// What checking one package found and counted.
#[derive(Debug, Default)]
struct Tally {
    findings: Vec<Finding>,
    split: usize,
    fat: usize,
}

impl PrefixCheck<'_> {
    /// Checks every package for every GPU; `notes` go into the report.
    pub fn run(&self, notes: Vec<String>) -> CheckReport {
        let loader = Loader::new(LoaderConfig::default());
        let recognisers = Recognisers::builtin();
        let mut tally = Tally::default();
        for (name, package) in &self.record.packages {
            let one = PackageCheck {
                prefix: self,
                name,
                package,
                families: self
                    .published
                    .get(name)
                    .map_or_else(Families::builtin, |i| i.families.clone()),
            };
            one.run(&loader, &recognisers, &mut tally);
        }
        let position = |gpu: &Target| self.gpus.iter().position(|g| g == gpu);
        tally.findings.sort_by_key(|f| position(&f.gpu));
        let checked = Checked {
            place: Place::Prefix {
                path: self.root.to_owned(),
            },
            packages: self.record.packages.len(),
            split_binaries: tally.split,
            fat_binaries: tally.fat,
        };
        let fix = self.invocation.install(&tally.findings);
        CheckReport::new(checked, self.gpus, tally.findings, fix, notes)
    }
}

/// One package of the prefix.
struct PackageCheck<'a> {
    prefix: &'a PrefixCheck<'a>,
    name: &'a PackageName,
    package: &'a InstalledPackage,
    families: Families,
}

impl PackageCheck<'_> {
    fn run(&self, loader: &Loader, recognisers: &Recognisers, tally: &mut Tally) {
        let indexed = self.prefix.published.get(self.name);
        let coverages: Vec<(&Target, Coverage<'_>)> = self
            .prefix
            .gpus
            .iter()
            .map(|gpu| (gpu, coverage(self.package, gpu, indexed)))
            .collect();
        for (gpu, coverage) in &coverages {
            tally.findings.extend(self.package_findings(gpu, coverage));
        }
        let remedy = |gpu: &Target| {
            coverages
                .iter()
                .find(|(g, _)| *g == gpu)
                .map_or(Remedy::Reinstall, |(_, coverage)| remedy_for(coverage))
        };
        for finding in self.missing_files(recognisers) {
            let remedy = remedy(&finding.gpu);
            tally.findings.push(Finding { remedy, ..finding });
        }
        let root = self.prefix.root;
        for file in self.package.files.iter().filter(|f| is_binary_candidate(f)) {
            let path = root.join(file.path.as_str());
            if let Some(kind) = not_regular(&path) {
                for gpu in self.prefix.gpus {
                    tally.findings.push(Finding {
                        path: Some(file.path.to_string()),
                        reason: Reason::Unreadable,
                        detail: format!(
                            "installed as a regular file, now {kind}: its code cannot be checked"
                        ),
                        remedy: remedy(gpu),
                        ..self.finding(gpu.clone())
                    });
                }
                continue;
            }
            let Some(check) = check_binary(loader, &path, root, self.prefix.gpus) else {
                continue;
            };
            match check.kind {
                BinaryKind::Split => tally.split += 1,
                BinaryKind::Fat => tally.fat += 1,
            }
            for failure in check.failures {
                let remedy = remedy(&failure.gpu);
                tally.findings.push(Finding {
                    path: Some(file.path.to_string()),
                    reason: failure.reason,
                    detail: failure.detail,
                    remedy,
                    ..self.finding(failure.gpu)
                });
            }
        }
    }

    /// A finding about this package for `gpu`, to fill in.
    fn finding(&self, gpu: Target) -> Finding {
        Finding {
            gpu,
            package: self.name.to_string(),
            version: self.package.version.to_string(),
            path: None,
            reason: Reason::WrongDevicePackage,
            detail: String::new(),
            remedy: Remedy::Install,
        }
    }

    /// What the package as a whole lacks for `gpu`.
    fn package_findings(&self, gpu: &Target, coverage: &Coverage<'_>) -> Vec<Finding> {
        let finding = |reason, detail: String, remedy| Finding {
            reason,
            detail,
            remedy,
            ..self.finding(gpu.clone())
        };
        match coverage {
            Coverage::Covered => Vec::new(),
            Coverage::OtherGpus { installed_for } => vec![finding(
                Reason::WrongDevicePackage,
                if installed_for.is_empty() {
                    "installed without a GPU: host parts only".to_owned()
                } else {
                    format!(
                        "installed for {}, not for this GPU",
                        kpack_gpu::target::join_targets(installed_for)
                    )
                },
                Remedy::Install,
            )],
            Coverage::NotPublished { offered } => vec![finding(
                Reason::NotPublished,
                format!(
                    "this version has device code for {} only",
                    kpack_repo_index::resolve::join_listed(offered)
                ),
                Remedy::None,
            )],
            Coverage::Lacking(artifacts) => artifacts
                .iter()
                .map(|artifact| {
                    let (reason, detail) = lacking(artifact);
                    finding(reason, detail, Remedy::Install)
                })
                .collect(),
        }
    }

    /// The recorded files that are gone and that a GPU needs: archives
    /// of device code serving it, kernel database files for it (one
    /// finding per payload: component and target or owner).
    fn missing_files(&self, recognisers: &Recognisers) -> Vec<Finding> {
        let mut payloads: BTreeMap<(usize, String, String), Vec<&str>> = BTreeMap::new();
        let mut findings = Vec::new();
        for file in self.package.files.iter().filter(|f| self.is_gone(f)) {
            let path = file.path.as_str();
            for (index, gpu) in self.prefix.gpus.iter().enumerate() {
                if let Some(artifact) = self.archive_of(path) {
                    if serves(
                        artifact.targets.as_deref(),
                        artifact.owner.as_ref(),
                        gpu,
                        &self.families,
                    ) {
                        findings.push(Finding {
                            path: Some(path.to_owned()),
                            reason: Reason::ArchiveMissing,
                            detail: "an archive installed for this GPU is gone".to_owned(),
                            ..self.finding(gpu.clone())
                        });
                    }
                    continue;
                }
                let Some(recognised) = recognisers.recognise(Path::new(path)) else {
                    continue;
                };
                let owner = match &recognised.role {
                    Role::Device { target, .. } if gpu.selection_order().contains(target) => {
                        target.to_string()
                    }
                    Role::Group { owner, .. } if owner.contains(gpu) => owner.to_string(),
                    _ => continue,
                };
                let key = (index, recognised.component.to_owned(), owner);
                payloads.entry(key).or_default().push(path);
            }
        }
        for ((index, component, owner), paths) in payloads {
            let count = paths.len();
            findings.push(Finding {
                path: paths.first().map(|p| (*p).to_owned()),
                reason: Reason::PayloadMissing,
                detail: if count == 1 {
                    format!("a file of the {component} payload for {owner} is gone")
                } else {
                    format!("{count} files of the {component} payload for {owner} are gone")
                },
                ..self.finding(self.prefix.gpus[index].clone())
            });
        }
        findings
    }

    /// Whether a recorded file or link is no longer in the prefix.
    fn is_gone(&self, file: &InstalledFile) -> bool {
        let path = self.prefix.root.join(file.path.as_str());
        matches!(fs_err::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
    }

    /// The installed device artifact placed at `path` as an archive.
    fn archive_of(&self, path: &str) -> Option<&crate::install::record::InstalledArtifact> {
        let name = path.strip_prefix(KPACK_DIR)?.strip_prefix('/')?;
        self.package.artifacts.iter().find(|a| {
            let placed = match &a.install_as {
                Some(install_as) => install_as.as_str() == path,
                None => a.path.file_name() == name,
            };
            placed && (a.targets.is_some() || a.owner.is_some())
        })
    }
}

/// A file that may be a binary: a regular file outside `.kpack/`.
/// What the file at `path` is when it is there but no regular file (a
/// link, a FIFO, a device, a directory or a socket put in place of one);
/// `None` for a regular file or nothing.
fn not_regular(path: &Path) -> Option<&'static str> {
    let kind = fs_err::symlink_metadata(path).ok()?.file_type();
    (!kind.is_file()).then(|| kpack_fs::kind_in_words(kind))
}

fn is_binary_candidate(file: &InstalledFile) -> bool {
    file.link.is_none() && file.path.parts().next() != Some(KPACK_DIR)
}

/// The remedy of a file or binary of a package that stands so for a GPU:
/// an install that would choose what is installed must be told to
/// reinstall; one that would choose otherwise writes the package anew.
fn remedy_for(coverage: &Coverage<'_>) -> Remedy {
    match coverage {
        Coverage::Covered => Remedy::Reinstall,
        Coverage::OtherGpus { .. } | Coverage::Lacking(_) => Remedy::Install,
        Coverage::NotPublished { .. } => Remedy::None,
    }
}

/// The reason and words for an artifact an install would choose for a
/// GPU that is not installed.
fn lacking(artifact: &Artifact) -> (Reason, String) {
    // An archive by the name it is installed under (it may be served
    // transport-encoded, under another).
    let name = match &artifact.install_as {
        Some(install_as) => install_as.file_name(),
        None => artifact.path.file_name(),
    };
    match artifact.component() {
        Some(component) if !component.is_default() => (
            Reason::PayloadMissing,
            format!("the {component} payload {name} for this GPU is not installed"),
        ),
        _ => (
            Reason::ArchiveMissing,
            format!("the archive {name} for this GPU is not installed"),
        ),
    }
}

//! The layout of an environment's split binaries, the step after `pip
//! sync` and `pip install` (08-hip-runtimes.md, "Python environments"): one decision
//! for the environment, from the HIP runtime each split binary of a host
//! distribution would run under (its own run paths first, where TheRock's
//! `_rocm_sdk_core/lib` is, then the system), and every binary
//! materialized for the machine's targets, or its host-only original put
//! back, to match.

use std::path::PathBuf;

use kpack_cli::counted;
use kpack_gpu::Target;
use serde::Serialize;

use super::environment::PythonEnvironment;
use super::extras::device_extras;
use super::materialize::{
    Action, BinaryPlan, HostBinaries, HostOnlyReason, HostPlan, MaterializeError, Wanted,
};
use super::PipError;
use crate::config::Settings;
use crate::layout::hip_runtime::{RuntimeSearch, Searcher};
use crate::layout::runtime_report::{show, HipRuntimeReport};
use crate::layout::{decide, Layout, LayoutChoice, LayoutDecision};
use crate::output::Output;

/// Why an environment's split binaries cannot be laid out.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// Its distributions cannot be read.
    #[error(transparent)]
    Pip(#[from] PipError),
    /// A binary cannot be read, materialized or put back.
    #[error(transparent)]
    Materialize(#[from] MaterializeError),
}

/// Finds the environment's split binaries, decides their layout, says
/// on `output` what was found and decided, and (unless `dry_run`) makes
/// every binary hold what it should. `None` when no host distribution
/// has split binaries (nothing is said then).
pub fn lay_out(
    env: &PythonEnvironment,
    settings: &Settings,
    targets: &[Target],
    dry_run: bool,
    output: &dyn Output,
) -> Result<Option<LayoutReport>, LayoutError> {
    let hosts = host_binaries(env, output)?;
    if hosts.is_empty() {
        return Ok(None);
    }
    for (site, resolved) in env.site_dirs_outside() {
        output.note(&format!(
            "{} leads to {}, outside the environment {}: its binaries are laid out there, \
             where pip and uv install its packages",
            site.display(),
            resolved.display(),
            env.prefix.display()
        ));
    }
    let (search, decision) = decide_for(settings, &hosts);
    let shown = show(output, &search, &decision, false);
    let mut binaries = Vec::new();
    let mut changed = 0;
    for host in hosts {
        let mut plan = HostPlan::new(host, decision.layout, targets)?;
        if !dry_run {
            plan.apply()?;
        }
        for binary in &plan.binaries {
            changed += usize::from(binary.action != Action::Unchanged);
            report(output, &plan, binary, dry_run);
            binaries.push(BinaryReport::new(&plan, binary));
        }
    }
    if changed == 0 {
        output.line(&format!(
            "split binaries: nothing to change ({})",
            binaries.len()
        ));
    }
    Ok(Some(LayoutReport {
        binaries,
        choice: decision.choice,
        hip_runtime: shown.hip_runtime,
        layout: decision.layout,
        reason: decision.reason,
    }))
}

/// The host distributions (those offering device extras) that have split
/// binaries, warning on `output` about what cannot be looked into.
fn host_binaries(
    env: &PythonEnvironment,
    output: &dyn Output,
) -> Result<Vec<HostBinaries>, LayoutError> {
    let mut hosts = Vec::new();
    // `pip sync` warned of the distributions skipped before installing.
    for dist in env.installed()?.dists {
        if device_extras(&dist.metadata.provides_extra).is_empty() {
            continue;
        }
        let host = HostBinaries::find(&dist)?;
        for line in &host.skipped {
            output.warn(&format!("{}: {line}", host.name));
        }
        if !host.binaries.is_empty() {
            hosts.push(host);
        }
    }
    Ok(hosts)
}

/// The layout for every split binary of `hosts`, and the search that
/// decided it: the first that found no kpack-aware runtime, else the first.
fn decide_for(settings: &Settings, hosts: &[HostBinaries]) -> (RuntimeSearch, LayoutDecision) {
    let searcher = Searcher::new(&settings.runtime_search);
    let searches: Vec<RuntimeSearch> = hosts
        .iter()
        .flat_map(|host| &host.binaries)
        .map(|binary| {
            searcher
                .for_installed_library(&binary.installed)
                .unwrap_or_else(|error| RuntimeSearch {
                    runtime: None,
                    notes: vec![format!("skipped: {}", kpack_error::one_line(&error))],
                })
        })
        .collect();
    let decision = decide(settings.layout, &searches.iter().collect::<Vec<_>>());
    let deciding = searches
        .iter()
        .find(|s| !s.runtime.as_ref().is_some_and(|r| r.kpack_aware()))
        .or(searches.first())
        .cloned()
        .unwrap_or_default();
    (deciding, decision)
}

/// Says what was (or would be) done to one binary.
fn report(output: &dyn Output, plan: &HostPlan, binary: &BinaryPlan, dry_run: bool) {
    let name = &plan.host.name;
    let path = &binary.binary.path;
    let targets = |targets: &[Target]| {
        targets
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let why = |reason: &HostOnlyReason| match reason {
        HostOnlyReason::Layout => "the layout is kpack".to_owned(),
        HostOnlyReason::NoTargets => "no GPU targets".to_owned(),
    };
    let line = match (binary.action, &binary.wanted) {
        (Action::Unchanged, Wanted::Fat { targets: t, .. }) => {
            output.detail(&format!("{name}: {path} is already fat for {}", targets(t)));
            return;
        }
        (Action::Unchanged, Wanted::HostOnly(_)) => {
            output.detail(&format!("{name}: {path} is host-only"));
            return;
        }
        (Action::Materialize, Wanted::Fat { targets: t, .. }) => {
            let verb = if dry_run {
                "would materialize"
            } else {
                "materialized"
            };
            let counts = binary
                .materialized
                .as_ref()
                .map(|m| {
                    format!(
                        " ({}, {})",
                        counted(m.wrappers, "wrapper", "wrappers"),
                        counted(m.code_objects, "code object", "code objects")
                    )
                })
                .unwrap_or_default();
            format!("{name}: {verb} {path} for {}{counts}", targets(t))
        }
        (_, Wanted::HostOnly(reason)) => {
            let verb = if dry_run {
                "would put back"
            } else {
                "put back"
            };
            format!("{name}: {verb} the host-only {path} ({})", why(reason))
        }
        (_, Wanted::Fat { .. }) => return,
    };
    output.line(&line);
}

/// The environment's split binaries, their layout, and why.
#[derive(Debug, Serialize)]
pub struct LayoutReport {
    binaries: Vec<BinaryReport>,
    choice: LayoutChoice,
    hip_runtime: HipRuntimeReport,
    layout: Layout,
    reason: String,
}

/// What a split binary should hold, and what was done to it.
#[derive(Debug, Serialize)]
struct BinaryReport {
    action: &'static str,
    code_objects: Option<usize>,
    dist: String,
    file: PathBuf,
    path: String,
    targets: Vec<String>,
    wanted: &'static str,
}

impl BinaryReport {
    fn new(plan: &HostPlan, binary: &BinaryPlan) -> BinaryReport {
        let (wanted, targets) = match &binary.wanted {
            Wanted::Fat { targets, .. } => {
                ("fat", targets.iter().map(ToString::to_string).collect())
            }
            Wanted::HostOnly(_) => ("host-only", Vec::new()),
        };
        BinaryReport {
            action: match binary.action {
                Action::Unchanged => "unchanged",
                Action::Materialize => "materialize",
                Action::Restore => "restore",
            },
            code_objects: binary.materialized.as_ref().map(|m| m.code_objects),
            dist: plan.host.name.as_str().to_owned(),
            file: binary.binary.installed.clone(),
            path: binary.binary.path.to_string(),
            targets,
            wanted,
        }
    }
}

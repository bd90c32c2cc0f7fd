//! `detect`: the GPUs found, where each answer came from, the HIP runtime
//! a library installed now would load and the layout that follows, and
//! what the GPUs would select from the configured repositories.

use kpack_gpu::Target;
use kpack_repo_index::{select_artifacts, PackageName};
use rocm_kpack_get::detect::{gfx12_strict, Detection, Gpu};
use rocm_kpack_get::install::plan::{PlanError, Unserved};
use rocm_kpack_get::layout::decide_for_new_library;
use rocm_kpack_get::layout::runtime_report::{show, RuntimeReport};
use rocm_kpack_get::repo::Repo;
use serde::Serialize;

use super::{Context, Failure};
use crate::printer::{Printer, SCHEMA};

/// The GPUs found, the runtime and layout, and what the GPUs would select.
#[derive(Debug, Serialize)]
struct DetectReport<'a> {
    schema: u32,
    gpus: &'a [Gpu],
    #[serde(flatten)]
    runtime: RuntimeReport,
    notes: &'a [String],
    selections: Vec<Selection>,
    warnings: &'a [String],
}

/// What the GPUs would select from a package's newest version.
#[derive(Debug, Serialize)]
struct Selection {
    artifacts: Vec<String>,
    no_device_code: Vec<String>,
    package: String,
    repo: String,
    size: u64,
    version: String,
}

/// How many packages `detect` looks into (each needs its shard).
const PACKAGES_SHOWN: usize = 20;

pub fn detect(context: &Context) -> Result<(), Failure> {
    let printer = &context.printer;
    let chosen = context.gpus()?;
    let (targets, detection) = (chosen.targets, chosen.detection);
    print_gpus(printer, &detection);
    let settings = &context.settings;
    let (search, decision) = decide_for_new_library(settings.layout, &settings.runtime_search);
    let runtime = show(printer, &search, &decision, true);
    // What these GPUs would select; a repository that cannot be read is
    // reported, not fatal: detection works without any.
    let mut selections = Vec::new();
    if !context.settings.repos.is_empty() && !targets.is_empty() {
        let client = context.client()?;
        match context.repos(&client) {
            Ok(repos) => {
                for repo in &repos {
                    for name in repo.root.packages.keys().take(PACKAGES_SHOWN) {
                        if let Some(selection) =
                            package_selection(context, &client, repo, name, (&targets, &detection))
                        {
                            selections.push(selection);
                        }
                    }
                    if repo.root.packages.len() > PACKAGES_SHOWN {
                        printer.line(format!(
                            "... and {} more packages in {}; `kpack-get info PACKAGE` shows any",
                            repo.root.packages.len() - PACKAGES_SHOWN,
                            repo.config.name
                        ));
                    }
                }
            }
            Err(failure) => printer.warn(format!("{:#}", failure.error)),
        }
    }
    printer.report(&DetectReport {
        schema: SCHEMA,
        gpus: &detection.gpus,
        runtime,
        notes: &detection.notes,
        selections,
        warnings: &detection.warnings,
    });
    Ok(())
}

/// The table of GPUs, each with its kfd node (the `N` of
/// `HSA_OVERRIDE_GFX_VERSION_N`) and its source named once (`hsa agent 0`,
/// `sysfs node 1`, `override`), then the notes.
fn print_gpus(printer: &Printer, detection: &Detection) {
    if detection.gpus.is_empty() {
        printer.line("no GPU found");
    } else {
        printer.line(format!(
            "{:<4} {:<4} {:<26} {:<32} {}",
            "GPU", "NODE", "TARGET", "PRODUCT", "SOURCE"
        ));
        for (index, gpu) in detection.gpus.iter().enumerate() {
            let node = gpu.node.map_or_else(|| "-".to_owned(), |n| n.to_string());
            let integrated = if gpu.integrated {
                ", integrated GPU"
            } else {
                ""
            };
            // The chip behind an override, and the variable that is why.
            let overridden = gpu
                .overridden
                .as_ref()
                .map(|o| {
                    format!(
                        ", chip {} run as {} by {}={}",
                        o.chip, gpu.target, o.variable, o.value
                    )
                })
                .unwrap_or_default();
            // What A0 silicon is, beside the name the runtime reports.
            let silicon = gpu
                .silicon
                .as_ref()
                .map(|s| {
                    format!(
                        ", A0 silicon ({}) reported as {} ({})",
                        s.target,
                        gpu.target,
                        gfx12_strict::describe(s.value.as_deref())
                    )
                })
                .unwrap_or_default();
            printer.line(format!(
                "{:<4} {:<4} {:<26} {:<32} {}{integrated}{overridden}{silicon}",
                index,
                node,
                gpu.target.to_string(),
                gpu.product.as_deref().unwrap_or("-"),
                gpu.id
            ));
        }
    }
    for note in &detection.notes {
        printer.line(format!("  {note}"));
    }
}

/// What the GPUs would select from one package's newest version, printed
/// as a line and returned for --json. Every GPU the package has no device
/// code for is named, also when another GPU is served.
fn package_selection(
    context: &Context,
    client: &kpack_repo_index::fetch::Client,
    repo: &Repo,
    name: &PackageName,
    (targets, detection): (&[Target], &Detection),
) -> Option<Selection> {
    let shard = match repo.shard(client, &context.cache, name) {
        Ok(shard) => shard?,
        Err(error) => {
            context.printer.warn(error.to_string());
            return None;
        }
    };
    let entry = shard
        .versions
        .iter()
        .max_by(|a, b| a.version.cmp(&b.version))?;
    let selection = select_artifacts(entry, targets, &repo.families);
    let device: Vec<String> = selection
        .artifacts
        .iter()
        .filter(|a| a.is_device())
        .map(|a| a.path.to_string())
        .collect();
    let unserved: Vec<String> = targets
        .iter()
        .filter(|target| {
            !select_artifacts(entry, std::slice::from_ref(*target), &repo.families)
                .artifacts
                .iter()
                .any(|a| a.is_device())
        })
        .map(ToString::to_string)
        .collect();
    match Unserved::find(entry, &shard, targets, &repo.families) {
        // Said as install says it, with the same hint.
        Some(none_served) => {
            let suggestions = none_served.override_suggestions(detection);
            let error = PlanError::NoDeviceCode {
                package: name.clone(),
                version: entry.version.clone(),
                unserved: Box::new(none_served),
            };
            context
                .printer
                .line(format!("{}/{error}", repo.config.name));
            for suggestion in suggestions {
                context.printer.line(format!("  hint: {suggestion}"));
            }
        }
        None => {
            let text = match (device.is_empty(), unserved.is_empty()) {
                (true, _) => "host parts only (no device code)".to_owned(),
                (false, true) => device.join(", "),
                (false, false) => format!(
                    "{}; no device code for {}",
                    device.join(", "),
                    unserved.join(", ")
                ),
            };
            context.printer.line(format!(
                "{}/{name} {}: {text}",
                repo.config.name, entry.version
            ));
        }
    }
    Some(Selection {
        artifacts: device,
        no_device_code: unserved,
        package: name.as_str().to_owned(),
        repo: repo.config.name.clone(),
        size: selection.size(),
        version: entry.version.to_string(),
    })
}

//! `detect`: the GPUs found, where each answer came from, the HIP runtime
//! a library installed now would load and the layout that follows, and
//! what the GPUs would select from the configured repositories.

use kpack_gpu::Target;
use kpack_repo_index::{select_artifacts, PackageName};
use rocm_kpack_get::detect::Detection;
use rocm_kpack_get::repo::Repo;
use serde_json::json;

use super::{Context, Failure};
use crate::printer::Printer;

/// How many packages `detect` looks into (each needs its shard).
const PACKAGES_SHOWN: usize = 20;

pub fn detect(context: &Context) -> Result<(), Failure> {
    let printer = &context.printer;
    let (targets, detection) = context.gpus()?;
    print_gpus(printer, &detection);
    let (search, decision) = super::layout::search_for_new_library(context);
    let runtime = super::layout::show(context, &search, &decision, true);
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
                            package_selection(context, &client, repo, name, &targets)
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
    printer.json(&json!({
        "gpus": detection.gpus,
        "notes": detection.notes,
        "warnings": detection.warnings,
        "selections": selections,
        "hip_runtime": runtime["hip_runtime"],
        "layout": runtime["layout"],
    }));
    Ok(())
}

/// The table of GPUs, each with its source named once (`hsa agent 0`,
/// `sysfs node 1`, `override`), then the notes.
fn print_gpus(printer: &Printer, detection: &Detection) {
    if detection.gpus.is_empty() {
        printer.line("no GPU found");
    } else {
        printer.line(format!(
            "{:<4} {:<26} {:<32} {}",
            "GPU", "TARGET", "PRODUCT", "SOURCE"
        ));
        for (index, gpu) in detection.gpus.iter().enumerate() {
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
            printer.line(format!(
                "{:<4} {:<26} {:<32} {}{overridden}",
                index,
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
    targets: &[Target],
) -> Option<serde_json::Value> {
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
    let text = match (device.is_empty(), unserved.is_empty()) {
        (true, _) => "no device code for these GPUs (host parts only)".to_owned(),
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
    Some(json!({
        "repo": repo.config.name,
        "package": name.as_str(),
        "version": entry.version.to_string(),
        "artifacts": device,
        "no_device_code": unserved,
        "size": selection.size(),
    }))
}

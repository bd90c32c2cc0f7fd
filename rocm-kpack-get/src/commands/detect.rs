//! `detect`: the GPUs found, where each answer came from, and what they
//! would select from the configured repositories.

use kpack_repo_index::select_artifacts;
use serde_json::json;

use super::{Context, Failure};

/// How many packages `detect` looks into (each needs its shard).
const PACKAGES_SHOWN: usize = 20;

pub fn detect(context: &Context) -> Result<(), Failure> {
    let printer = &context.printer;
    let (targets, detection) = context.gpus()?;
    if detection.gpus.is_empty() {
        printer.line("no GPU found");
    } else {
        printer.line(format!(
            "{:<4} {:<26} {:<32} {}",
            "GPU", "TARGET", "PRODUCT", "SOURCE"
        ));
        for (index, gpu) in detection.gpus.iter().enumerate() {
            printer.line(format!(
                "{:<4} {:<26} {:<32} {} ({})",
                index,
                gpu.target.to_string(),
                gpu.product.as_deref().unwrap_or("-"),
                serde_json::to_value(gpu.source)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                gpu.id
            ));
        }
    }
    for note in &detection.notes {
        printer.line(format!("  {note}"));
    }
    // What these GPUs would select; a repository that cannot be read is
    // reported, not fatal: detection works without any.
    let mut selections = Vec::new();
    if !context.settings.repos.is_empty() && !targets.is_empty() {
        let client = context.client()?;
        match context.repos(&client) {
            Ok(repos) => {
                for repo in &repos {
                    for name in repo.root.packages.keys().take(PACKAGES_SHOWN) {
                        let shard = match repo.shard(&client, &context.cache, name) {
                            Ok(Some(shard)) => shard,
                            Ok(None) => continue,
                            Err(error) => {
                                printer.warn(error.to_string());
                                continue;
                            }
                        };
                        let Some(entry) = shard
                            .versions
                            .iter()
                            .max_by(|a, b| a.version.cmp(&b.version))
                        else {
                            continue;
                        };
                        let selection = select_artifacts(entry, &targets, &repo.families);
                        let device: Vec<String> = selection
                            .artifacts
                            .iter()
                            .filter(|a| a.is_device())
                            .map(|a| a.path.to_string())
                            .collect();
                        printer.line(format!(
                            "{}/{name} {}: {}",
                            repo.config.name,
                            entry.version,
                            if device.is_empty() {
                                "no device code for these GPUs (host parts only)".to_owned()
                            } else {
                                device.join(", ")
                            }
                        ));
                        selections.push(json!({
                            "repo": repo.config.name,
                            "package": name.as_str(),
                            "version": entry.version.to_string(),
                            "artifacts": device,
                            "size": selection.size(),
                        }));
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
        "selections": selections,
    }));
    Ok(())
}

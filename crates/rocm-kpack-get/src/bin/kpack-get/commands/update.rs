//! `update`: fetch and verify every configured repository's root index.

use kpack_cli::counted;
use serde::Serialize;

use super::{Context, Failure};
use crate::printer::SCHEMA;

/// The repositories updated.
#[derive(Debug, Serialize)]
struct UpdateReport {
    schema: u32,
    repos: Vec<RepoUpdate>,
}

/// One repository's root as fetched, and the version seen before.
#[derive(Debug, Serialize)]
struct RepoUpdate {
    expires: String,
    name: String,
    packages: usize,
    previous: Option<u64>,
    repo: String,
    url: String,
    version: u64,
}

pub fn update(context: &Context) -> Result<(), Failure> {
    let client = context.client()?;
    if context.settings.repos.is_empty() {
        // The same message every command gives.
        context.repos(&client)?;
    }
    let mut results = Vec::new();
    for config in &context.settings.repos {
        let updated = context
            .store
            .update(&client, config, context.settings.trust)?;
        for warning in &updated.warnings {
            context.printer.warn(warning);
        }
        let root = &updated.repo.root;
        let change = match updated.previous {
            Some(previous) if previous == root.repo.version => "unchanged".to_owned(),
            Some(previous) => format!("was {previous}"),
            None => "new".to_owned(),
        };
        context.printer.line(format!(
            "{}: version {} ({change}), {}, expires {}, from {}",
            config.name,
            root.repo.version,
            counted(root.packages.len(), "package", "packages"),
            root.repo.expires,
            updated.url
        ));
        results.push(RepoUpdate {
            expires: root.repo.expires.to_string(),
            name: root.repo.name.as_str().to_owned(),
            packages: root.packages.len(),
            previous: updated.previous,
            repo: config.name.clone(),
            url: updated.url,
            version: root.repo.version,
        });
    }
    context.printer.report(&UpdateReport {
        schema: SCHEMA,
        repos: results,
    });
    Ok(())
}

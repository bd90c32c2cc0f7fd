//! `search`: package names and summaries containing a text.

use serde::Serialize;

use super::{Context, Failure};
use crate::printer::SCHEMA;

/// The packages found.
#[derive(Debug, Serialize)]
struct SearchReport<'a> {
    schema: u32,
    packages: Vec<Found<'a>>,
}

/// A package whose name or summary holds the text.
#[derive(Debug, Serialize)]
struct Found<'a> {
    latest: String,
    name: &'a str,
    repo: &'a str,
    summary: &'a str,
}

pub fn search(context: &Context, text: &str) -> Result<(), Failure> {
    let client = context.client()?;
    let repos = context.repos(&client)?;
    let needle = text.to_lowercase();
    let mut found = Vec::new();
    for repo in &repos {
        for (name, entry) in &repo.root.packages {
            if name.as_str().contains(&needle) || entry.summary.to_lowercase().contains(&needle) {
                context.printer.line(format!(
                    "{name} {} ({}): {}",
                    entry.latest, repo.config.name, entry.summary
                ));
                found.push(Found {
                    latest: entry.latest.to_string(),
                    name: name.as_str(),
                    repo: &repo.config.name,
                    summary: &entry.summary,
                });
            }
        }
    }
    if found.is_empty() {
        context.printer.line(format!("no package matches {text:?}"));
    }
    context.printer.report(&SearchReport {
        schema: SCHEMA,
        packages: found,
    });
    Ok(())
}

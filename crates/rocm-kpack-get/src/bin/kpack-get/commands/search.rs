//! `search`: package names and summaries containing a text.

use serde::Serialize;

use super::{Context, Failure};
use crate::printer::{Printer, SCHEMA};

/// The packages found.
#[derive(Debug, Serialize)]
struct SearchReport<'a> {
    schema: u32,
    packages: Vec<Found<'a>>,
    /// The text searched for.
    #[serde(skip)]
    text: &'a str,
}

impl SearchReport<'_> {
    /// A line per package found, or that none matches.
    fn render_text(&self, printer: &Printer) {
        for found in &self.packages {
            printer.line(format!(
                "{} {} ({}): {}",
                found.name, found.latest, found.repo, found.summary
            ));
        }
        if self.packages.is_empty() {
            printer.line(format!("no package matches {:?}", self.text));
        }
    }
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
                found.push(Found {
                    latest: entry.latest.to_string(),
                    name: name.as_str(),
                    repo: &repo.config.name,
                    summary: &entry.summary,
                });
            }
        }
    }
    let report = SearchReport {
        schema: SCHEMA,
        packages: found,
        text,
    };
    report.render_text(&context.printer);
    context.printer.report(&report);
    Ok(())
}

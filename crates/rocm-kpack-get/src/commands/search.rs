//! `search`: package names and summaries containing a text.

use serde_json::json;

use super::{Context, Failure};

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
                found.push(json!({
                    "name": name.as_str(),
                    "latest": entry.latest.to_string(),
                    "repo": repo.config.name,
                    "summary": entry.summary,
                }));
            }
        }
    }
    if found.is_empty() {
        context.printer.line(format!("no package matches {text:?}"));
    }
    context.printer.json(&json!({ "packages": found }));
    Ok(())
}

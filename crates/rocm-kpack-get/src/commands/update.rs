//! `update`: fetch and verify every configured repository's root index.

use serde_json::json;

use super::{Context, Failure};

pub fn update(context: &Context) -> Result<(), Failure> {
    let client = context.client()?;
    if context.settings.repos.is_empty() {
        // The same message every command gives.
        context.repos(&client)?;
    }
    let mut results = Vec::new();
    for config in &context.settings.repos {
        let updated = context.store.update(&client, config, context.trust)?;
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
            "{}: version {} ({change}), {} packages, expires {}, from {}",
            config.name,
            root.repo.version,
            root.packages.len(),
            root.repo.expires,
            updated.url
        ));
        results.push(json!({
            "repo": config.name,
            "name": root.repo.name.as_str(),
            "version": root.repo.version,
            "previous": updated.previous,
            "packages": root.packages.len(),
            "expires": root.repo.expires.to_string(),
            "url": updated.url,
        }));
    }
    context.printer.json(&json!({ "repos": results }));
    Ok(())
}

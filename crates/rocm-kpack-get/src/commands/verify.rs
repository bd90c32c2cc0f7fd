//! `verify`: re-hash installed files against the install record.

use serde_json::json;

use super::{Context, Exit, Failure};

pub fn verify(context: &Context) -> Result<(), Failure> {
    let prefix = context.prefix(false)?;
    if !prefix.root().join(".kpack").is_dir() {
        context
            .printer
            .line(format!("nothing installed in {}", prefix.root().display()));
        context
            .printer
            .json(&json!({ "checked": 0, "mismatches": [] }));
        return Ok(());
    }
    // Read-only, like `list`: nothing in the prefix is written.
    let _lock = context.read_lock(&prefix)?;
    let (checked, mismatches) = prefix.verify()?;
    for mismatch in &mismatches {
        context.printer.warn(format!(
            "{}: {} ({})",
            mismatch.path, mismatch.problem, mismatch.package
        ));
    }
    context.printer.json(&json!({
        "checked": checked,
        "mismatches": mismatches.iter().map(|m| json!({
            "package": m.package, "path": m.path, "problem": m.problem.to_string(),
        })).collect::<Vec<_>>(),
    }));
    if mismatches.is_empty() {
        context.printer.line(format!(
            "{checked} installed files match the record in {}",
            prefix.root().display()
        ));
        return Ok(());
    }
    let mut packages: Vec<&str> = mismatches.iter().map(|m| m.package.as_str()).collect();
    packages.sort_unstable();
    packages.dedup();
    Err(Failure::new(
        Exit::Verification,
        anyhow::anyhow!(
            "{} of {checked} installed files differ from the record",
            mismatches.len()
        ),
    )
    .hint(format!(
        "`kpack-get install --reinstall {}` writes them anew",
        packages.join(" ")
    )))
}

//! `verify`: re-hash installed files against the install record.

use std::path::Path;

use kpack_repo_index::{PackageName, RelativePath};
use rocm_kpack_get::install::{Mismatch, Prefix, PrefixChange};
use serde::Serialize;

use super::{Context, Exit, Failure};
use crate::printer::{Printer, SCHEMA};

/// How many installed files were checked, and those that differ.
#[derive(Debug, Serialize)]
struct VerifyReport<'a> {
    schema: u32,
    checked: usize,
    mismatches: Vec<MismatchReport<'a>>,
    /// The prefix verified.
    #[serde(skip)]
    prefix: &'a Path,
    /// Whether anything is installed there.
    #[serde(skip)]
    installed: bool,
}

impl VerifyReport<'_> {
    /// A warning per file that differs; when none does, that all match.
    fn render_text(&self, printer: &Printer) {
        let prefix = self.prefix.display();
        if !self.installed {
            printer.line(format!("nothing installed in {prefix}"));
            return;
        }
        for mismatch in &self.mismatches {
            printer.warn(format!(
                "{}: {} ({})",
                mismatch.path, mismatch.problem, mismatch.package
            ));
        }
        if self.mismatches.is_empty() {
            printer.line(format!(
                "{} installed files match the record in {prefix}",
                self.checked
            ));
        }
    }
}

/// A file that differs from the record, and how.
#[derive(Debug, Serialize)]
struct MismatchReport<'a> {
    package: &'a PackageName,
    path: &'a RelativePath,
    problem: String,
}

impl<'a> From<&'a Mismatch> for MismatchReport<'a> {
    fn from(mismatch: &'a Mismatch) -> MismatchReport<'a> {
        MismatchReport {
            package: &mismatch.package,
            path: &mismatch.path,
            problem: mismatch.problem.to_string(),
        }
    }
}

pub fn verify(context: &Context) -> Result<(), Failure> {
    let prefix = context.prefix(false)?;
    if !prefix.root().join(".kpack").is_dir() {
        let report = VerifyReport {
            schema: SCHEMA,
            checked: 0,
            mismatches: Vec::new(),
            prefix: prefix.root(),
            installed: false,
        };
        report.render_text(&context.printer);
        context.printer.report(&report);
        return Ok(());
    }
    // Read-only, like `list`: no lock, nothing written.
    let (checked, mismatches) = verify_unlocked(context, &prefix)?;
    let report = VerifyReport {
        schema: SCHEMA,
        checked,
        mismatches: mismatches.iter().map(MismatchReport::from).collect(),
        prefix: prefix.root(),
        installed: true,
    };
    report.render_text(&context.printer);
    context.printer.report(&report);
    if mismatches.is_empty() {
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

/// How often `verify` reads the prefix again when a change committed while
/// it was hashing.
const ATTEMPTS: usize = 3;

/// Hashes the installed files against the record without the prefix's
/// lock: again when a change committed meanwhile (the record or journal
/// differs after), and not judging the files a change under way names,
/// which it may be moving.
fn verify_unlocked(context: &Context, prefix: &Prefix) -> Result<(usize, Vec<Mismatch>), Failure> {
    let mut change = context.read_state(prefix)?;
    let mut attempt = 1;
    let (checked, mut mismatches) = loop {
        let record = prefix.record()?;
        let result = prefix.verify()?;
        let now = prefix.change()?;
        let settled = now == change && prefix.record()? == record;
        change = now;
        if settled || attempt == ATTEMPTS {
            break result;
        }
        attempt += 1;
    };
    if let PrefixChange::UnderWay {
        journal: Some((_, named)),
        ..
    } = &change
    {
        let before = mismatches.len();
        mismatches.retain(|mismatch| !named.contains(&mismatch.path));
        let moving = before - mismatches.len();
        if moving > 0 {
            context.printer.note(format!(
                "{moving} installed file{} the change under way is moving not judged",
                if moving == 1 { "" } else { "s" }
            ));
        }
    }
    Ok((checked, mismatches))
}

//! `kpack-repo gc`: files no root a reader may still hold pins, listed or
//! deleted once older than the grace period.

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use kpack_cli::{counted, ByteSize, JsonArg, Printer};
use kpack_repo::store::Store;
use kpack_repo::tidy::collect_garbage;
use kpack_repo_index::address::Address;
use kpack_repo_index::types::Timestamp;
use serde::Serialize;

use super::options::{repository, StorageArgs};

#[derive(Debug, Args)]
pub(super) struct GcArgs {
    /// The repository: a directory or s3://bucket/prefix.
    #[arg(value_parser = repository)]
    repo: Address,
    /// How old an unpinned file must be to go, and how long a root stays
    /// readable after a newer one replaced it: `90s`, `30m`, `24h`, `7d`.
    #[arg(long, value_name = "AGE", default_value = "24h", value_parser = age)]
    grace: Duration,
    /// Delete; without it, only say what would go.
    #[arg(long)]
    yes: bool,
    #[command(flatten)]
    pub(super) json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

/// `90s`, `30m`, `24h`, `7d`, or plain seconds.
fn age(text: &str) -> Result<Duration, String> {
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = match &text[digits.len()..] {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: an age is a number with s, m, h or d")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?}: an age is a number with s, m, h or d"))
}

#[derive(Debug, Serialize)]
struct GcReport {
    repo: String,
    /// The root versions still readable, whose files are kept.
    roots: Vec<u64>,
    garbage: Vec<ObjectReport>,
    /// Whether the garbage was deleted (`--yes`) or only listed.
    deleted: bool,
    size: u64,
    /// Unpinned files kept because they are younger than the grace period.
    young: Vec<ObjectReport>,
}

#[derive(Debug, Serialize)]
struct ObjectReport {
    key: String,
    size: u64,
}

pub(super) fn run(printer: &Printer, args: GcArgs) -> anyhow::Result<()> {
    let repo = &args.repo;
    // Deleting needs no publishing protocol: a plain store.
    let store = Store::open(repo, &args.storage.s3())?;
    let collected = collect_garbage(&store, args.grace, Timestamp::now(), args.yes)
        .with_context(|| format!("cannot collect the garbage of {repo}"))?;
    let objects = |objects: &[kpack_repo::store::StoredObject]| {
        (objects.iter())
            .map(|o| ObjectReport {
                key: o.key.clone(),
                size: o.size,
            })
            .collect()
    };
    let report = GcReport {
        repo: repo.to_string(),
        roots: collected.roots.clone(),
        garbage: objects(&collected.garbage),
        deleted: args.yes,
        size: collected.bytes(),
        young: objects(&collected.young),
    };
    gc_text(printer, &report);
    printer.report(&report);
    Ok(())
}

/// What `gc` deleted or would delete, as text.
fn gc_text(printer: &Printer, report: &GcReport) {
    let roots: Vec<String> = report.roots.iter().map(u64::to_string).collect();
    printer.line(format!("roots still readable: {}", roots.join(", ")));
    for object in &report.garbage {
        printer.line(format!("  {} ({})", object.key, ByteSize(object.size)));
    }
    let files = counted(report.garbage.len(), "file", "files");
    let (bytes, repo) = (ByteSize(report.size), &report.repo);
    if report.deleted {
        printer.line(format!("deleted {files} ({bytes}) from {repo}"));
    } else {
        printer.line(format!(
            "would delete {files} ({bytes}) from {repo}; --yes deletes them"
        ));
    }
    if !report.young.is_empty() {
        let young: u64 = report.young.iter().map(|o| o.size).sum();
        printer.line(format!(
            "kept {} ({}) younger than the grace period",
            counted(report.young.len(), "unpinned file", "unpinned files"),
            ByteSize(young)
        ));
    }
}

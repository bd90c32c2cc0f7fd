//! `kpack-pack verify`.

use std::path::PathBuf;

use anyhow::{bail, Context};

use super::{shown, EmptyArchives};
use kpack_gpu::Target;

use kpack_packer::verify::{verify_against, verify_tree};

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// A directory written by `kpack-pack split`.
    output: PathBuf,
    /// Check for these GPU targets (as a GPU reports them, e.g.
    /// `gfx90a:sramecc+:xnack-`) instead of every target in `.kpack/`, and
    /// show which code each one gets.
    #[arg(long = "target", value_name = "TARGET", value_delimiter = ',', value_parser = Target::parse_given)]
    targets: Vec<Target>,
    /// The fat binary the split one came from, or a directory holding each
    /// split binary's original at the same relative path (an unpacked
    /// wheel): every code object loaded must be byte-equal to its bundle's.
    #[arg(long, value_name = "FAT_BINARY")]
    original: Option<PathBuf>,
}

pub fn run(args: VerifyArgs) -> anyhow::Result<()> {
    let targets = args.targets.clone();
    let report = match &args.original {
        Some(original) => verify_against(&args.output, &targets, original),
        None => verify_tree(&args.output, &targets),
    }
    .with_context(|| format!("cannot verify {}", shown(&args.output)))?;
    if !targets.is_empty() {
        for resolved in &report.resolved {
            let binary = resolved
                .binary
                .strip_prefix(&args.output)
                .unwrap_or(&resolved.binary);
            let archive = normalized(&resolved.archive);
            let archive = archive.strip_prefix(&args.output).unwrap_or(&archive);
            println!(
                "ok   {} bundle {} for {}: {} from {} ({} bytes)",
                shown(binary),
                resolved.bundle,
                resolved.requested,
                resolved.chosen,
                shown(archive),
                resolved.bytes
            );
        }
    }
    for failure in &report.failures {
        println!(
            "FAIL {} bundle {} for {}: {}",
            shown(&failure.binary),
            failure.bundle,
            failure.target,
            failure.error
        );
    }
    for failure in &report.layout_failures {
        println!("FAIL {}: {}", shown(&failure.binary), failure.error);
    }
    let empty: Vec<String> = report
        .empty_archives
        .iter()
        .map(|path| shown(path.strip_prefix(&args.output).unwrap_or(path)))
        .collect();
    for archive in &empty {
        println!("EMPTY {archive}: holds no code object");
    }
    println!(
        "{} split binaries, {} wrappers, {} targets: {} code objects loaded, {} failures",
        report.binaries,
        report.wrappers,
        report.targets.len(),
        report.resolved.len(),
        report.failures.len() + report.layout_failures.len()
    );
    if args.original.is_some() {
        println!(
            "{} code objects byte-equal to the original's",
            report.same_as_original
        );
    }
    if report.binaries == 0 {
        bail!("no split binary under {}", shown(&args.output));
    }
    if report.resolved.is_empty() && report.failures.is_empty() {
        bail!(
            "{} split binaries, but no code object was checked: no archive beside them holds their code (their markers name {})",
            report.binaries,
            report.marker_paths.join(", ")
        );
    }
    if !report.failures.is_empty() {
        bail!("{} wrapper lookups failed", report.failures.len());
    }
    if !report.layout_failures.is_empty() {
        bail!(
            "{} split executables would not start on RHEL 8 kernels",
            report.layout_failures.len()
        );
    }
    if !empty.is_empty() {
        return Err(EmptyArchives(empty).into());
    }
    Ok(())
}

/// `a/b/../c` as `a/c`, for display (the loader joins relative marker
/// paths as they are).
fn normalized(path: &std::path::Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

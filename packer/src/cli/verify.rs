//! `kpack-pack verify`.

use std::path::PathBuf;

use anyhow::{bail, Context};

use super::shown;
use crate::verify::verify_tree;

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// A directory written by `kpack-pack split`.
    output: PathBuf,
}

pub fn run(args: VerifyArgs) -> anyhow::Result<()> {
    let report = verify_tree(&args.output)
        .with_context(|| format!("cannot verify {}", shown(&args.output)))?;
    for failure in &report.failures {
        println!(
            "FAIL {} bundle {} for {}: {}",
            shown(&failure.binary),
            failure.bundle,
            failure.target,
            failure.error
        );
    }
    println!(
        "{} split binaries, {} wrappers, {} targets: {} code objects loaded, {} failures",
        report.binaries,
        report.wrappers,
        report.targets.len(),
        report.loaded,
        report.failures.len()
    );
    if report.binaries == 0 {
        bail!("no split binary under {}", shown(&args.output));
    }
    if !report.failures.is_empty() {
        bail!("{} wrapper lookups failed", report.failures.len());
    }
    Ok(())
}

//! `kpack-pack deps`: the kpack archives split binaries need at run time
//! (`kpack_packer::deps`), as text or JSON. Exit code 1 when a `--target`
//! was given and some binary has no candidate archive present for it.

use std::fmt::{self, Write as _};
use std::path::PathBuf;

use anyhow::bail;
use kpack_cli::{counted, plural, JsonArg, OutputArgs, Printer};
use kpack_gpu::Target;
use kpack_packer::deps::{deps, ArchivePattern, BinaryDeps, DepsReport};

use super::shown;

#[derive(Debug, clap::Args)]
pub struct DepsArgs {
    /// Split binaries, or directories to search for them (recursively, in
    /// sorted order, `.kpack/` directories skipped; files in them that are
    /// not split are left out).
    #[arg(value_name = "FILE|DIR", required = true)]
    paths: Vec<PathBuf>,
    /// A GPU target as the GPU reports it, e.g. `gfx90a:sramecc+:xnack-`
    /// (repeatable): show the archive paths the runtime's loader tries for
    /// it, and fail unless every binary has one present.
    #[arg(long = "target", value_name = "TARGET", value_delimiter = ',', value_parser = Target::parse_given)]
    targets: Vec<Target>,
    #[command(flatten)]
    json: JsonArg,
}

pub fn run(args: DepsArgs, output: OutputArgs) -> anyhow::Result<()> {
    let printer = Printer::new(output, args.json.json);
    let report = deps(&args.paths, &args.targets)?;
    if printer.says() {
        kpack_cli::write_out(render(&report)?.trim_end_matches('\n'));
    }
    printer.report(&report);
    let missing: Vec<String> = report
        .missing()
        .map(|(binary, target)| format!("{} for {target}", shown(&binary.path)))
        .collect();
    if !missing.is_empty() {
        bail!("no archive present: {}", missing.join(", "));
    }
    Ok(())
}

/// The report as text: each binary, then a summary line.
fn render(report: &DepsReport) -> Result<String, fmt::Error> {
    let mut out = String::new();
    for binary in &report.binaries {
        render_binary(&mut out, binary)?;
    }
    let binaries = match report.binaries.len() {
        0 => "no split binary found".to_owned(),
        count => counted(count, "split binary", "split binaries"),
    };
    let targets = report.targets.len();
    let targets_text = counted(targets, "target", "targets");
    let lacking = report
        .binaries
        .iter()
        .filter(|binary| binary.targets.iter().any(|outcome| !outcome.present))
        .count();
    match (targets, lacking) {
        (0, _) => writeln!(out, "{binaries}")?,
        (_, 0) => writeln!(
            out,
            "{binaries}, {targets_text}: every binary has an archive present"
        )?,
        (_, lacking) => writeln!(
            out,
            "{binaries}, {targets_text}: {lacking} {} no archive present for some target",
            plural(lacking, "binary has", "binaries have")
        )?,
    }
    Ok(out)
}

fn render_binary(out: &mut String, binary: &BinaryDeps) -> fmt::Result {
    writeln!(out, "{}", shown(&binary.path))?;
    writeln!(out, "  kernel name  {}", binary.kernel_name)?;
    let bundles: Vec<String> = binary.bundles.iter().map(ToString::to_string).collect();
    writeln!(out, "  bundles      {}", bundles.join(", "))?;
    for pattern in &binary.archives {
        render_pattern(out, pattern)?;
    }
    for outcome in &binary.targets {
        match &outcome.archive {
            Some(archive) => writeln!(out, "  ok      {}: {}", outcome.target, shown(archive))?,
            None => writeln!(
                out,
                "  MISSING {}: no candidate archive is present",
                outcome.target
            )?,
        }
    }
    Ok(())
}

fn render_pattern(out: &mut String, pattern: &ArchivePattern) -> fmt::Result {
    writeln!(out, "  archive      {}", pattern.pattern)?;
    writeln!(out, "    resolved   {}", shown(&pattern.resolved))?;
    if pattern.expansions.is_empty() {
        for present in &pattern.present {
            writeln!(out, "    present    {}", shown(&present.path))?;
        }
        if pattern.present.is_empty() {
            writeln!(out, "    present    none")?;
        }
    }
    for expansion in &pattern.expansions {
        writeln!(out, "    for {}", expansion.target)?;
        for candidate in &expansion.candidates {
            let state = if candidate.present {
                "present"
            } else {
                "missing"
            };
            writeln!(out, "      {state}  {}", shown(&candidate.path))?;
        }
    }
    Ok(())
}

//! `kpack-pack inspect`.

use std::path::PathBuf;

use anyhow::Context;
use rocm_kpack::Archive;
use serde::Serialize;

use super::{shown, EmptyArchives};
use kpack_binary::sniff::BinaryFormat;

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// The archive to show, or a binary (ELF or PE) whose device code to
    /// describe: offload bundles, a split binary's marker, code objects
    /// embedded in other sections.
    archive: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    path: String,
    group: String,
    family: String,
    scheme: String,
    targets: Vec<String>,
    stored_code_objects: usize,
    /// No code object at all: a packaging mistake (exit code 3).
    empty: bool,
    binaries: Vec<BinaryReport>,
}

#[derive(Debug, Serialize)]
struct BinaryReport {
    key: String,
    code_objects: Vec<CodeObjectReport>,
}

#[derive(Debug, Serialize)]
struct CodeObjectReport {
    target: String,
    /// Uncompressed size in bytes.
    bytes: u64,
}

pub fn run(args: InspectArgs) -> anyhow::Result<()> {
    let format = BinaryFormat::of_path(&args.archive)
        .with_context(|| format!("cannot inspect {}", shown(&args.archive)))?;
    if format.is_some() {
        return super::inspect_binary::run(&args.archive, args.json);
    }
    let archive = Archive::open(&args.archive)
        .with_context(|| format!("cannot inspect {}", shown(&args.archive)))?;
    let mut binaries = Vec::new();
    for key in archive.binaries() {
        let mut code_objects = Vec::new();
        for target in archive.targets_of(key).into_iter().flatten() {
            code_objects.push(CodeObjectReport {
                target: target.to_string(),
                bytes: archive.find(key, target)?.size(),
            });
        }
        binaries.push(BinaryReport {
            key: key.to_owned(),
            code_objects,
        });
    }
    let report = Report {
        path: shown(&args.archive),
        group: archive.group().to_owned(),
        family: archive.family().to_owned(),
        scheme: archive.scheme().to_string(),
        targets: archive
            .architectures()
            .iter()
            .map(ToString::to_string)
            .collect(),
        stored_code_objects: archive.stored_count(),
        empty: archive.kernel_count() == 0,
        binaries,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    if report.empty {
        return Err(EmptyArchives(vec![report.path]).into());
    }
    Ok(())
}

fn print_report(report: &Report) {
    println!("archive  {}", report.path);
    println!("group    {}", report.group);
    println!("family   {}", report.family);
    println!("scheme   {}", report.scheme);
    println!("targets  {}", report.targets.join(", "));
    println!("stored   {} code objects", report.stored_code_objects);
    println!();
    println!("{:<40} {:<24} {:>12}", "binary", "target", "bytes");
    for binary in &report.binaries {
        for code_object in &binary.code_objects {
            println!(
                "{:<40} {:<24} {:>12}",
                binary.key, code_object.target, code_object.bytes
            );
        }
    }
}

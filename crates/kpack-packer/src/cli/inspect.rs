//! `kpack-pack inspect`.

use std::path::PathBuf;

use anyhow::Context;
use kpack_cli::{counted, ByteSize, JsonArg, OutputArgs, Printer};
use kpack_gpu::Target;
use rocm_kpack::Archive;
use serde::Serialize;

use super::{shown, Outcome};
use kpack_binary::BinaryFormat;

#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// The archive to show, or a binary (ELF or PE) whose device code to
    /// describe: offload bundles, a split binary's marker, code objects
    /// embedded in other sections.
    archive: PathBuf,
    #[command(flatten)]
    json: JsonArg,
}

#[derive(Debug, Serialize)]
struct Report {
    path: String,
    group: String,
    /// The archive header's family field: a processor (`gfx90a`) for
    /// archives per processor, a family (`gfx110X-all`) otherwise.
    family: String,
    /// `processor` or `family`: what `family` names.
    grouping: &'static str,
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
    /// Decoded (uncompressed) size in bytes.
    decoded_size: u64,
}

pub fn run(args: InspectArgs, output: OutputArgs) -> anyhow::Result<Outcome> {
    let printer = Printer::new(output, args.json.json);
    let format = BinaryFormat::of_path(&args.archive)
        .with_context(|| format!("cannot inspect {}", shown(&args.archive)))?;
    if format.is_some() {
        super::inspect_binary::run(&args.archive, &printer)?;
        return Ok(Outcome::Done);
    }
    let archive = Archive::open(&args.archive)
        .with_context(|| format!("cannot inspect {}", shown(&args.archive)))?;
    let mut binaries = Vec::new();
    for key in archive.binaries() {
        let mut code_objects = Vec::new();
        for target in archive.targets_of(key).into_iter().flatten() {
            code_objects.push(CodeObjectReport {
                target: target.to_string(),
                decoded_size: archive.find(key, target)?.size(),
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
        grouping: if Target::parse(archive.family()).is_ok() {
            "processor"
        } else {
            "family"
        },
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
    print_report(&report, &printer);
    printer.report(&report);
    if report.empty {
        return Ok(Outcome::EmptyArchives(vec![report.path]));
    }
    Ok(Outcome::Done)
}

/// The archive's header, then a line per code object with its decoded
/// size.
fn print_report(report: &Report, printer: &Printer) {
    printer.line(format!("archive    {}", report.path));
    printer.line(format!("group      {}", report.group));
    printer.line(format!("{:<10} {}", report.grouping, report.family));
    printer.line(format!("scheme     {}", report.scheme));
    printer.line(format!("targets    {}", report.targets.join(", ")));
    printer.line(format!(
        "stored     {}",
        counted(report.stored_code_objects, "code object", "code objects")
    ));
    printer.line("");
    printer.line(format!(
        "{:<40} {:<24} {:>12}",
        "binary", "target", "decoded size"
    ));
    for binary in &report.binaries {
        for code_object in &binary.code_objects {
            printer.line(format!(
                "{:<40} {:<24} {:>12}",
                binary.key,
                code_object.target,
                ByteSize(code_object.decoded_size)
            ));
        }
    }
}

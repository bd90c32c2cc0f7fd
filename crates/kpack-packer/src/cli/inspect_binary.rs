//! `kpack-pack inspect` of a binary: its offload bundles (fat), its marker
//! (split), and code objects embedded in other sections, which it loads by
//! its own means and no split can redirect. "No device code" is said only
//! of a binary with none.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context;
use kpack_cli::{counted, ByteSize, Printer};
use serde::Serialize;

use super::shown;
use kpack_binary::code_object::{self, Embedded};
use kpack_binary::input::MappedFile;
use kpack_binary::sniff::{sniff, Sniffed};
use kpack_binary::BinaryFormat;

#[derive(Debug, Serialize)]
struct Report {
    path: String,
    format: BinaryFormat,
    /// `fat`, `split` or `plain`.
    kind: &'static str,
    /// Offload bundles in the file (fat).
    bundles: usize,
    /// Code objects in those bundles, and their targets.
    code_objects: usize,
    targets: Vec<String>,
    /// The archive paths a split binary's marker names.
    marker: Vec<String>,
    embedded: Vec<EmbeddedReport>,
}

#[derive(Debug, Serialize)]
struct EmbeddedReport {
    section: String,
    targets: Vec<String>,
    count: usize,
    bytes: u64,
}

impl From<&Embedded> for EmbeddedReport {
    fn from(embedded: &Embedded) -> Self {
        EmbeddedReport {
            section: embedded.section.clone(),
            targets: embedded.targets.iter().map(ToString::to_string).collect(),
            count: embedded.count,
            bytes: embedded.bytes,
        }
    }
}

pub fn run(path: &Path, printer: &Printer) -> anyhow::Result<()> {
    let mapped = MappedFile::open(path)?;
    let data = mapped.bytes();
    let sniffed = sniff(data, path).with_context(|| format!("cannot inspect {}", shown(path)))?;
    let mut report = Report {
        path: shown(path),
        format: BinaryFormat::of_prefix(data).unwrap_or(BinaryFormat::Elf),
        kind: "plain",
        bundles: 0,
        code_objects: 0,
        targets: Vec::new(),
        marker: Vec::new(),
        embedded: code_object::embedded_in(data)
            .iter()
            .map(EmbeddedReport::from)
            .collect(),
    };
    match sniffed {
        Sniffed::Fat(fat) => {
            report.kind = "fat";
            report.bundles = fat.bundles().len();
            let mut targets = BTreeSet::new();
            for bundle in fat.bundles() {
                for code in bundle.code_objects()? {
                    report.code_objects += 1;
                    targets.insert(code.target.to_string());
                }
            }
            report.targets = targets.into_iter().collect();
        }
        Sniffed::Split(split) => {
            report.kind = "split";
            report.bundles = split.bundles.len();
            report.marker = split.marker.search_paths;
        }
        Sniffed::Plain | Sniffed::NotBinary => {}
    }
    print_report(&report, printer);
    printer.report(&report);
    Ok(())
}

/// The binary's format, kind and embedded code objects, a line each.
fn print_report(report: &Report, printer: &Printer) {
    printer.line(format!("binary    {}", report.path));
    let format = match report.format {
        BinaryFormat::Elf => "ELF",
        BinaryFormat::Pe => "PE",
    };
    printer.line(format!("format    {format}"));
    let kind = match report.kind {
        "fat" => format!(
            "fat: {}, {} for {}",
            counted(report.bundles, "bundle", "bundles"),
            counted(report.code_objects, "code object", "code objects"),
            report.targets.join(", ")
        ),
        "split" => format!(
            "split: {}, archives {}",
            counted(report.bundles, "wrapper", "wrappers"),
            report.marker.join(", ")
        ),
        _ if report.embedded.is_empty() => "not a binary with device code".to_owned(),
        _ => "no offload bundles".to_owned(),
    };
    printer.line(format!("kind      {kind}"));
    for embedded in &report.embedded {
        printer.line(format!(
            "embedded  {}: {} for {} ({}), loaded by the binary itself; they cannot be split",
            embedded.section,
            counted(embedded.count, "code object", "code objects"),
            embedded.targets.join(", "),
            ByteSize(embedded.bytes)
        ));
    }
}

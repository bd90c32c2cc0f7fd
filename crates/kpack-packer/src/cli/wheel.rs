//! `kpack-pack wheel split`.

use std::path::PathBuf;

use anyhow::Context;
use kpack_cli::{counted, ByteSize, Printer};

use super::archive_args::ArchiveArgs;
use super::shown;
use kpack_packer::wheel::{split_wheel, WheelOptions};

#[derive(Debug, clap::Subcommand)]
pub enum WheelCommand {
    /// Split a fat wheel into the host wheel (same file name, fat binaries
    /// split, a `device-<processor>` extra per processor and `device-all`)
    /// and one device wheel per processor
    /// (`<name>_device_<processor>-<version>-<tags>.whl`) holding
    /// `<top-level package>/.kpack/<group>_<processor>.kpack`. Zip
    /// timestamps come from `SOURCE_DATE_EPOCH` when set.
    Split(SplitArgs),
}

#[derive(Debug, clap::Args)]
pub struct SplitArgs {
    /// The fat wheel.
    input: PathBuf,
    /// Directory the wheels are written to (created if needed).
    #[arg(short, long)]
    output: PathBuf,
    #[command(flatten)]
    archive: ArchiveArgs,
    /// Also write a PEP 825 variant wheel per processor (the host wheel's
    /// content plus that processor's archive, labelled with the processor,
    /// `amd :: gfx_arch :: <processor>` in its `variant.json`) and the
    /// release's `{name}-{version}-variants.json`.
    #[arg(long)]
    variants: bool,
    /// Refuse a wheel whose RECORD misses a member, lists one without a
    /// hash or gives a stale size or hash (pip installs such wheels; by
    /// default each is named in a note and the wheels written get RECORDs
    /// of their own).
    #[arg(long)]
    strict_record: bool,
}

pub fn run(command: WheelCommand, printer: &Printer) -> anyhow::Result<()> {
    match command {
        WheelCommand::Split(args) => split(args, printer),
    }
}

fn split(args: SplitArgs, printer: &Printer) -> anyhow::Result<()> {
    let group = args.archive.group()?.to_owned();
    let source_date_epoch =
        match super::env(kpack_env::EnvVars::SOURCE_DATE_EPOCH) {
            Some(value) => Some(value.trim().parse::<i64>().with_context(|| {
                format!("SOURCE_DATE_EPOCH={value:?} is not a number of seconds")
            })?),
            None => None,
        };
    let options = WheelOptions {
        compression: args.archive.compression(),
        source_date_epoch,
        signer: args.archive.signer()?,
        variants: args.variants,
        budget: args.archive.memory,
        strict_record: args.strict_record,
        ..WheelOptions::new(&group)
    };
    let report = split_wheel(&args.input, &args.output, &options)
        .with_context(|| format!("cannot split the wheel {}", shown(&args.input)))?;
    for note in &report.record_notes {
        printer.line(format!("note: {note}"));
    }
    for (member, sections) in &report.embedded {
        super::embedded_notes(printer, format!("member {member:?}"), sections);
    }
    let Some(host) = &report.host else {
        printer.line(format!(
            "{}: nothing to split ({}, no fat binary, no device code file); nothing written",
            shown(&args.input),
            counted(report.members, "file", "files")
        ));
        return Ok(());
    };
    printer.line(format!(
        "split {}: {} of {} {} fat {}, device code for {}",
        shown(&args.input),
        report.binaries,
        counted(report.members, "file", "files"),
        kpack_cli::plural(report.binaries, "was a", "were"),
        kpack_cli::plural(report.binaries, "binary", "binaries"),
        counted(report.devices.len(), "processor", "processors")
    ));
    if report.routed > 0 {
        printer.line(format!(
            "  {} routed whole to device wheels (code objects, their companions, kernel databases)",
            counted(report.routed, "file", "files")
        ));
    }
    printer.line(format!(
        "  {} (host, {})",
        shown(host),
        ByteSize(report.host_bytes)
    ));
    for member in &report.unsigned {
        super::unsigned_note(printer, member);
    }
    for device in &report.devices {
        let targets: Vec<String> = device.targets.iter().map(ToString::to_string).collect();
        let files = match device.files {
            0 => String::new(),
            n => format!(", {}", counted(n, "file", "files")),
        };
        printer.line(format!(
            "  {} ({} [{}], {}{files}, {})",
            shown(&device.path),
            device.distribution,
            targets.join(", "),
            counted(device.code_objects, "code object", "code objects"),
            ByteSize(device.bytes)
        ));
    }
    for variant in &report.variants {
        printer.line(format!("  {} (variant)", shown(variant)));
    }
    if let Some(index) = &report.variants_index {
        printer.line(format!("  {} (variants index)", shown(index)));
    }
    let devices: u64 = report.devices.iter().map(|d| d.bytes).sum();
    printer.line(format!(
        "bytes in {}, host bytes out {}, device bytes out {devices}",
        report.bytes_in, report.host_bytes
    ));
    Ok(())
}

//! `kpack-pack wheel split`.

use std::path::PathBuf;

use anyhow::Context;

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

pub fn run(command: WheelCommand) -> anyhow::Result<()> {
    match command {
        WheelCommand::Split(args) => split(args),
    }
}

fn split(args: SplitArgs) -> anyhow::Result<()> {
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
        println!("note: {note}");
    }
    for (member, sections) in &report.embedded {
        super::embedded_notes(format!("member {member:?}"), sections);
    }
    let Some(host) = &report.host else {
        println!(
            "{}: nothing to split ({} files, no fat binary, no device code file); nothing written",
            shown(&args.input),
            report.members
        );
        return Ok(());
    };
    println!(
        "split {}: {} of {} files were fat binaries, device code for {} processors",
        shown(&args.input),
        report.binaries,
        report.members,
        report.devices.len()
    );
    if report.routed > 0 {
        println!(
            "  {} files routed whole to device wheels (code objects, their companions, kernel databases)",
            report.routed
        );
    }
    println!("  {} (host, {} bytes)", shown(host), report.host_bytes);
    for member in &report.unsigned {
        super::unsigned_note(member);
    }
    for device in &report.devices {
        let targets: Vec<String> = device.targets.iter().map(ToString::to_string).collect();
        let files = match device.files {
            0 => String::new(),
            n => format!(", {n} files"),
        };
        println!(
            "  {} ({} [{}], {} code objects{files}, {} bytes)",
            shown(&device.path),
            device.distribution,
            targets.join(", "),
            device.code_objects,
            device.bytes
        );
    }
    for variant in &report.variants {
        println!("  {} (variant)", shown(variant));
    }
    if let Some(index) = &report.variants_index {
        println!("  {} (variants index)", shown(index));
    }
    let devices: u64 = report.devices.iter().map(|d| d.bytes).sum();
    println!(
        "bytes in {}, host bytes out {}, device bytes out {devices}",
        report.bytes_in, report.host_bytes
    );
    Ok(())
}

//! `kpack-pack split`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use kpack_cli::{counted, ByteSize, Printer};
use rocm_kpack::Compression;

use super::archive_args::ArchiveArgs;
use super::{embedded_notes, shown, unsigned_note, GroupByArg};
use kpack_binary::code_object;
use kpack_binary::input::MappedFile;
use kpack_packer::archive::{ArchiveSet, Grouping, WrittenArchive};
use kpack_packer::databases::payload::DatabasePayload;
use kpack_packer::sign::sign_archive;
use kpack_packer::split::FatBinary;
use kpack_packer::tree::{split_tree_with, DatabaseMode, TreeOptions};
use kpack_sign::SecretKey;
use rocm_kpack::format::KPACK_DIR;

#[derive(Debug, clap::Args)]
pub struct SplitArgs {
    /// The fat binary, or install tree, to split.
    input: PathBuf,
    /// Output directory: the host-only file (or tree) and `.kpack/` go
    /// here. For a tree it must not exist yet, and kernel database files
    /// for one target (rocBLAS, hipBLASLt, AOTriton, MIOpen, rocFFT) go
    /// into one payload per component and owner beside it:
    /// `<OUTPUT>.payloads/<component>/<owner>/<path in the tree>` (a
    /// processor, or a sub-family or family such as `gfx11`),
    /// which installs by extracting it into the prefix.
    #[arg(short, long)]
    output: PathBuf,
    /// Put the database payloads here instead (it must not exist).
    #[arg(long, value_name = "DIR", conflicts_with = "pack_databases")]
    payloads: Option<PathBuf>,
    /// Store kernel database files in the kpack archives instead of
    /// payloads, under `<library>/<target>/<file name>` (what
    /// `kpack_get_kernel` is asked for), with their library and path as
    /// metadata.
    #[arg(long)]
    pack_databases: bool,
    #[command(flatten)]
    archive: ArchiveArgs,
    /// One archive per processor (found by the runtime through
    /// `@GFXARCH@`), or per family (`<group>_gfx110X-all.kpack`, named in
    /// the markers).
    #[arg(long, value_enum, default_value = "processor")]
    group_by: GroupByArg,
}

fn sign_all(
    printer: &Printer,
    signer: Option<&SecretKey>,
    archives: &[WrittenArchive],
) -> anyhow::Result<()> {
    if let Some(signer) = signer {
        for archive in archives {
            let signature = sign_archive(signer, &archive.path)?;
            printer.line(format!("  signed {}", shown(&signature)));
        }
    }
    Ok(())
}

pub fn run(args: SplitArgs, printer: &Printer) -> anyhow::Result<()> {
    let group = args.archive.group()?;
    let compression = args.archive.compression();
    let signer = args.archive.signer()?;
    if args.input.is_dir() {
        return run_tree(&args, compression, signer.as_ref(), printer);
    }
    if args.pack_databases || args.payloads.is_some() {
        bail!("--pack-databases and --payloads apply to trees, not to one file");
    }
    let input = &args.input;
    let mapped = MappedFile::open(input)?;
    let data = mapped.bytes();
    let name = input
        .file_name()
        .with_context(|| format!("{} has no file name", shown(input)))?
        .to_string_lossy()
        .into_owned();
    let grouping = args.group_by.into();
    let Some(binary) = FatBinary::parse(data, &name, |targets| {
        Grouping::search_paths(grouping, group, &format!("{KPACK_DIR}/"), targets)
    })
    .with_context(|| format!("cannot split {}", shown(input)))?
    else {
        let embedded = code_object::embedded_in(data);
        if embedded.is_empty() {
            bail!(
                "{} is not a binary with device code (an ELF file with .hip_fatbin or a PE image with .hip_fat)",
                shown(input)
            );
        }
        embedded_notes(printer, shown(input), &embedded);
        bail!(
            "{} has no offload bundles to split: its device code is embedded and loaded by the binary itself",
            shown(input)
        );
    };
    fs_err::create_dir_all(&args.output)?;
    let host = args.output.join(&name);
    if same_file(input, &host) {
        bail!("the output {} would overwrite the input", shown(&host));
    }
    let mut archives = ArchiveSet::new(&args.output.join(KPACK_DIR), group, grouping, compression)
        .with_budget(args.archive.memory);
    archives.add(&binary.units(), |bytes| mapped.release(bytes))?;
    let archives = archives.finish()?;
    let (layout, host_bytes) = binary.write_host_like(data, mapped.file(), &host, input)?;
    sign_all(printer, signer.as_ref(), &archives)?;

    let mut targets: Vec<String> = binary.targets.iter().map(ToString::to_string).collect();
    targets.sort();
    printer.line(format!(
        "split {}: {} for {} [{}]",
        shown(input),
        counted(binary.code_objects(), "code object", "code objects"),
        counted(targets.len(), "target", "targets"),
        targets.join(", ")
    ));
    summary(printer, 1, 1, data.len() as u64, host_bytes, &archives);
    embedded_notes(printer, shown(input), &code_object::embedded_in(data));
    if layout.removed_signature() {
        unsigned_note(printer, shown(&host));
    }
    Ok(())
}

fn run_tree(
    args: &SplitArgs,
    compression: Compression,
    signer: Option<&SecretKey>,
    printer: &Printer,
) -> anyhow::Result<()> {
    let options = TreeOptions {
        grouping: args.group_by.into(),
        compression,
        databases: if args.pack_databases {
            DatabaseMode::Pack
        } else {
            DatabaseMode::Payloads
        },
        payload_dir: args.payloads.clone(),
        budget: args.archive.memory,
        ..TreeOptions::new(args.archive.group()?)
    };
    let report = split_tree_with(&args.input, &args.output, &options)
        .with_context(|| format!("cannot split the tree {}", shown(&args.input)))?;
    sign_all(printer, signer, &report.archives)?;
    payload_lines(printer, &report.payloads);
    summary(
        printer,
        report.files,
        report.binaries,
        report.bytes_in,
        report.host_bytes_out,
        &report.archives,
    );
    for host in &report.unsigned {
        unsigned_note(printer, shown(&args.output.join(host)));
    }
    for (file, sections) in &report.embedded {
        embedded_notes(printer, shown(file), sections);
    }
    if report.database_files > 0 {
        printer.line(format!(
            "database files {}, payloads {}",
            report.database_files,
            report.payloads.len()
        ));
    }
    Ok(())
}

/// One line per database payload written.
fn payload_lines(printer: &Printer, payloads: &[DatabasePayload]) {
    for payload in payloads {
        let targets: Vec<String> = payload.targets.iter().map(ToString::to_string).collect();
        printer.line(format!(
            "  {} ({} {} [{}], {}, {})",
            shown(&payload.dir),
            payload.component,
            payload.owner,
            targets.join(", "),
            counted(payload.files, "file", "files"),
            ByteSize(payload.bytes)
        ));
    }
}

/// The archives written and the closing line every split prints.
fn summary(
    printer: &Printer,
    files: usize,
    binaries: usize,
    bytes_in: u64,
    host_bytes: u64,
    archives: &[WrittenArchive],
) {
    let mut targets: Vec<String> = archives
        .iter()
        .flat_map(|a| a.targets.iter().map(ToString::to_string))
        .collect();
    targets.sort();
    targets.dedup();
    for archive in archives {
        printer.line(format!(
            "  {} ({}, {})",
            shown(&archive.path),
            counted(archive.code_objects, "code object", "code objects"),
            ByteSize(archive.bytes)
        ));
    }
    printer.line(format!(
        "files {files}, binaries split {binaries}, targets {}, bytes in {bytes_in}, host bytes out {host_bytes}, archive bytes out {}",
        targets.len(),
        archives.iter().map(|a| a.bytes).sum::<u64>()
    ));
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs_err::canonicalize(a), fs_err::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

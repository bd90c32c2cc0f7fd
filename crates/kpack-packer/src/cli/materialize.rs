//! `kpack-pack materialize`.

use std::path::PathBuf;

use anyhow::Context;
use kpack_cli::counted;
use kpack_gpu::Target;

use kpack_binary::materialize::{materialize_file, ArchiveSource, BundleEncoding};

use super::shown;

#[derive(Debug, clap::Args)]
pub struct MaterializeArgs {
    /// A binary written by `kpack-pack split`.
    input: PathBuf,
    /// Where to write the fat binary.
    #[arg(short, long, value_name = "OUT")]
    output: PathBuf,
    /// The installed GPU targets (`gfx1100`, `gfx90a:sramecc+:xnack-`),
    /// comma separated or repeated: every feature variant of their
    /// processors and their generic targets go in.
    #[arg(
        long = "target",
        alias = "targets",
        value_name = "TARGET",
        value_delimiter = ',',
        value_parser = Target::parse_given,
        required = true
    )]
    targets: Vec<Target>,
    /// Take code from every `*.kpack` in this directory instead of the
    /// archives the binary's marker names.
    #[arg(long, value_name = "DIR")]
    archives: Option<PathBuf>,
    /// The most bytes the archives' code objects may decode to, in all
    /// (every entry of their tables of contents counted); an archive
    /// listing more is refused before anything is written. By default each
    /// may decode to 256 times its size, at least 64 MiB.
    #[arg(long, value_name = "BYTES")]
    max_decoded_size: Option<u64>,
    /// Write compressed bundles (CCOB v3, zstd, as clang's
    /// `--offload-compress` writes them), which HIP runtimes from ROCm 6.2
    /// on load; older ones (Debian's 5.x) need the default plain ones.
    #[arg(long)]
    compress: bool,
}

pub fn run(args: MaterializeArgs, printer: &kpack_cli::Printer) -> anyhow::Result<()> {
    let targets = args.targets.clone();
    let source = match &args.archives {
        Some(dir) => ArchiveSource::Dir(dir.clone()),
        None => ArchiveSource::Marker,
    };
    let report = materialize_file(
        &args.input,
        &args.output,
        &targets,
        &source,
        args.max_decoded_size,
        if args.compress {
            BundleEncoding::Compressed
        } else {
            BundleEncoding::Plain
        },
    )
    .with_context(|| format!("cannot materialize {}", shown(&args.input)))?;
    printer.line(format!(
        "{}: {}, {} for {} from {}{}",
        shown(&args.output),
        counted(report.wrappers, "wrapper", "wrappers"),
        counted(report.code_objects, "code object", "code objects"),
        if report.targets.is_empty() {
            "no target".to_owned()
        } else {
            kpack_gpu::target::join_targets(&report.targets)
        },
        counted(report.archives.len(), "archive", "archives"),
        if report.empty > 0 {
            format!(
                " ({} without code for these targets)",
                counted(report.empty, "wrapper", "wrappers")
            )
        } else {
            String::new()
        }
    ));
    Ok(())
}

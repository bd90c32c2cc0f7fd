//! The `kpack-repo` command line: the commands, and the one place errors
//! are rendered for people. Each command has a module of its own: its
//! arguments, its typed report, and how the printer says it as text or JSON
//! (sizes in bytes in JSON, for people in text); the options several
//! commands share are in `options`, the parts of reports they share in
//! `report`. Exit codes: 0 success, 1 the command failed, 2 bad usage.

mod add;
mod batch;
mod build;
mod gc;
mod index;
mod keygen;
mod mirror;
mod options;
mod prune;
mod report;
mod sign;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kpack_cli::{JsonArg, OutputArgs, Printer};

/// Builds, signs and checks kpack repositories.
#[derive(Debug, Parser)]
#[command(name = "kpack-repo", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make a minisign key pair (KEY.key, KEY.pub).
    Keygen(keygen::KeygenArgs),
    /// Add a package version's artifacts and publish.
    ///
    /// Artifacts are .kpack archives, .tar.zst trees, or directories packed
    /// into trees.
    Add(add::AddArgs),
    /// Pack manifests' packages and publish them in one root update.
    ///
    /// The packages are split with the packer; what is published already
    /// is left alone.
    Build(build::BuildArgs),
    /// Check every published file and publish a new root.
    ///
    /// Every file is checked against its shard; the new root has its
    /// version bumped and its dates refreshed.
    Index(index::IndexArgs),
    /// Drop all but the newest N versions of each package from the index.
    ///
    /// One root update; the files stay until `gc`.
    Prune(prune::PruneArgs),
    /// Delete files no root a reader may still hold pins.
    ///
    /// Root copies, shards and pool files go once older than the grace
    /// period; a dry run unless --yes.
    Gc(gc::GcArgs),
    /// Sign the current root.
    Sign(sign::SignArgs),
    /// Check signature, expiry and every pinned hash and size.
    Verify(verify::VerifyArgs),
    /// Copy a repository, checked, with only the chosen packages and GPUs.
    ///
    /// Metadata is copied verbatim, artifacts only for the chosen packages
    /// and GPU targets; everything is checked against the upstream's key
    /// and pinned hashes before it is written.
    Mirror(mirror::MirrorArgs),
}

/// Parses arguments, runs the command, renders errors.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command, cli.output) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => kpack_cli::fail(&*error, None, kpack_cli::FAILURE),
    }
}

fn run(command: Command, output: OutputArgs) -> anyhow::Result<()> {
    let printer = |json: JsonArg| Printer::new(output, json.json);
    match command {
        Command::Keygen(args) => keygen::run(&printer(args.json), args),
        Command::Add(args) => add::run(&printer(args.json), args),
        Command::Build(args) => build::run(&printer(args.json), args),
        Command::Index(args) => index::run(&printer(args.json), args),
        Command::Prune(args) => prune::run(&printer(args.json), args),
        Command::Gc(args) => gc::run(&printer(args.json), args),
        Command::Sign(args) => sign::run(&printer(args.json), args),
        Command::Verify(args) => verify::run(&printer(args.json), args),
        Command::Mirror(args) => mirror::run(&printer(args.json), args),
    }
}

//! The `kpack-pack` command line: arguments, one module per command, and
//! the one place errors are rendered for people.
//!
//! Exit codes: 0 success, 1 the command failed (for `deps --target`: some
//! binary has no archive present for a target), 2 bad usage, 3 the command
//! ran but met an archive that holds no code object (`inspect`, `verify`).
#![allow(clippy::print_stdout)]

mod archive_args;
mod deps;
mod inspect;
mod inspect_binary;
mod materialize;
mod split;
mod verify;
mod wheel;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Splits ROCm fat binaries into host-only binaries plus per-target kpack
/// archives.
#[derive(Debug, Parser)]
#[command(name = "kpack-pack", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Split a fat binary or an install tree: writes the host-only file (or
    /// tree) to OUT, its device code to `OUT/.kpack/<group>_<processor>.kpack`
    /// and, for a tree, kernel database files for one target to
    /// `OUT.payloads/<component>/<processor>/` (or into the archives).
    Split(split::SplitArgs),
    /// Make a split binary fat again for the installed GPU targets, so a
    /// HIP runtime without kpack support loads it: its code comes from the
    /// archives its marker names (or `--archives`).
    Materialize(materialize::MaterializeArgs),
    /// Show what an archive holds, or what device code a binary carries.
    Inspect(inspect::InspectArgs),
    /// Check that every split binary under a directory loads its code
    /// objects, through its marker, for every target in `.kpack/`, and
    /// that every split executable has its program headers where RHEL 8
    /// kernels look for them.
    Verify(verify::VerifyArgs),
    /// List the kpack archives split binaries need at run time: each one's
    /// kernel name, bundle indices and archive patterns (as its marker has
    /// them, and resolved against its directory as the runtime resolves
    /// them) with the archive files present; with `--target`, the paths the
    /// runtime's loader tries for each target, present or missing, and exit
    /// code 1 when a binary has none present for a target.
    Deps(deps::DepsArgs),
    /// Split Python wheels into a host wheel and per-processor device
    /// wheels.
    #[command(subcommand)]
    Wheel(wheel::WheelCommand),
}

/// How archives group code objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum GroupByArg {
    Processor,
    Family,
}

impl From<GroupByArg> for kpack_packer::archive::Grouping {
    fn from(arg: GroupByArg) -> Self {
        match arg {
            GroupByArg::Processor => kpack_packer::archive::Grouping::Processor,
            GroupByArg::Family => kpack_packer::archive::Grouping::Family,
        }
    }
}

/// Parses arguments, runs the command, renders errors.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Split(args) => split::run(args),
        Command::Materialize(args) => materialize::run(args),
        Command::Inspect(args) => inspect::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Deps(args) => deps::run(args),
        Command::Wheel(command) => wheel::run(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.is::<EmptyArchives>() => {
            eprintln!("warning: {error}");
            ExitCode::from(3)
        }
        Err(error) => kpack_cli::fail(&*error, None, kpack_cli::FAILURE),
    }
}

/// The archives met that hold no code object: the runtime's loader passes
/// over them, but they are a packaging mistake (ROCm's reference splitter
/// writes them for targets without code), so scripts see exit code 3.
#[derive(Debug, thiserror::Error)]
#[error("{} no code object: {}", if .0.len() == 1 { "an archive holds" } else { "archives hold" }, .0.join(", "))]
struct EmptyArchives(Vec<String>);

/// An environment variable the command line reads besides its flags':
/// the one place kpack-pack reads the environment.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// A path argument, for messages.
fn shown(path: &std::path::Path) -> String {
    path.display().to_string()
}

/// Names the code objects `file` embeds outside offload bundles, one line
/// per section: device code the binary loads by its own means, which no
/// marker can redirect, so it stays in the host output.
fn embedded_notes(file: impl std::fmt::Display, sections: &[kpack_binary::code_object::Embedded]) {
    for section in sections {
        let targets: Vec<String> = section.targets.iter().map(ToString::to_string).collect();
        println!(
            "note: {file}: embeds {} code objects for {} in {} ({} bytes), which it loads itself: they cannot be split and stay in the host output",
            section.count,
            targets.join(", "),
            section.section,
            section.bytes
        );
    }
}

/// Says that the host-only file `host` lost its Authenticode signature:
/// a split changes the image, so the signature no longer held.
fn unsigned_note(host: impl std::fmt::Display) {
    println!(
        "note: {host}: its Authenticode signature was removed (the split changed the image); sign it again"
    );
}

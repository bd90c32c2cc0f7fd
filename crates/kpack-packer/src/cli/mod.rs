//! The `kpack-pack` command line: arguments, one module per command, and
//! the one place errors are rendered for people.
//!
//! Exit codes: 0 success, 1 the command failed (for `deps --target`: some
//! binary has no archive present for a target), 2 bad usage, 3 the command
//! ran but met an archive that holds no code object (`inspect`, `verify`).

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
    #[command(flatten)]
    output: kpack_cli::OutputArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Split a fat binary or an install tree into host-only files and
    /// per-target archives.
    ///
    /// Writes the host-only file (or tree) to OUT, its device code to
    /// `OUT/.kpack/<group>_<processor>.kpack` and, for a tree, kernel
    /// database files for one target to
    /// `OUT.payloads/<component>/<processor>/` (or into the archives).
    Split(split::SplitArgs),
    /// Make a split binary fat again for the installed GPU targets.
    ///
    /// A HIP runtime without kpack support then loads it: its code comes
    /// from the archives its marker names (or `--archives`).
    Materialize(materialize::MaterializeArgs),
    /// Show what an archive holds, or what device code a binary carries.
    Inspect(inspect::InspectArgs),
    /// Check that split binaries load their code objects through their
    /// markers.
    ///
    /// Every split binary under a directory (or the one given) must load
    /// its code objects, through its marker, for every target in
    /// `.kpack/`, and every split executable must have its program headers
    /// where RHEL 8 kernels look for them.
    Verify(verify::VerifyArgs),
    /// List the kpack archives split binaries need at run time.
    ///
    /// Each one's kernel name, bundle indices and archive patterns (as its
    /// marker has them, and resolved against its directory as the runtime
    /// resolves them) with the archive files present; with `--target`, the
    /// paths the runtime's loader tries for each target, present or
    /// missing, and exit code 1 when a binary has none present for a
    /// target.
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
    let output = cli.output;
    let printer = kpack_cli::Printer::new(output, false);
    let done = |result: anyhow::Result<()>| result.map(|()| Outcome::Done);
    let result = match cli.command {
        Command::Split(args) => done(split::run(args, &printer)),
        Command::Materialize(args) => done(materialize::run(args, &printer)),
        Command::Inspect(args) => inspect::run(args, output),
        Command::Verify(args) => verify::run(args, output),
        Command::Deps(args) => done(deps::run(args, output)),
        Command::Wheel(command) => done(wheel::run(command, &printer)),
    };
    match result {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::EmptyArchives(archives)) => {
            kpack_cli::write_err(&format!(
                "warning: {} no code object: {}",
                kpack_cli::plural(archives.len(), "an archive holds", "archives hold"),
                archives.join(", ")
            ));
            ExitCode::from(3)
        }
        Err(error) => kpack_cli::fail(&*error, None, kpack_cli::FAILURE),
    }
}

/// How a command that did its work ended.
enum Outcome {
    Done,
    /// It met archives that hold no code object: the runtime's loader
    /// passes over them, but they are a packaging mistake (ROCm's
    /// reference splitter writes them for targets without code), so
    /// scripts see exit code 3.
    EmptyArchives(Vec<String>),
}

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
fn embedded_notes(
    printer: &kpack_cli::Printer,
    file: impl std::fmt::Display,
    sections: &[kpack_binary::code_object::Embedded],
) {
    for section in sections {
        let targets: Vec<String> = section.targets.iter().map(ToString::to_string).collect();
        printer.line(format!(
            "note: {file}: embeds {} for {} in {} ({}), which it loads itself: they cannot be split and stay in the host output",
            kpack_cli::counted(section.count, "code object", "code objects"),
            targets.join(", "),
            section.section,
            kpack_cli::ByteSize(section.bytes)
        ));
    }
}

/// Says that the host-only file `host` lost its Authenticode signature:
/// a split changes the image, so the signature no longer held.
fn unsigned_note(printer: &kpack_cli::Printer, host: impl std::fmt::Display) {
    printer.line(format!(
        "note: {host}: its Authenticode signature was removed (the split changed the image); sign it again"
    ));
}

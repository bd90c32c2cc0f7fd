//! `kpack-pack verify`: a split tree or binary, as text (one problem a
//! line) or a JSON report.

use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context};
use kpack_cli::{counted, ByteSize, JsonArg, OutputArgs, Printer};
use kpack_gpu::Target;
use serde::Serialize;

use super::{shown, Outcome};
use kpack_packer::verify::{verify_against, verify_tree, Failure, Problem, VerifyReport};

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// A directory written by `kpack-pack split`, or one split binary.
    output: PathBuf,
    /// Check for these GPU targets (as a GPU reports them, e.g.
    /// `gfx90a:sramecc+:xnack-`) instead of every target in `.kpack/`, and
    /// show which code each one gets.
    #[arg(long = "target", value_name = "TARGET", value_delimiter = ',', value_parser = Target::parse_given)]
    targets: Vec<Target>,
    /// The fat binary the split one came from, or a directory holding each
    /// split binary's original at the same relative path (an unpacked
    /// wheel): every code object loaded must be byte-equal to its bundle's
    /// ("modified" if not), and every one it has must be served ("missing"
    /// if not).
    #[arg(long, value_name = "FAT_BINARY")]
    original: Option<PathBuf>,
    #[command(flatten)]
    json: JsonArg,
}

/// What `verify` found, as `--json` prints it.
#[derive(Debug, Serialize)]
struct Report {
    path: String,
    binaries: usize,
    wrappers: usize,
    targets: Vec<String>,
    loaded: Vec<Loaded>,
    problems: Vec<ProblemReport>,
    /// Code objects byte-equal to the original's (with `--original`).
    same_as_original: Option<usize>,
    empty_archives: Vec<String>,
}

/// A code object the loader found for a wrapper and target.
#[derive(Debug, Serialize)]
struct Loaded {
    binary: String,
    bundle: u32,
    target: String,
    chosen: String,
    archive: String,
    /// Decoded size in bytes.
    size: u64,
}

/// One problem: `modified`, `missing`, `not_found` (the loader found no
/// code) or `program_headers` (a split executable RHEL 8 would not start).
#[derive(Debug, Serialize)]
struct ProblemReport {
    kind: &'static str,
    binary: String,
    bundle: Option<u32>,
    target: Option<String>,
    message: String,
    /// Lines that go with the message: each path tried, each archive met.
    details: Vec<String>,
}

pub fn run(args: VerifyArgs, output: OutputArgs) -> anyhow::Result<Outcome> {
    let printer = Printer::new(output, args.json.json);
    let report = match &args.original {
        Some(original) => verify_against(&args.output, &args.targets, original),
        None => verify_tree(&args.output, &args.targets),
    }
    .with_context(|| format!("cannot verify {}", shown(&args.output)))?;
    let shown_at = Shown(&args.output);
    let json = Report {
        path: shown(&args.output),
        binaries: report.binaries,
        wrappers: report.wrappers,
        targets: report.targets.iter().map(ToString::to_string).collect(),
        loaded: report.resolved.iter().map(|r| shown_at.loaded(r)).collect(),
        problems: problems(&report, shown_at),
        same_as_original: args.original.as_ref().map(|_| report.same_as_original),
        empty_archives: report
            .empty_archives
            .iter()
            .map(|p| shown_at.path(p))
            .collect(),
    };
    render_text(&json, &printer, args.targets.is_empty());
    printer.report(&json);
    outcome(&report, json, &args.output)
}

/// The problems of `report`: each failed lookup, then each layout failure.
fn problems(report: &VerifyReport, shown: Shown<'_>) -> Vec<ProblemReport> {
    let lookups = report.failures.iter().map(|f| shown.failure(f));
    let layouts = report.layout_failures.iter().map(|f| ProblemReport {
        kind: "program_headers",
        binary: shown.path(&f.binary),
        bundle: None,
        target: None,
        message: f.error.to_string(),
        details: Vec::new(),
    });
    lookups.chain(layouts).collect()
}

/// The report as text: loaded code (with `--target`, or `-v`), one line a
/// problem (and one a detail), empty archives, then the tally.
fn render_text(report: &Report, printer: &Printer, all_targets: bool) {
    for loaded in &report.loaded {
        let line = format!(
            "ok        {} bundle {} for {}: {} from {} ({})",
            loaded.binary,
            loaded.bundle,
            loaded.target,
            loaded.chosen,
            loaded.archive,
            ByteSize(loaded.size)
        );
        if all_targets {
            printer.detail(line);
        } else {
            printer.line(line);
        }
    }
    for problem in &report.problems {
        let label = match problem.kind {
            "modified" | "missing" => problem.kind,
            _ => "FAIL",
        };
        let wrapper = match (&problem.bundle, &problem.target) {
            (Some(bundle), Some(target)) => format!(" bundle {bundle} for {target}"),
            _ => String::new(),
        };
        printer.problem(format!(
            "{label:<9} {}{wrapper}: {}",
            problem.binary, problem.message
        ));
        for detail in &problem.details {
            printer.problem(format!("            {detail}"));
        }
    }
    for archive in &report.empty_archives {
        printer.problem(format!("EMPTY     {archive}: holds no code object"));
    }
    printer.line(tally(report));
    if let Some(same) = report.same_as_original {
        printer.line(format!(
            "{} byte-equal to the original's",
            counted(same, "code object", "code objects")
        ));
    }
}

/// `1 split binary, 2 wrappers, 3 targets: 4 code objects loaded, 2
/// problems (1 modified, 1 missing)`.
fn tally(report: &Report) -> String {
    let problems = report.problems.len();
    let mut line = format!(
        "{}, {}, {}: {} loaded, {}",
        counted(report.binaries, "split binary", "split binaries"),
        counted(report.wrappers, "wrapper", "wrappers"),
        counted(report.targets.len(), "target", "targets"),
        counted(report.loaded.len(), "code object", "code objects"),
        counted(problems, "problem", "problems"),
    );
    if problems > 0 {
        line.push_str(&format!(" ({})", kinds(&report.problems)));
    }
    line
}

/// `1 modified, 1 missing`: the problems by kind, in a fixed order.
fn kinds(problems: &[ProblemReport]) -> String {
    let kinds = [
        ("modified", "modified"),
        ("missing", "missing"),
        ("not_found", "not found"),
        ("program_headers", "with misplaced program headers"),
    ];
    let each: Vec<String> = kinds
        .iter()
        .filter_map(|(kind, said)| {
            let count = problems.iter().filter(|p| p.kind == *kind).count();
            (count > 0).then(|| format!("{count} {said}"))
        })
        .collect();
    each.join(", ")
}

/// The exit: an error when nothing was checked or something failed, the
/// empty archives' exit code 3 when only they are wrong.
fn outcome(report: &VerifyReport, json: Report, output: &Path) -> anyhow::Result<Outcome> {
    if report.binaries == 0 {
        bail!("no split binary in {}", shown(output));
    }
    if report.resolved.is_empty() && report.failures.is_empty() {
        bail!(
            "{}, but no code object was checked: no archive beside them holds their code (their markers name {})",
            counted(report.binaries, "split binary", "split binaries"),
            report.marker_paths.join(", ")
        );
    }
    if !json.problems.is_empty() {
        bail!(
            "{} in {}: {}",
            counted(json.problems.len(), "problem", "problems"),
            shown(output),
            kinds(&json.problems)
        );
    }
    if !json.empty_archives.is_empty() {
        return Ok(Outcome::EmptyArchives(json.empty_archives));
    }
    Ok(Outcome::Done)
}

/// Paths as printed: below the verified directory, without `..`.
#[derive(Clone, Copy)]
struct Shown<'a>(&'a Path);

impl Shown<'_> {
    fn path(&self, path: &Path) -> String {
        let path = normalized(path);
        let root = normalized(self.0);
        match path.strip_prefix(&root) {
            Ok(relative) if !relative.as_os_str().is_empty() => shown(relative),
            _ => shown(&path),
        }
    }

    fn loaded(&self, resolved: &kpack_packer::verify::Resolved) -> Loaded {
        Loaded {
            binary: self.path(&resolved.binary),
            bundle: resolved.bundle,
            target: resolved.requested.to_string(),
            chosen: resolved.chosen.to_string(),
            archive: self.path(&resolved.archive),
            size: resolved.bytes as u64,
        }
    }

    fn failure(&self, failure: &Failure) -> ProblemReport {
        let (kind, message, details) = match &failure.problem {
            Problem::Modified { chosen, bytes } => (
                "modified",
                format!(
                    "the {chosen} code object ({}) differs from the original's",
                    ByteSize(*bytes as u64)
                ),
                Vec::new(),
            ),
            Problem::Missing => (
                "missing",
                "the original has a code object for it; no archive serves it".to_owned(),
                Vec::new(),
            ),
            Problem::Lookup(error) => {
                let (message, details) = self.lookup(error);
                ("not_found", message, details)
            }
        };
        ProblemReport {
            kind,
            binary: self.path(&failure.binary),
            bundle: Some(failure.bundle),
            target: Some(failure.target.to_string()),
            message,
            details,
        }
    }

    /// A loader error as a message and one line per path it names.
    fn lookup(&self, error: &rocm_kpack::Error) -> (String, Vec<String>) {
        use rocm_kpack::Error;
        match error {
            Error::ArchiveNotFound { tried } => (
                "no kpack archive found; tried:".to_owned(),
                tried.iter().map(|p| self.path(p)).collect(),
            ),
            Error::ArchNotFound {
                requested,
                available,
            } => (
                format!(
                    "no archive has code for {}; available:",
                    kpack_gpu::target::join_targets(requested)
                ),
                available
                    .iter()
                    .map(|(path, targets)| {
                        let targets = kpack_gpu::target::join_targets(targets);
                        format!("{}: {targets}", self.path(path))
                    })
                    .collect(),
            ),
            Error::KernelNotFoundAnywhere { binary, misses } => (
                format!("no archive holds {binary:?}; searched:"),
                misses
                    .iter()
                    .map(|(path, target)| format!("{} ({target})", self.path(path)))
                    .collect(),
            ),
            other => (kpack_error::messages(other).join(": "), Vec::new()),
        }
    }
}

/// `a/b/../c` as `a/c`, lexically (the loader joins relative marker paths
/// as they are).
fn normalized(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalised_lexically() {
        assert_eq!(
            normalized(Path::new("out/lib/../../out/.kpack/x.kpack")),
            Path::new("out/.kpack/x.kpack")
        );
        assert_eq!(normalized(Path::new("../a/./b/..")), Path::new("../a"));
        assert_eq!(
            Shown(Path::new("out")).path(Path::new("out/lib/../.kpack/a")),
            ".kpack/a"
        );
    }
}

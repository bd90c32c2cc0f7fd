//! `check`: whether what the prefix holds serves every GPU; and the
//! rendering of a check's report, which `pip check` shares.

use kpack_gpu::target::join_targets;
use rocm_kpack_get::check::report::Place;
use rocm_kpack_get::check::{CheckReport, Invocation, KeptIndex, PrefixCheck, Published};
use rocm_kpack_get::install::record::InstalledRecord;

use super::{Context, Exit, Failure};

pub fn check(context: &Context) -> Result<(), Failure> {
    let gpus = context.gpus()?.targets;
    let prefix = context.prefix(false)?;
    let installed = prefix.root().join(".kpack").is_dir();
    // Read-only, like `verify`: nothing in the prefix is written.
    let _lock = if installed {
        context.read_lock(&prefix)?
    } else {
        None
    };
    let record = if installed {
        prefix.record()?
    } else {
        InstalledRecord::empty()
    };
    let kept = KeptIndex {
        repos: &context.settings.repos,
        store: &context.store,
        cache: &context.cache,
        trust: context.trust,
    };
    let (published, notes) = if gpus.is_empty() {
        (Published::default(), Vec::new())
    } else {
        Published::kept(kept, &record)
    };
    let invocation = invocation(context);
    let report = PrefixCheck {
        root: prefix.root(),
        record: &record,
        gpus: &gpus,
        published: &published,
        invocation: &invocation,
    }
    .run(notes);
    render(context, &report)
}

/// What a fix command repeats of this command line: the prefix, the
/// configuration and repositories, and the GPUs, when given.
pub fn invocation(context: &Context) -> Invocation {
    let mut args = context.repeated.clone();
    args.extend(target_args(context));
    Invocation {
        global: args,
        ..Invocation::default()
    }
}

/// `--target T,...` when GPU targets were given (flag or `KPACK_GET_TARGETS`).
pub fn target_args(context: &Context) -> Vec<String> {
    let given = context.targets.given();
    if given.is_empty() {
        return Vec::new();
    }
    vec!["--target".to_owned(), given.join(",")]
}

/// Prints `report` (as text, or as JSON with --json); fails with exit 9
/// when a GPU is not served.
pub fn render(context: &Context, report: &CheckReport) -> Result<(), Failure> {
    let printer = &context.printer;
    printer.report(report);
    printer.line(header(report));
    if report.gpus.is_empty() {
        printer.line("no GPU found: nothing to serve (--target names GPUs to check for)");
    }
    for gpu in &report.gpus {
        let verdict = if gpu.served { "served" } else { "not served" };
        printer.line(format!("{}: {verdict}", gpu.target));
        for finding in report.findings.iter().filter(|f| f.gpu == gpu.target) {
            let path = match &finding.path {
                Some(path) => format!("{path}: "),
                None => String::new(),
            };
            printer.line(format!(
                "  {} {}: {path}{}: {}",
                finding.package, finding.version, finding.reason, finding.detail
            ));
        }
    }
    for note in &report.notes {
        printer.note(note);
    }
    match &report.fix {
        Some(fix) => printer.line(format!("fix: {}", fix.command)),
        None if !report.served => {
            printer.line("fix: no kpack-get command fixes this (see the findings above)")
        }
        None => {}
    }
    if report.served {
        return Ok(());
    }
    Err(Failure::new(
        Exit::NotServed,
        anyhow::anyhow!(
            "the installed device code does not serve {}",
            join_targets(&report.unserved())
        ),
    ))
}

/// `checked PLACE: N packages, N split binaries, N fat binaries`.
fn header(report: &CheckReport) -> String {
    let checked = &report.checked;
    let count =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let (place, what) = match &checked.place {
        Place::Prefix { path } => (
            path.display().to_string(),
            count(checked.packages, "package", "packages"),
        ),
        Place::Python { python, .. } => (
            format!("the environment of {}", python.display()),
            count(
                checked.packages,
                "distribution with device extras",
                "distributions with device extras",
            ),
        ),
    };
    format!(
        "checked {place}: {what}, {}, {}",
        count(checked.split_binaries, "split binary", "split binaries"),
        count(checked.fat_binaries, "fat binary", "fat binaries")
    )
}

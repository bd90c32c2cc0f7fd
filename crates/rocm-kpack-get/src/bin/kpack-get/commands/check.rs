//! `check`: whether what the prefix holds serves every GPU.

use rocm_kpack_get::check::{Invocation, KeptIndex, PrefixCheck, Published};
use rocm_kpack_get::install::record::InstalledRecord;

use super::{Context, Failure};

pub fn check(context: &Context) -> Result<(), Failure> {
    // Judged by the names the runtime reports, which choose the code it
    // loads; A0 silicon reported by B0's name is warned of.
    let chosen = context.gpus()?;
    let gpus = chosen.reported();
    let warnings = chosen.detection.strict_warnings();
    let prefix = context.prefix(false)?;
    let installed = prefix.root().join(".kpack").is_dir();
    // Read-only, like `list`: no lock, nothing written.
    if installed {
        context.read_state(&prefix)?;
    }
    let record = if installed {
        prefix.record()?
    } else {
        InstalledRecord::empty()
    };
    let kept = KeptIndex {
        repos: &context.settings.repos,
        store: &context.store,
        cache: &context.cache,
        trust: context.settings.trust,
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
    .run(notes)
    .with_warnings(warnings);
    context.printer.report(&report);
    report.render_text(&context.printer);
    Failure::unless_served(&report)
}

/// What a fix command repeats of this command line: the prefix, the
/// configuration and repositories, and the GPUs, when given.
fn invocation(context: &Context) -> Invocation {
    let mut args = context.repeated.clone();
    args.extend(context.target_args());
    Invocation {
        global: args,
        ..Invocation::default()
    }
}

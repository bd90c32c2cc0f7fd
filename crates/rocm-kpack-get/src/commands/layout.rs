//! What `detect` and `install --dry-run` say about the HIP runtime found
//! and the layout that follows from it.

use rocm_kpack_get::detect::hip_runtime::{RuntimeSearch, Searcher};
use rocm_kpack_get::layout::{decide, Layout, LayoutChoice, LayoutDecision};
use serde_json::json;

use super::Context;

/// The runtime a library installed now into the prefix, with no run path
/// of its own, would load: `LD_LIBRARY_PATH`, `$ROCM_PATH/lib`,
/// `/opt/rocm/lib`, the loader's cache, the default directories.
///
/// Before an install nothing of the package is unpacked (a dry run reads
/// no host tree), so its libraries' own run paths are not known; the search
/// is the one they would make without any.
pub fn search_for_new_library(context: &Context) -> (RuntimeSearch, LayoutDecision) {
    let search = Searcher::new(&context.settings.runtime_search).for_new_library();
    let decision = decide(context.settings.layout, &[&search]);
    (search, decision)
}

/// Prints the runtime found and the layout (notes with -v unless
/// `notes_shown`), warns when a forced `kpack` layout will not load, and
/// returns both for `--json`.
pub fn show(
    context: &Context,
    search: &RuntimeSearch,
    decision: &LayoutDecision,
    notes_shown: bool,
) -> serde_json::Value {
    let printer = &context.printer;
    match &search.runtime {
        Some(runtime) => {
            let evidence: Vec<String> = runtime.evidence.iter().map(ToString::to_string).collect();
            let verdict = match (runtime.kpack_aware(), evidence.is_empty()) {
                (true, _) => format!("kpack-aware: {}", evidence.join(", ")),
                (false, true) => "not kpack-aware: nothing in it follows kpack markers".to_owned(),
                (false, false) => format!("not kpack-aware: {}", evidence.join(", ")),
            };
            printer.line(format!(
                "HIP runtime: {} (found in {}), {verdict}",
                runtime.path.display(),
                runtime.found_in
            ));
        }
        None => printer.line("HIP runtime: none found"),
    }
    for note in &search.notes {
        if notes_shown {
            printer.line(format!("  {note}"));
        } else {
            printer.detail(format!("hip runtime: {note}"));
        }
    }
    let source = match decision.choice {
        LayoutChoice::Auto => "auto",
        LayoutChoice::Kpack | LayoutChoice::Fat => "asked for",
    };
    printer.line(format!(
        "layout: {} ({source}{})",
        decision.layout,
        match decision.choice {
            LayoutChoice::Auto => format!(": {}", decision.reason),
            _ => String::new(),
        }
    ));
    let unaware = search.runtime.as_ref().is_some_and(|r| !r.kpack_aware());
    if decision.layout == Layout::Kpack && unaware {
        printer.warn(
            "the layout is kpack, but the HIP runtime found does not follow kpack markers: \
             kernels of installed libraries will fail to launch under it",
        );
    }
    json!({
        "hip_runtime": runtime_json(search),
        "layout": decision,
    })
}

fn runtime_json(search: &RuntimeSearch) -> serde_json::Value {
    match &search.runtime {
        Some(runtime) => json!({
            "path": runtime.path,
            "name": runtime.name,
            "found_in": runtime.found_in,
            "kpack_aware": runtime.kpack_aware(),
            "evidence": runtime.evidence,
            "notes": search.notes,
        }),
        None => json!({
            "path": null,
            "kpack_aware": false,
            "notes": search.notes,
        }),
    }
}

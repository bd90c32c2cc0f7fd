//! What `detect`, `install` and the `pip` commands say about the HIP
//! runtime found and the layout that follows from it.

use std::path::PathBuf;

use serde::Serialize;

use crate::layout::hip_runtime::{CompressedBundles, Evidence, FoundIn, RuntimeSearch};
use crate::layout::{Layout, LayoutChoice, LayoutDecision};
use crate::output::Output;

/// The runtime found and the layout, in a report.
#[derive(Debug, Clone, Serialize)]
pub struct RuntimeReport {
    pub hip_runtime: HipRuntimeReport,
    pub layout: LayoutDecision,
}

/// The HIP runtime found (all but `kpack_aware`, `notes` and a null
/// `path` left out when none was), and the search's notes.
#[derive(Debug, Clone, Serialize)]
pub struct HipRuntimeReport {
    /// What says it loads compressed bundles, when something does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compressed_bundles: Option<CompressedBundles>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Vec<Evidence>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found_in: Option<FoundIn>,
    pub kpack_aware: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub notes: Vec<String>,
    pub path: Option<PathBuf>,
}

impl From<&RuntimeSearch> for HipRuntimeReport {
    fn from(search: &RuntimeSearch) -> HipRuntimeReport {
        let runtime = search.runtime.as_ref();
        HipRuntimeReport {
            compressed_bundles: runtime.and_then(|r| r.compressed_bundles.clone()),
            evidence: runtime.map(|r| r.evidence.clone()),
            found_in: runtime.map(|r| r.found_in),
            kpack_aware: runtime.is_some_and(|r| r.kpack_aware()),
            name: runtime.map(|r| r.name.clone()),
            notes: search.notes.clone(),
            path: runtime.map(|r| r.path.clone()),
        }
    }
}

/// Says on `output` the runtime found and the layout (notes with -v unless
/// `notes_shown`), warns when a forced `kpack` layout will not load, and
/// returns both for a report.
pub fn show(
    output: &dyn Output,
    search: &RuntimeSearch,
    decision: &LayoutDecision,
    notes_shown: bool,
) -> RuntimeReport {
    match &search.runtime {
        Some(runtime) => {
            let evidence: Vec<String> = runtime.evidence.iter().map(ToString::to_string).collect();
            let verdict = match (runtime.kpack_aware(), evidence.is_empty()) {
                (true, _) => format!("kpack-aware: {}", evidence.join(", ")),
                (false, true) => "not kpack-aware: nothing in it follows kpack markers".to_owned(),
                (false, false) => format!("not kpack-aware: {}", evidence.join(", ")),
            };
            output.line(&format!(
                "HIP runtime: {} (found in {}), {verdict}",
                runtime.path.display(),
                runtime.found_in
            ));
            if let Some(evidence) = &runtime.compressed_bundles {
                output.line(&format!("  it loads compressed bundles: {evidence}"));
            }
        }
        None => output.line("HIP runtime: none found"),
    }
    for note in &search.notes {
        if notes_shown {
            output.line(&format!("  {note}"));
        } else {
            output.detail(&format!("hip runtime: {note}"));
        }
    }
    let source = match decision.choice {
        LayoutChoice::Auto => "auto",
        LayoutChoice::Kpack | LayoutChoice::Fat => "asked for",
    };
    output.line(&format!(
        "layout: {} ({source}{})",
        decision.layout,
        match decision.choice {
            LayoutChoice::Auto => format!(": {}", decision.reason),
            _ => String::new(),
        }
    ));
    let unaware = search.runtime.as_ref().is_some_and(|r| !r.kpack_aware());
    if decision.layout == Layout::Kpack && unaware {
        output.warn(
            "the layout is kpack, but the HIP runtime found does not follow kpack markers: \
             kernels of installed libraries will fail to launch under it",
        );
    }
    RuntimeReport {
        hip_runtime: HipRuntimeReport::from(search),
        layout: decision.clone(),
    }
}

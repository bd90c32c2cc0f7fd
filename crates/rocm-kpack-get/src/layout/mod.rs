//! What a prefix holds for device code: split binaries with `.kpack/`
//! archives, or binaries made fat again for the installed GPUs
//! (08-hip-runtimes.md), and how `auto` chooses between them.

pub mod hip_runtime;
pub mod runtime_report;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use kpack_binary::materialize::BundleEncoding;

use hip_runtime::{CompressedBundles, RuntimeSearch, SearchRoots, Searcher};

/// The layout asked for (`--layout`, `layout =` in the configuration).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LayoutChoice {
    /// Decided from the HIP runtime the installed libraries would load.
    #[default]
    Auto,
    Kpack,
    Fat,
}

/// What is written into the prefix.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// Host-only binaries and `.kpack/` archives: kpack-aware runtimes only.
    /// Records written before layouts existed hold this one.
    #[default]
    Kpack,
    /// Binaries made fat again with the installed targets' code objects
    /// in plain bundles: every HIP runtime.
    Fat,
    /// As `Fat`, the bundles compressed (CCOB, as clang's
    /// `--offload-compress` writes them): HIP runtimes from ROCm 6.2 on.
    #[serde(rename = "fat-compressed")]
    FatCompressed,
}

impl Layout {
    /// Whether split binaries are made fat.
    pub fn is_fat(self) -> bool {
        matches!(self, Layout::Fat | Layout::FatCompressed)
    }

    /// How a fat binary's bundles are written.
    pub(crate) fn bundle_encoding(self) -> BundleEncoding {
        match self {
            Layout::FatCompressed => BundleEncoding::Compressed,
            Layout::Kpack | Layout::Fat => BundleEncoding::Plain,
        }
    }
}

/// The layout, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayoutDecision {
    pub choice: LayoutChoice,
    pub layout: Layout,
    /// For people: `the HIP runtime found follows kpack markers`.
    pub reason: String,
}

/// The layout for a library installed now into a prefix, and the runtime
/// search that decides it: the one such a library, with no run path of its
/// own, would make (`LD_LIBRARY_PATH`, `$ROCM_PATH/lib`, `/opt/rocm/lib`,
/// the loader's cache, the default directories). Before an install nothing
/// of the package is unpacked, so its own run paths are not known.
pub fn decide_for_new_library(
    choice: LayoutChoice,
    roots: &SearchRoots,
) -> (RuntimeSearch, LayoutDecision) {
    let search = Searcher::new(roots).for_new_library();
    let decision = decide(choice, &[&search]);
    (search, decision)
}

/// The layout for `choice`, given the runtimes the installed libraries
/// would load (one search per library, or one for a library not yet
/// installed). `auto` is `kpack` only when every search found a
/// kpack-aware runtime; when in doubt, `fat`, which every runtime loads.
pub fn decide(choice: LayoutChoice, searches: &[&RuntimeSearch]) -> LayoutDecision {
    let (layout, reason) = match choice {
        LayoutChoice::Kpack => (Layout::Kpack, "asked for".to_owned()),
        LayoutChoice::Fat => fat(searches, "asked for".to_owned()),
        LayoutChoice::Auto => auto(searches),
    };
    LayoutDecision {
        choice,
        layout,
        reason,
    }
}

fn auto(searches: &[&RuntimeSearch]) -> (Layout, String) {
    let runtimes: Vec<_> = searches.iter().map(|s| s.runtime.as_ref()).collect();
    if runtimes.is_empty() || runtimes.iter().all(Option::is_none) {
        return (
            Layout::Fat,
            "no HIP runtime found; fat binaries load on any".to_owned(),
        );
    }
    if runtimes.iter().any(Option::is_none) {
        return (
            Layout::Fat,
            "not every library finds a HIP runtime".to_owned(),
        );
    }
    if runtimes.iter().flatten().all(|r| r.kpack_aware()) {
        (
            Layout::Kpack,
            "the HIP runtime found follows kpack markers".to_owned(),
        )
    } else {
        fat(
            searches,
            "the HIP runtime found does not follow kpack markers".to_owned(),
        )
    }
}

/// The fat layout for `reason`: its bundles compressed when every search
/// found a runtime that loads compressed bundles, else plain.
fn fat(searches: &[&RuntimeSearch], reason: String) -> (Layout, String) {
    let evidence: Option<Vec<&CompressedBundles>> = searches
        .iter()
        .map(|s| s.runtime.as_ref()?.compressed_bundles.as_ref())
        .collect();
    match evidence.as_deref() {
        Some([first, ..]) => (
            Layout::FatCompressed,
            format!("{reason}; it loads compressed bundles ({first})"),
        ),
        _ => (Layout::Fat, reason),
    }
}

impl fmt::Display for LayoutChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LayoutChoice::Auto => "auto",
            LayoutChoice::Kpack => "kpack",
            LayoutChoice::Fat => "fat",
        })
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::Kpack => "kpack",
            Layout::Fat => "fat",
            Layout::FatCompressed => "fat-compressed",
        })
    }
}

/// A layout name that is none of `auto`, `kpack`, `fat`.
#[derive(Debug, thiserror::Error)]
#[error("unknown layout {0:?}: expected auto, kpack or fat")]
pub struct UnknownLayout(pub String);

impl FromStr for LayoutChoice {
    type Err = UnknownLayout;

    fn from_str(text: &str) -> Result<LayoutChoice, UnknownLayout> {
        match text {
            "auto" => Ok(LayoutChoice::Auto),
            "kpack" => Ok(LayoutChoice::Kpack),
            "fat" => Ok(LayoutChoice::Fat),
            _ => Err(UnknownLayout(text.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hip_runtime::{Evidence, FoundIn, HipRuntime};

    fn found(evidence: Vec<Evidence>) -> RuntimeSearch {
        RuntimeSearch {
            runtime: Some(HipRuntime {
                path: "/lib/libamdhip64.so.7".into(),
                name: "libamdhip64.so.7".into(),
                found_in: FoundIn::DefaultDirectory,
                evidence,
                compressed_bundles: None,
            }),
            notes: Vec::new(),
        }
    }

    fn loading_compressed(mut search: RuntimeSearch) -> RuntimeSearch {
        if let Some(runtime) = &mut search.runtime {
            runtime.compressed_bundles = Some(CompressedBundles::Soname {
                soname: "libamdhip64.so.7".into(),
            });
        }
        search
    }

    #[test]
    fn fat_bundles_are_compressed_only_when_every_runtime_found_loads_them() {
        let plain = found(vec![]);
        let compressed = loading_compressed(found(vec![]));
        let none = RuntimeSearch {
            runtime: None,
            notes: Vec::new(),
        };
        let auto = |searches: &[&RuntimeSearch]| decide(LayoutChoice::Auto, searches);
        assert_eq!(auto(&[&compressed]).layout, Layout::FatCompressed);
        assert!(
            auto(&[&compressed])
                .reason
                .ends_with("it loads compressed bundles (its soname is libamdhip64.so.7)"),
            "{}",
            auto(&[&compressed]).reason
        );
        assert_eq!(auto(&[&compressed, &plain]).layout, Layout::Fat);
        assert_eq!(auto(&[&compressed, &none]).layout, Layout::Fat);
        assert_eq!(
            decide(LayoutChoice::Fat, &[&compressed]).layout,
            Layout::FatCompressed
        );
        assert_eq!(decide(LayoutChoice::Fat, &[]).layout, Layout::Fat);
        let aware = loading_compressed(found(vec![Evidence::ImportsLoadCodeObject]));
        assert_eq!(auto(&[&aware]).layout, Layout::Kpack);
        assert_eq!(
            Layout::FatCompressed.bundle_encoding(),
            BundleEncoding::Compressed
        );
        assert_eq!(Layout::Fat.bundle_encoding(), BundleEncoding::Plain);
    }

    #[test]
    fn auto_is_kpack_only_when_every_runtime_found_is_kpack_aware() {
        let aware = found(vec![Evidence::ImportsLoadCodeObject]);
        let unaware = found(vec![]);
        let none = RuntimeSearch::default();
        let layout = |searches: &[&RuntimeSearch]| decide(LayoutChoice::Auto, searches).layout;
        assert_eq!(layout(&[&aware]), Layout::Kpack);
        assert_eq!(layout(&[&aware, &aware]), Layout::Kpack);
        assert_eq!(layout(&[&unaware]), Layout::Fat);
        assert_eq!(layout(&[&aware, &unaware]), Layout::Fat);
        assert_eq!(layout(&[&aware, &none]), Layout::Fat);
        assert_eq!(layout(&[&none]), Layout::Fat);
        assert_eq!(layout(&[]), Layout::Fat);
    }

    #[test]
    fn an_explicit_layout_is_kept_whatever_the_runtime() {
        let unaware = found(vec![Evidence::KpackDisabled]);
        assert_eq!(
            decide(LayoutChoice::Kpack, &[&unaware]).layout,
            Layout::Kpack
        );
        let aware = found(vec![Evidence::HoldsSearchPathsKey]);
        assert_eq!(decide(LayoutChoice::Fat, &[&aware]).layout, Layout::Fat);
        assert_eq!("fat".parse::<LayoutChoice>().unwrap(), LayoutChoice::Fat);
        assert!("thin".parse::<LayoutChoice>().is_err());
    }
}

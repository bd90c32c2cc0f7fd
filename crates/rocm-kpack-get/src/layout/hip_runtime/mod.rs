//! Which HIP runtime (`libamdhip64.so*`) installed libraries would load,
//! and whether it follows kpack markers (08-hip-runtimes.md).
//!
//! Split binaries run only under a kpack-aware runtime; every other one
//! refuses their `HIPK` wrappers. [`search`] finds the runtime the dynamic
//! loader would give a library (or a library not yet installed);
//! [`classify`] reads the evidence that it is kpack-aware. The layout that
//! follows is decided in [`crate::layout`].

mod compressed;
pub mod elf;
pub mod ld_cache;
pub mod search;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use compressed::CompressedBundles;
pub use search::{RuntimeSearch, SearchRoots, Searcher};

/// What every HIP runtime's file name starts with (`libamdhip64.so.5`).
pub(crate) const RUNTIME_PREFIX: &str = "libamdhip64.so";
/// What kpack's loader library's file name starts with.
const KPACK_LIBRARY_PREFIX: &str = "librocm_kpack.so";
/// The function CLR's kpack path imports from the loader library.
const LOAD_CODE_OBJECT: &str = "kpack_load_code_object";
/// The marker key only kpack's loader reads: a runtime that links the
/// loader statically holds it.
const SEARCH_PATHS_KEY: &[u8] = b"kpack_search_paths";
/// What a CLR built without kpack says when it meets a split binary.
const KPACK_DISABLED: &[u8] = b"ROCM_KPACK_ENABLED=OFF";

/// Why a library or runtime cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HipRuntimeError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a 64-bit ELF file that can be read")]
    Elf {
        path: PathBuf,
        #[source]
        source: object::read::Error,
    },
    #[error("{path} is not built for x86-64")]
    NotX86_64 { path: PathBuf },
    #[error("{path}: its dynamic string table ({size} bytes) is larger than any library's")]
    DynamicStringsTooLarge { path: PathBuf, size: u64 },
}

/// What a runtime holds that says whether it follows kpack markers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Evidence {
    /// It names kpack's loader library in `DT_NEEDED`.
    NeedsKpackLibrary { name: String },
    /// It imports `kpack_load_code_object`.
    ImportsLoadCodeObject,
    /// Its read-only data holds the loader's marker key
    /// `kpack_search_paths` (the loader linked statically).
    HoldsSearchPathsKey,
    /// Its read-only data holds `ROCM_KPACK_ENABLED=OFF`: CLR built
    /// without kpack, which fails at the first launch of a split binary.
    KpackDisabled,
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Evidence::NeedsKpackLibrary { name } => write!(f, "needs {name}"),
            Evidence::ImportsLoadCodeObject => write!(f, "imports {LOAD_CODE_OBJECT}"),
            Evidence::HoldsSearchPathsKey => write!(f, "holds \"kpack_search_paths\""),
            Evidence::KpackDisabled => write!(f, "holds \"ROCM_KPACK_ENABLED=OFF\""),
        }
    }
}

/// Where in the search a runtime was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FoundIn {
    /// The library's `DT_RPATH` (it has no `DT_RUNPATH`).
    Rpath,
    LdLibraryPath,
    /// The library's `DT_RUNPATH`.
    Runpath,
    /// `$ROCM_PATH/lib`.
    RocmPath,
    /// `/opt/rocm/lib`.
    RocmDefault,
    /// The dynamic loader's cache.
    LdCache,
    /// One of the loader's default directories.
    DefaultDirectory,
}

impl fmt::Display for FoundIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FoundIn::Rpath => "DT_RPATH",
            FoundIn::LdLibraryPath => "LD_LIBRARY_PATH",
            FoundIn::Runpath => "DT_RUNPATH",
            FoundIn::RocmPath => "$ROCM_PATH/lib",
            FoundIn::RocmDefault => "the default ROCm directory",
            FoundIn::LdCache => "the loader's cache",
            FoundIn::DefaultDirectory => "a default library directory",
        })
    }
}

/// A HIP runtime found, and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HipRuntime {
    /// The file, as the search reached it (symbolic links not resolved).
    pub path: PathBuf,
    /// The name looked for (`libamdhip64.so.5`).
    pub name: String,
    pub found_in: FoundIn,
    /// Everything found for or against kpack support.
    pub evidence: Vec<Evidence>,
    /// What says it loads compressed bundles (CCOB); `None` when nothing
    /// does, and materialized bundles are written plain.
    pub compressed_bundles: Option<CompressedBundles>,
}

impl HipRuntime {
    /// Follows kpack markers: some evidence for it, and it is not a CLR
    /// built without kpack, whatever else it holds.
    pub fn kpack_aware(&self) -> bool {
        !self.evidence.contains(&Evidence::KpackDisabled)
            && self
                .evidence
                .iter()
                .any(|e| !matches!(e, Evidence::KpackDisabled))
    }
}

/// What a runtime's file says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// For and against kpack support.
    pub evidence: Vec<Evidence>,
    /// For compressed bundles.
    pub compressed_bundles: Option<CompressedBundles>,
}

/// What the runtime at `path` says about kpack support and compressed
/// bundles.
pub fn classify(path: &Path) -> Result<Classified, HipRuntimeError> {
    let info = elf::read_dynamic(path)?;
    let mut evidence: Vec<Evidence> = info
        .needed
        .iter()
        .filter(|name| name.starts_with(KPACK_LIBRARY_PREFIX))
        .map(|name| Evidence::NeedsKpackLibrary { name: name.clone() })
        .collect();
    if info.imports.iter().any(|name| name == LOAD_CODE_OBJECT) {
        evidence.push(Evidence::ImportsLoadCodeObject);
    }
    let held = elf::ranges_hold(path, &info.read_only, &[SEARCH_PATHS_KEY, KPACK_DISABLED])?;
    if held.first() == Some(&true) {
        evidence.push(Evidence::HoldsSearchPathsKey);
    }
    if held.get(1) == Some(&true) {
        evidence.push(Evidence::KpackDisabled);
    }
    Ok(Classified {
        evidence,
        compressed_bundles: compressed::compressed_bundles(path, &info)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime(evidence: Vec<Evidence>) -> HipRuntime {
        HipRuntime {
            path: PathBuf::from("/lib/libamdhip64.so.5"),
            name: "libamdhip64.so.5".into(),
            found_in: FoundIn::LdCache,
            evidence,
            compressed_bundles: None,
        }
    }

    #[test]
    fn kpack_disabled_outweighs_every_other_evidence() {
        assert!(runtime(vec![Evidence::ImportsLoadCodeObject]).kpack_aware());
        assert!(runtime(vec![Evidence::HoldsSearchPathsKey]).kpack_aware());
        assert!(!runtime(vec![]).kpack_aware());
        assert!(!runtime(vec![Evidence::KpackDisabled]).kpack_aware());
        assert!(!runtime(vec![
            Evidence::NeedsKpackLibrary {
                name: "librocm_kpack.so.0".into()
            },
            Evidence::ImportsLoadCodeObject,
            Evidence::HoldsSearchPathsKey,
            Evidence::KpackDisabled,
        ])
        .kpack_aware());
    }
}

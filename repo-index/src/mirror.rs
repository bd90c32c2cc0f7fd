//! Mirroring: the signed root and every shard copied verbatim (so the
//! mirror verifies with the upstream key), and only the artifacts chosen
//! packages need for chosen GPU targets.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use rocm_kpack::Target;

use crate::families::Families;
use crate::fetch::{FetchError, Source};
use crate::schema::{RootIndex, SchemaError, Shard};
use crate::types::PackageName;

/// Why a mirror cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MirrorError {
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("no package {0} upstream")]
    UnknownPackage(PackageName),
}

/// Whether device code listed as `listed` is for the mirror target
/// `target`. A target without features (`gfx90a`) stands for its whole
/// processor, every feature variant included; one with features, or a
/// generic target, takes what a GPU of that target would.
fn wants(families: &Families, listed: &str, target: &Target) -> bool {
    if target.features().is_empty() {
        if let Ok(listed_target) = Target::parse(listed) {
            if listed_target.processor() == target.processor() {
                return true;
            }
        }
        if families.covers(listed, target) {
            return true;
        }
    }
    target
        .selection_order()
        .iter()
        .any(|candidate| families.covers(listed, candidate))
}

/// What a mirror run copied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorReport {
    pub shards: usize,
    pub artifacts: Vec<String>,
    pub bytes: u64,
}

/// Mirrors the repository directory `upstream` into `dest`: metadata
/// verbatim; artifacts of `packages` (all when empty), host artifacts
/// always and device artifacts only for `targets` (all when empty).
pub fn mirror(
    upstream: &Source,
    dest: &Path,
    targets: &[Target],
    packages: &[PackageName],
) -> Result<MirrorReport, MirrorError> {
    let read = |relative: &str| upstream.read(relative);
    let copy = |relative: &str, bytes: &[u8]| {
        kpack_fs::write_atomic(&dest.join(relative), bytes).map_err(|e| MirrorError::Io {
            path: e.path,
            source: e.source,
        })
    };
    let root_bytes = read("index.toml")?;
    let signature = read("index.toml.minisig")?;
    let root = RootIndex::parse("index.toml", &String::from_utf8_lossy(&root_bytes))?;
    for name in packages {
        if !root.packages.contains_key(name) {
            return Err(MirrorError::UnknownPackage(name.clone()));
        }
    }
    let families = Families::builtin().with_overrides(&root.families);
    let mut report = MirrorReport::default();
    for (name, entry) in &root.packages {
        let shard_path = entry.shard_path(name);
        let shard_bytes = read(shard_path.as_str())?;
        copy(shard_path.as_str(), &shard_bytes)?;
        report.shards += 1;
        if !packages.is_empty() && !packages.contains(name) {
            continue;
        }
        let shard = Shard::parse(shard_path.as_str(), &String::from_utf8_lossy(&shard_bytes))?;
        for version in &shard.versions {
            let wanted: BTreeSet<&str> = version
                .artifacts
                .iter()
                .filter(|a| {
                    targets.is_empty()
                        || !a.is_device()
                        || a.targets.iter().flatten().any(|listed| {
                            targets
                                .iter()
                                .any(|target| wants(&families, listed, target))
                        })
                })
                .map(|a| a.path.as_str())
                .collect();
            for artifact in version
                .artifacts
                .iter()
                .filter(|a| wanted.contains(a.path.as_str()))
            {
                let bytes = read(artifact.path.as_str())?;
                copy(artifact.path.as_str(), &bytes)?;
                report.artifacts.push(artifact.path.to_string());
                report.bytes += bytes.len() as u64;
            }
        }
    }
    // The signed root last, signature first, as a publish does.
    copy("index.toml.minisig", &signature)?;
    copy("index.toml", &root_bytes)?;
    Ok(report)
}

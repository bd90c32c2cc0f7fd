//! Making a mirror: a copy of a repository that clients then read as one
//! of its [`Mirror`](kpack_repo_index::fetch::Mirror)s. The signed root and every
//! shard are copied verbatim (so the mirror verifies with the upstream
//! key), and only the artifacts chosen packages need for chosen GPU
//! targets.

use kpack_gpu::Target;

use crate::source::{FetchError, Source};
use crate::store::{Body, CacheControl, Created, Store, StoreError};
use crate::verify::{verified_root, verified_shard, ArtifactCheck, VerifyError};
use kpack_repo_index::families::Families;
use kpack_repo_index::limits::Cap;
use kpack_repo_index::schema::{Artifact, RootIndex, SchemaError};
use kpack_repo_index::types::{
    HashingReader, Listed, PackageName, RelativePath, Sha256, Timestamp,
};
use kpack_sign::PublicKey;

/// Why a mirror cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MirrorError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{location}: holds other bytes than upstream's; published files never change")]
    Immutable { location: String },
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error(transparent)]
    Verify(#[from] VerifyError),
    #[error("no package {0} upstream")]
    UnknownPackage(PackageName),
}

/// Whether device code listed as `listed` is for the mirror target
/// `target`. A target without features (`gfx90a`) stands for its whole
/// processor, every feature variant included; one with features, or a
/// generic target, takes what a GPU of that target would.
fn wants(families: &Families, listed: &Listed, target: &Target) -> bool {
    if target.features().is_empty() {
        if let Listed::Target(listed) = listed {
            if listed.processor() == target.processor() {
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

/// Mirrors the repository `upstream` into `dest`: metadata verbatim;
/// artifacts of `packages` (all when empty), host artifacts always and
/// device artifacts only for `targets` (all when empty).
///
/// Nothing is trusted before it is checked: the root's signature with the
/// upstream's `key` (and its expiry at `now`) before it is parsed, every
/// shard against the hash the root pins, every artifact against the hash
/// and size its shard pins, each before it is written. A file that fails
/// stops the mirror before the root is written, so the mirror's published
/// state never names it.
pub fn mirror(
    upstream: &Source,
    key: &PublicKey,
    now: Timestamp,
    dest: &Store,
    scope: &Scope,
) -> Result<MirrorReport, MirrorError> {
    let (root, root_bytes) = verified_root(upstream, key, now, None)?;
    for name in &scope.packages {
        if !root.packages.contains_key(name) {
            return Err(MirrorError::UnknownPackage(name.clone()));
        }
    }
    let families = Families::builtin().with_overrides(&root.families);
    let mut report = MirrorReport::default();
    for (name, entry) in &root.packages {
        let (shard_path, shard, shard_bytes) = verified_shard(upstream, name, entry)?;
        // Named by its hash: what is there already is these bytes.
        dest.create(
            shard_path.as_str(),
            Body::Bytes(&shard_bytes),
            CacheControl::Immutable,
        )?;
        report.shards += 1;
        if !scope.packages.is_empty() && !scope.packages.contains(name) {
            continue;
        }
        for version in &shard.versions {
            for artifact in version
                .artifacts
                .iter()
                .filter(|a| scope.wants_artifact(&families, a))
            {
                if !holds(dest, artifact)? {
                    copy_artifact(upstream, dest, &shard_path, artifact)?;
                }
                report.artifacts.push(artifact.path.to_string());
                report.bytes += artifact.size;
            }
        }
    }
    // The signed root last, as a publish writes it: its immutable copy,
    // then the root, then its signature.
    let copy = RootIndex::versioned_key(root.repo.version);
    dest.create(
        &copy,
        Body::Bytes(&root_bytes.bytes),
        CacheControl::Immutable,
    )?;
    let signature_copy = format!("{copy}.minisig");
    dest.put(
        &signature_copy,
        &root_bytes.signature,
        CacheControl::Immutable,
    )?;
    dest.put("index.toml", &root_bytes.bytes, CacheControl::NoCache)?;
    dest.put(
        "index.toml.minisig",
        &root_bytes.signature,
        CacheControl::NoCache,
    )?;
    Ok(report)
}

/// Copies `artifact` from `upstream` to `dest` through a file on disk
/// (an artifact may be gigabytes), checked against its shard before it is
/// written.
fn copy_artifact(
    upstream: &Source,
    dest: &Store,
    shard_path: &RelativePath,
    artifact: &Artifact,
) -> Result<(), MirrorError> {
    let key = artifact.path.as_str();
    let spool = tempfile::NamedTempFile::new()?;
    let mut writer = ArtifactCheck::new(artifact, std::io::BufWriter::new(spool.as_file()))?;
    // Read to the pinned size and a byte more at most: an endless answer
    // fills neither memory nor the spool's disk.
    if !upstream.copy_to(key, &mut writer, Cap::Pinned(artifact.size))? {
        return Err(FetchError::NotFound {
            location: upstream.location(key),
        }
        .into());
    }
    let buffered = writer.finish(shard_path)?;
    buffered.into_inner().map_err(|e| e.into_error())?;
    let created = dest.create(key, Body::File(spool.path()), CacheControl::Immutable)?;
    if created == Created::Exists && !holds(dest, artifact)? {
        return Err(MirrorError::Immutable {
            location: dest.location(key),
        });
    }
    Ok(())
}

/// Whether `dest` already holds exactly the bytes `artifact` pins.
fn holds(dest: &Store, artifact: &Artifact) -> Result<bool, MirrorError> {
    let Some(reader) = dest.reader(artifact.path.as_str())? else {
        return Ok(false);
    };
    let mut reader = HashingReader::new(reader);
    std::io::copy(&mut reader, &mut std::io::sink())?;
    let (sha256, size): (Sha256, u64) = reader.finish();
    Ok(sha256 == artifact.sha256 && size == artifact.size)
}

/// What a mirror carries: some packages (all when empty), device code for
/// some GPU targets (all when empty).
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub packages: Vec<PackageName>,
    pub targets: Vec<Target>,
}

impl Scope {
    /// Host artifacts always; device artifacts of every component for a
    /// selected target (a GPU there takes one of each), and those a
    /// sub-family or family owns that a selected target belongs to.
    fn wants_artifact(&self, families: &Families, artifact: &Artifact) -> bool {
        if let Some(owner) = &artifact.owner {
            return self.targets.is_empty() || self.targets.iter().any(|t| owner.contains(t));
        }
        self.targets.is_empty()
            || !artifact.is_device()
            || artifact.targets.iter().flatten().any(|listed| {
                self.targets
                    .iter()
                    .any(|target| wants(families, listed, target))
            })
    }
}

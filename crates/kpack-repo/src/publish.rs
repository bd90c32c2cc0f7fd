//! Writing a repository, to a directory or an S3-compatible bucket,
//! through one protocol that needs no lock and no rename (see
//! `docs/publishing.md`): artifacts and shards are written create-only,
//! then the new root's immutable copy `roots/<version>.toml` (and its
//! signature) claims the version, then `index.toml` is swapped in only if it
//! is still the root the change was made to, then its signature is written.
//! A publisher that loses the swap re-reads the root, applies its change
//! again and retries, so concurrent publishers never lose an update.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use fs_err as fs;
use tempfile::NamedTempFile;

use crate::encode::TransportPolicy;
use crate::store::{Body, CacheControl, Created, Etag, S3Options, Store, StoreError};
use kpack_repo_index::address::Address;
use kpack_repo_index::schema::{
    Artifact, ArtifactKind, BuiltFrom, PackageEntry, Pin, RepoInfo, RootIndex, SchemaError, Shard,
    SourceKind, VersionEntry, FORMAT,
};
use kpack_repo_index::sign::{sign_root, SignError};
use kpack_repo_index::types::{
    Component, Dependency, Encoding, HashingReader, Listed, PackageName, RelativePath, Sha256,
    Timestamp,
};
use kpack_sign::SecretKey;
use rocm_kpack::format::{ARCHIVE_EXTENSION, KPACK_DIR};

/// How long a published root stays valid unless told otherwise.
pub const DEFAULT_VALIDITY_DAYS: i64 = 30;

/// How many times a publisher re-reads the root and retries after losing
/// the swap to another publisher before giving up.
const MAX_ATTEMPTS: usize = 64;

/// Why a repository cannot be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// A file-system call failed; the error names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Write(#[from] kpack_fs::PathError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{location}: no index to regenerate")]
    NoIndex { location: String },
    #[error("{location}: already published with different bytes; published files never change")]
    Immutable { location: String },
    #[error("{}: {problem}", path.display())]
    Artifact {
        path: PathBuf,
        #[source]
        problem: BadArtifact,
    },
    /// A `.kpack` artifact that cannot be read; the error names the path.
    #[error(transparent)]
    Archive(#[from] rocm_kpack::Error),
    #[error("{name} {version} is already published")]
    VersionExists {
        name: PackageName,
        version: semver::Version,
    },
    #[error("{location}: gave up after {attempts} publishes by others came in between")]
    Contended { location: String, attempts: usize },
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error(transparent)]
    Sign(#[from] SignError),
}

/// How a repository is opened for publishing.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    pub s3: S3Options,
    /// Probe that the store refuses a second create-only write before
    /// writing anything; off only for a store with a single publisher.
    pub check_conditional_writes: bool,
    /// When archives are published transport-encoded.
    pub transport: TransportPolicy,
}

impl Default for PublishOptions {
    fn default() -> Self {
        PublishOptions {
            s3: S3Options::default(),
            check_conditional_writes: true,
            transport: TransportPolicy::default(),
        }
    }
}

/// A repository open for publishing.
#[derive(Debug)]
pub struct Publisher {
    store: Store,
    transport: TransportPolicy,
}

/// The root as read, and the version of `index.toml` it was read from.
struct Current {
    root: Option<RootIndex>,
    etag: Option<Etag>,
}

/// A version to add: which, what it depends on in the repository and on
/// the system, and the package's summary (kept from before when `None`).
#[derive(Debug, Clone)]
pub struct NewVersion {
    pub name: PackageName,
    pub version: semver::Version,
    pub depends: Vec<Dependency>,
    pub system_requires: Vec<String>,
    pub summary: Option<String>,
    /// The fat packages it was built from, where known.
    pub built_from: Vec<BuiltFrom>,
}

impl NewVersion {
    /// `version` of `name`, with no dependencies and no summary.
    pub fn new(name: &PackageName, version: &semver::Version) -> NewVersion {
        NewVersion {
            name: name.clone(),
            version: version.clone(),
            depends: Vec::new(),
            system_requires: Vec::new(),
            summary: None,
            built_from: Vec::new(),
        }
    }
}

/// The fat package at `path` a version is built from, under its
/// distribution's name `package` where it has one: its file name and size.
pub fn built_from(path: &Path, package: Option<String>) -> std::io::Result<BuiltFrom> {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(BuiltFrom {
        kind: SourceKind::of_file(&file),
        size: fs::metadata(path)?.len(),
        file,
        package,
    })
}

/// A version whose artifacts are in the pool, ready to publish.
#[derive(Debug, Clone)]
pub struct Staged {
    pub new: NewVersion,
    artifacts: Vec<Artifact>,
}

impl Staged {
    /// Bytes of its artifacts.
    pub fn bytes(&self) -> u64 {
        self.artifacts.iter().map(|a| a.size).sum()
    }
}

/// What is wrong with an artifact given to publish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BadArtifact {
    #[error("no usable file name")]
    NoFileName,
    #[error(transparent)]
    Path(#[from] kpack_repo_index::types::InvalidValue),
    #[error("an artifact is a .kpack archive or a .tar.zst tree")]
    Kind,
    #[error("a tree is device code for targets or for an owner, not both")]
    TargetsAndOwner,
    #[error("a component names device code: give the tree its targets")]
    ComponentWithoutDevice,
    #[error("not a zstd-compressed tree: {0}")]
    NotATree(#[source] std::io::Error),
}

/// An artifact to add: a file, the targets it serves if it is device code
/// that does not say so itself, and the component of device code it is.
#[derive(Debug, Clone)]
pub struct NewArtifact {
    pub file: PathBuf,
    /// For trees: the targets of a device tree. Ignored for `.kpack` files,
    /// whose targets are read from their table of contents.
    pub targets: Option<Vec<Listed>>,
    /// For trees: the sub-family or family whose GPUs all need it, in place
    /// of targets.
    pub owner: Option<kpack_gpu::Owner>,
    /// The component of device code it is (a kernel database payload:
    /// `tensile`); none for the default, `kernels`, the component of a fat
    /// library's `.kpack` archives. Only device code has one.
    pub component: Option<Component>,
    /// For a tree: the length of its tar stream, when whoever wrote it
    /// counted it; otherwise the file is decoded to count it. Ignored for
    /// `.kpack` files, whose table of contents gives it.
    pub unpacked_size: Option<u64>,
}

impl Publisher {
    /// Opens (creating if needed) the repository directory `root`.
    pub fn open(root: &Path) -> Result<Publisher, PublishError> {
        Publisher::open_at(&Address::Dir(root.to_owned()), &PublishOptions::default())
    }

    /// Opens the repository at `location`; for a bucket, first checks that
    /// it honours conditional writes (unless `options` say not to).
    pub fn open_at(
        location: &Address,
        options: &PublishOptions,
    ) -> Result<Publisher, PublishError> {
        let store = Store::open(location, &options.s3)?;
        if options.check_conditional_writes {
            store.check_conditional_writes()?;
        }
        Ok(Publisher {
            store,
            transport: options.transport,
        })
    }

    /// The store, for readers of what was published.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The name a new repository gets: its directory's name (or its bucket
    /// prefix's last segment) when that is a valid name, else `kpack`.
    fn default_name(&self) -> PackageName {
        self.store
            .leaf_name()
            .and_then(|n| n.to_lowercase().parse().ok())
            .unwrap_or_else(PackageName::unnamed_repository)
    }

    fn current(&self) -> Result<Current, PublishError> {
        Ok(match self.store.read("index.toml")? {
            Some(read) => {
                let text = String::from_utf8_lossy(&read.bytes);
                Current {
                    root: Some(RootIndex::parse("index.toml", &text)?),
                    etag: Some(read.etag),
                }
            }
            None => Current {
                root: None,
                etag: None,
            },
        })
    }

    /// The current root index, if the repository has one.
    pub fn root_index(&self) -> Result<Option<RootIndex>, PublishError> {
        Ok(self.current()?.root)
    }

    /// The shard of `name` in `root`, if any.
    pub fn shard(
        &self,
        root: &RootIndex,
        name: &PackageName,
    ) -> Result<Option<Shard>, PublishError> {
        let Some(entry) = root.packages.get(name) else {
            return Ok(None);
        };
        let shard_path = entry.shard_path(name);
        let read = self
            .store
            .read(shard_path.as_str())?
            .ok_or_else(|| StoreError::Io(missing(&self.store.location(shard_path.as_str()))))?;
        let text = String::from_utf8_lossy(&read.bytes);
        Ok(Some(Shard::parse(shard_path.as_str(), &text)?))
    }

    /// Writes `file` into the pool at `relative`, create-only; a file
    /// already there must have the same bytes.
    fn put(&self, relative: &RelativePath, file: &Path) -> Result<(Sha256, u64), PublishError> {
        // Hashed first, then streamed up: an artifact may be gigabytes.
        let (digest, size) = Sha256::of_file(file)?;
        match self
            .store
            .create(relative.as_str(), Body::File(file), CacheControl::Immutable)?
        {
            Created::Created => Ok((digest, size)),
            Created::Exists if self.hash_of(relative.as_str())? == Some(digest) => {
                Ok((digest, size))
            }
            Created::Exists => Err(PublishError::Immutable {
                location: self.store.location(relative.as_str()),
            }),
        }
    }

    /// The sha256 of what is at `key`, streamed; `None` when absent.
    fn hash_of(&self, key: &str) -> Result<Option<Sha256>, PublishError> {
        let Some(reader) = self.store.reader(key)? else {
            return Ok(None);
        };
        let mut reader = HashingReader::new(reader);
        std::io::copy(&mut reader, &mut std::io::sink())?;
        Ok(Some(reader.finish().0))
    }

    /// Adds `new` with `artifacts` and publishes a new root signed with
    /// `key` (unsigned when `None`).
    pub fn add(
        &self,
        new: &NewVersion,
        artifacts: &[NewArtifact],
        key: Option<&SecretKey>,
    ) -> Result<RootIndex, PublishError> {
        let current = self.current()?;
        if let Some(root) = &current.root {
            self.refuse_published(root, &new.name, &new.version)?;
        }
        let staged = self.stage(new, artifacts)?;
        self.commit_staged(Some(current), std::slice::from_ref(&staged), key)
    }

    /// Writes `new`'s artifacts into the pool without publishing it: the
    /// first half of [`Publisher::add`], for publishers that add several
    /// versions in one root update ([`Publisher::add_staged`]).
    pub fn stage(
        &self,
        new: &NewVersion,
        artifacts: &[NewArtifact],
    ) -> Result<Staged, PublishError> {
        // In one order for every publisher, so that of two racing with
        // different bytes the loser stops at its first file.
        let mut order: Vec<usize> = (0..artifacts.len()).collect();
        order.sort_by_key(|&i| artifacts[i].file.file_name());
        let mut entries = vec![None; artifacts.len()];
        for i in order {
            entries[i] = Some(self.add_artifact(&new.name, &new.version, &artifacts[i])?);
        }
        Ok(Staged {
            new: new.clone(),
            artifacts: entries.into_iter().flatten().collect(),
        })
    }

    /// Publishes every staged version in one new root signed with `key`;
    /// none is published if any already is.
    pub fn add_staged(
        &self,
        staged: &[Staged],
        key: Option<&SecretKey>,
    ) -> Result<RootIndex, PublishError> {
        self.commit_staged(None, staged, key)
    }

    fn commit_staged(
        &self,
        first: Option<Current>,
        staged: &[Staged],
        key: Option<&SecretKey>,
    ) -> Result<RootIndex, PublishError> {
        self.commit(first, key, |root| {
            let mut by_name: BTreeMap<&PackageName, Vec<&Staged>> = BTreeMap::new();
            for one in staged {
                self.refuse_published(root, &one.new.name, &one.new.version)?;
                by_name.entry(&one.new.name).or_default().push(one);
            }
            for (name, versions) in by_name {
                let mut shard = self.shard(root, name)?.unwrap_or_else(|| Shard {
                    name: name.clone(),
                    versions: Vec::new(),
                });
                let mut summary = root.packages.get(name).map(|p| p.summary.clone());
                for one in versions {
                    let new = &one.new;
                    if shard.versions.iter().any(|v| v.version == new.version) {
                        return Err(PublishError::VersionExists {
                            name: name.clone(),
                            version: new.version.clone(),
                        });
                    }
                    shard.versions.push(VersionEntry {
                        version: new.version.clone(),
                        depends: new.depends.clone(),
                        system_requires: new.system_requires.clone(),
                        requires_client: required_client(&one.artifacts),
                        artifacts: one.artifacts.clone(),
                        built_from: new.built_from.clone(),
                    });
                    summary = new.summary.clone().or(summary);
                }
                shard.versions.sort_by(|a, b| a.version.cmp(&b.version));
                self.publish_shard(root, shard, summary.unwrap_or_default())?;
            }
            Ok(())
        })
    }

    fn refuse_published(
        &self,
        root: &RootIndex,
        name: &PackageName,
        version: &semver::Version,
    ) -> Result<(), PublishError> {
        let published = self
            .shard(root, name)?
            .is_some_and(|shard| shard.versions.iter().any(|v| &v.version == version));
        if published {
            return Err(PublishError::VersionExists {
                name: name.clone(),
                version: version.clone(),
            });
        }
        Ok(())
    }
    fn add_artifact(
        &self,
        name: &PackageName,
        version: &semver::Version,
        artifact: &NewArtifact,
    ) -> Result<Artifact, PublishError> {
        let file_name = artifact
            .file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| PublishError::Artifact {
                path: artifact.file.clone(),
                problem: BadArtifact::NoFileName,
            })?;
        let bad = |problem| PublishError::Artifact {
            path: artifact.file.clone(),
            problem,
        };
        let relative: RelativePath = format!("pool/{name}/{version}/{file_name}")
            .parse()
            .map_err(|e: kpack_repo_index::types::InvalidValue| bad(e.into()))?;
        let mut decoded_size = None;
        let mut opened = None;
        let (kind, install_as, targets) =
            if Path::new(file_name).extension() == Some(OsStr::new(ARCHIVE_EXTENSION)) {
                let archive = rocm_kpack::Archive::open(&artifact.file)?;
                decoded_size = Some(archive.decoded_size());
                let targets = archive
                    .architectures()
                    .iter()
                    .cloned()
                    .map(Listed::Target)
                    .collect();
                let install_as: RelativePath = format!("{KPACK_DIR}/{file_name}")
                    .parse()
                    .map_err(|e: kpack_repo_index::types::InvalidValue| bad(e.into()))?;
                opened = Some(archive);
                (ArtifactKind::Kpack, Some(install_as), Some(targets))
            } else if file_name.ends_with(".tar.zst") {
                (ArtifactKind::Tree, None, artifact.targets.clone())
            } else {
                return Err(bad(BadArtifact::Kind));
            };
        let owner = match kind {
            ArtifactKind::Tree => artifact.owner.clone(),
            ArtifactKind::Kpack => None,
        };
        if owner.is_some() && targets.as_ref().is_some_and(|t| !t.is_empty()) {
            return Err(bad(BadArtifact::TargetsAndOwner));
        }
        let device = owner.is_some() || targets.as_ref().is_some_and(|t| !t.is_empty());
        if artifact.component.is_some() && !device {
            return Err(bad(BadArtifact::ComponentWithoutDevice));
        }
        let unpacked_size = match (kind, artifact.unpacked_size) {
            (ArtifactKind::Kpack, _) => decoded_size,
            (ArtifactKind::Tree, Some(counted)) => Some(counted),
            (ArtifactKind::Tree, None) => Some(tree_unpacked_size(&artifact.file)?),
        };
        let mut published = Artifact {
            kind,
            // The default is left unsaid, so the index reads as before.
            component: artifact.component.clone().filter(|c| !c.is_default()),
            path: relative,
            install_as,
            targets,
            owner,
            sha256: Sha256::of(b""),
            size: 0,
            encoding: None,
            decoded_sha256: None,
            decoded_size: None,
            unpacked_size,
        };
        let encoded = match &opened {
            Some(archive) => self.encoded(archive)?,
            None => None,
        };
        let (sha256, size) = match encoded {
            Some((encoded, decoded)) => {
                let served: RelativePath = format!("{}.zst", published.path)
                    .parse()
                    .map_err(|e: kpack_repo_index::types::InvalidValue| bad(e.into()))?;
                published.path = served;
                published.encoding = Some(Encoding::Zstd);
                published.decoded_sha256 = Some(decoded.sha256);
                published.decoded_size = Some(decoded.size);
                self.put(&published.path, encoded.path())?
            }
            None => self.put(&published.path, &artifact.file)?,
        };
        published.sha256 = sha256;
        published.size = size;
        Ok(published)
    }

    /// `archive` for transport, when the policy finds that worth it: its
    /// code objects stored as they are (what is installed, pinned here),
    /// compressed whole.
    fn encoded(
        &self,
        archive: &rocm_kpack::Archive,
    ) -> Result<Option<(NamedTempFile, Pin)>, PublishError> {
        if !self.transport.enabled {
            return Ok(None);
        }
        let plain = NamedTempFile::new()?;
        let out = std::io::BufWriter::new(plain.as_file());
        rocm_kpack::recode(archive, rocm_kpack::Compression::None, out)?
            .into_inner()
            .map_err(|e| e.into_error())?;
        let (sha256, size) = Sha256::of_file(plain.path())?;
        let encoded = crate::encode::encode(plain.path(), size, crate::encode::workers())?;
        let encoded_size = encoded.as_file().metadata()?.len();
        Ok(self
            .transport
            .worth(archive.file_size(), encoded_size)
            .then_some((encoded, Pin { sha256, size })))
    }

    /// Writes a shard (content-addressed, so create-only and never over
    /// another) and points `root` at it.
    pub(crate) fn publish_shard(
        &self,
        root: &mut RootIndex,
        shard: Shard,
        summary: String,
    ) -> Result<(), PublishError> {
        let text = shard.to_toml()?;
        let sha256 = Sha256::of(text.as_bytes());
        let path: RelativePath = Shard::path_for(&shard.name, text.as_bytes())
            .parse()
            .map_err(
                |e: kpack_repo_index::types::InvalidValue| PublishError::Artifact {
                    path: PathBuf::from("packages"),
                    problem: e.into(),
                },
            )?;
        // Named by its hash: whatever is already there is these bytes.
        self.store.create(
            path.as_str(),
            Body::Bytes(text.as_bytes()),
            CacheControl::Immutable,
        )?;
        let mut built_from: Vec<String> = shard
            .versions
            .iter()
            .flat_map(|v| v.built_from.iter().filter_map(|b| b.package.clone()))
            .collect();
        built_from.sort();
        built_from.dedup();
        let latest = shard
            .versions
            .iter()
            .map(|v| v.version.clone())
            .max()
            .unwrap_or_else(|| semver::Version::new(0, 0, 0));
        root.packages.insert(
            shard.name.clone(),
            PackageEntry {
                // Written at its usual place, so the root need not say.
                shard: (path != RelativePath::usual_shard(&shard.name, &sha256)).then_some(path),
                sha256,
                size: Some(text.len() as u64),
                latest,
                summary,
                built_from,
            },
        );
        Ok(())
    }

    /// Checks every published artifact against its shard and publishes a
    /// new root (a new version, fresh dates, signed): for operators who
    /// sync pools by other means. Published versions are immutable: bytes
    /// that changed at a published path are refused, naming the path.
    pub fn reindex(&self, key: Option<&SecretKey>) -> Result<RootIndex, PublishError> {
        let current = self.current()?;
        if current.root.is_none() {
            return Err(PublishError::NoIndex {
                location: self.store.location("index.toml"),
            });
        }
        self.commit(Some(current), key, |root| {
            for name in root.packages.keys() {
                let Some(shard) = self.shard(root, name)? else {
                    continue;
                };
                for artifact in shard.versions.iter().flat_map(|v| &v.artifacts) {
                    let key = artifact.path.as_str();
                    let (sha256, size) = self.hash_and_size(key)?;
                    if sha256 != artifact.sha256 || size != artifact.size {
                        return Err(PublishError::Immutable {
                            location: self.store.location(key),
                        });
                    }
                }
            }
            Ok(())
        })
    }

    fn hash_and_size(&self, key: &str) -> Result<(Sha256, u64), PublishError> {
        let reader = self
            .store
            .reader(key)?
            .ok_or_else(|| StoreError::Io(missing(&self.store.location(key))))?;
        let mut reader = HashingReader::new(reader);
        std::io::copy(&mut reader, &mut std::io::sink())?;
        Ok(reader.finish())
    }

    /// Publishes `root` as the repository's next version, whatever the
    /// current root holds (for tools that generate a whole index).
    pub fn publish_root(
        &self,
        root: RootIndex,
        key: Option<&SecretKey>,
    ) -> Result<RootIndex, PublishError> {
        self.commit(None, key, |current| {
            *current = root.clone();
            Ok(())
        })
    }

    /// Applies `change` to the current root and publishes the result, by
    /// the publishing protocol.
    pub(crate) fn commit_change(
        &self,
        key: Option<&SecretKey>,
        change: impl FnMut(&mut RootIndex) -> Result<(), PublishError>,
    ) -> Result<RootIndex, PublishError> {
        self.commit(None, key, change)
    }

    /// The publishing protocol: applies `change` to the current root (an
    /// empty one for a new repository) and publishes the result as a new
    /// version, retrying from a fresh read whenever another publisher got
    /// in first. `change` runs once per attempt and may write immutable
    /// files (shards); it must not depend on an earlier attempt.
    fn commit(
        &self,
        first: Option<Current>,
        key: Option<&SecretKey>,
        mut change: impl FnMut(&mut RootIndex) -> Result<(), PublishError>,
    ) -> Result<RootIndex, PublishError> {
        let mut read = first;
        for _ in 0..MAX_ATTEMPTS {
            let Current { root, etag } = match read.take() {
                Some(current) => current,
                None => self.current()?,
            };
            let mut root = root.unwrap_or_else(|| empty_root(self.default_name()));
            let previous = root.repo.version;
            change(&mut root)?;
            stamp(&mut root, previous + 1);
            let Some(signature) = self.claim(&mut root, key)? else {
                continue;
            };
            let text = root.to_toml()?;
            let claimed = RootIndex::versioned_key(root.repo.version);
            let swapped = self.store.swap(
                "index.toml",
                text.as_bytes(),
                etag.as_ref(),
                CacheControl::NoCache,
            )?;
            let Some(swapped) = swapped else {
                // Never named by index.toml, so no reader can want it.
                self.store.delete(&format!("{claimed}.minisig"))?;
                self.store.delete(&claimed)?;
                continue;
            };
            self.write_signature(signature.as_deref())?;
            if self.store.etag("index.toml")? != Some(swapped) {
                self.settle_signature()?;
            }
            return Ok(root);
        }
        Err(PublishError::Contended {
            location: self.store.location("index.toml"),
            attempts: MAX_ATTEMPTS,
        })
    }

    /// Writes the immutable copy of `root` (and its signature) at the first
    /// free `roots/<version>.toml` from its version on, setting the version
    /// to the one claimed: its signature (`Some(None)` unsigned), or `None`
    /// if others keep taking the versions.
    #[allow(clippy::option_option)]
    fn claim(
        &self,
        root: &mut RootIndex,
        key: Option<&SecretKey>,
    ) -> Result<Option<Option<String>>, PublishError> {
        // A publisher stopped after its claim leaves a version no root
        // names; versions need only increase, so step over it.
        for _ in 0..MAX_ATTEMPTS {
            let text = root.to_toml()?;
            let claimed = RootIndex::versioned_key(root.repo.version);
            let signature = key.map(|key| sign_root(key, text.as_bytes())).transpose()?;
            match self.store.create(
                &claimed,
                Body::Bytes(text.as_bytes()),
                CacheControl::Immutable,
            )? {
                Created::Created => {
                    if let Some(signature) = &signature {
                        let key = format!("{claimed}.minisig");
                        self.store
                            .put(&key, signature.as_bytes(), CacheControl::Immutable)?;
                    }
                    return Ok(Some(signature));
                }
                Created::Exists => root.repo.version += 1,
            }
        }
        Ok(None)
    }

    /// Writes `index.toml.minisig`, or removes it for an unsigned root.
    fn write_signature(&self, signature: Option<&str>) -> Result<(), PublishError> {
        match signature {
            Some(signature) => self.store.put(
                "index.toml.minisig",
                signature.as_bytes(),
                CacheControl::NoCache,
            )?,
            None => self.store.delete("index.toml.minisig")?,
        }
        Ok(())
    }

    /// Makes `index.toml.minisig` the signature of the current root (from
    /// its immutable copy), or removes it for an unsigned root: for when
    /// another root went in after this publisher's, whose signature may
    /// have been written after the newer one's.
    fn settle_signature(&self) -> Result<(), PublishError> {
        for _ in 0..MAX_ATTEMPTS {
            let Some(current) = self.store.read("index.toml")? else {
                return Ok(());
            };
            let Some(version) = RootIndex::peek_version(&current.bytes) else {
                return Ok(());
            };
            let copy = format!("{}.minisig", RootIndex::versioned_key(version));
            let signature = self.store.read(&copy)?.map(|read| read.bytes);
            let signature = signature.map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
            self.write_signature(signature.as_deref())?;
            if self.store.etag("index.toml")?.as_ref() == Some(&current.etag) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Signs the current root as it is (after an unsigned publish).
    pub fn sign(&self, key: &SecretKey) -> Result<(), PublishError> {
        let current = self
            .store
            .read("index.toml")?
            .ok_or_else(|| PublishError::NoIndex {
                location: self.store.location("index.toml"),
            })?;
        let text = String::from_utf8_lossy(&current.bytes);
        let root = RootIndex::parse("index.toml", &text)?;
        let signature = sign_root(key, &current.bytes)?;
        let claimed = RootIndex::versioned_key(root.repo.version);
        self.store.create(
            &claimed,
            Body::Bytes(&current.bytes),
            CacheControl::Immutable,
        )?;
        let copy = format!("{claimed}.minisig");
        self.store
            .put(&copy, signature.as_bytes(), CacheControl::NoCache)?;
        self.settle_signature()
    }
}

/// Sets a new root's version and its dates.
/// The oldest client a version with `artifacts` needs: one that knows
/// owners when one is owned, one that decodes when one is encoded.
fn required_client(artifacts: &[Artifact]) -> Option<semver::Version> {
    use kpack_repo_index::schema::{ENCODING_CLIENT, OWNER_CLIENT};
    let owned = artifacts.iter().any(|a| a.owner.is_some());
    let encoded = artifacts.iter().any(|a| a.encoding.is_some());
    [(owned, OWNER_CLIENT), (encoded, ENCODING_CLIENT)]
        .into_iter()
        .filter_map(|(needed, client)| needed.then_some(client))
        .max()
}

fn stamp(root: &mut RootIndex, version: u64) {
    let now = Timestamp::now();
    root.repo.version = version;
    root.repo.generated = Timestamp::from_second(now.as_second()).unwrap_or(now);
    root.repo.expires =
        Timestamp::from_second(now.as_second() + DEFAULT_VALIDITY_DAYS * 86_400).unwrap_or(now);
}

/// How far the tree `file` unpacks, decoded as it streams.
fn tree_unpacked_size(file: &Path) -> Result<u64, PublishError> {
    let reader = fs::File::open(file)?;
    crate::unpacked::unpacked_size(reader).map_err(|e| PublishError::Artifact {
        path: file.to_owned(),
        problem: BadArtifact::NotATree(e),
    })
}

/// The error for a file an index names that is not there.
fn missing(location: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{location}: named by the index but not found"),
    )
}

fn empty_root(name: PackageName) -> RootIndex {
    let now = Timestamp::now();
    RootIndex {
        format: FORMAT,
        repo: RepoInfo {
            // `publish_root` sets the version and dates.
            name,
            version: 0,
            generated: now,
            expires: now,
        },
        families: BTreeMap::new(),
        packages: BTreeMap::new(),
    }
}

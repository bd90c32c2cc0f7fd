//! Writing a repository: artifacts into the immutable pool, one shard per
//! package, then the signed root, atomically for readers (new immutable
//! files first, then signature and root renamed into place), with a lock
//! file so a second writer waits instead of interleaving.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fs_err as fs;

use crate::schema::{
    Artifact, ArtifactKind, PackageEntry, RepoInfo, RootIndex, SchemaError, Shard, VersionEntry,
    FORMAT,
};
use crate::sign::{sign_root, SecretKey, SignError};
use crate::types::{
    Component, Dependency, HashingReader, Listed, PackageName, RelativePath, Sha256, Timestamp,
};

/// How long a published root stays valid unless told otherwise.
pub const DEFAULT_VALIDITY_DAYS: i64 = 30;

/// Why a repository cannot be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublishError {
    /// A file-system call failed; the error names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Write(#[from] kpack_fs::PathError),
    #[error("{}: no index to regenerate", path.display())]
    NoIndex { path: PathBuf },
    #[error("{}: already published with different bytes; published files never change", path.display())]
    Immutable { path: PathBuf },
    #[error("{}: {message}", path.display())]
    Artifact { path: PathBuf, message: String },
    /// A `.kpack` artifact that cannot be read; the error names the path.
    #[error(transparent)]
    Archive(#[from] rocm_kpack::Error),
    #[error("{name} {version} is already published")]
    VersionExists {
        name: PackageName,
        version: semver::Version,
    },
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error(transparent)]
    Sign(#[from] SignError),
}

/// A repository directory, locked for writing while this value lives.
#[derive(Debug)]
pub struct Repo {
    root: PathBuf,
    _lock: fs::File,
}

/// An artifact to add: a file, the targets it serves if it is device code
/// that does not say so itself, and the component of device code it is.
#[derive(Debug, Clone)]
pub struct NewArtifact {
    pub file: PathBuf,
    /// For trees: the targets of a device tree. Ignored for `.kpack` files,
    /// whose targets are read from their table of contents.
    pub targets: Option<Vec<Listed>>,
    /// The component of device code it is (a kernel database payload:
    /// `tensile`); none for the default, `kernels`, the component of a fat
    /// library's `.kpack` archives. Only device code has one.
    pub component: Option<Component>,
}

impl Repo {
    /// Opens (creating if needed) the repository at `root` and takes its
    /// write lock, waiting for another writer to finish.
    pub fn open(root: &Path) -> Result<Repo, PublishError> {
        fs::create_dir_all(root)?;
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(root.join(".lock"))?;
        lock.lock()?;
        Ok(Repo {
            root: root.to_owned(),
            _lock: lock,
        })
    }

    /// The name a new repository gets: its directory's name when that is a
    /// valid name, else `kpack`.
    fn default_name(&self) -> PackageName {
        fs::canonicalize(&self.root)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_lowercase()))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(PackageName::fallback)
    }

    /// The current root index, if the repository has one.
    pub fn root_index(&self) -> Result<Option<RootIndex>, PublishError> {
        let path = self.root.join("index.toml");
        match fs::read_to_string(&path) {
            Ok(text) => Ok(Some(RootIndex::parse("index.toml", &text)?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The shard of `name` in the current root, if any.
    pub fn shard(
        &self,
        root: &RootIndex,
        name: &PackageName,
    ) -> Result<Option<Shard>, PublishError> {
        let Some(entry) = root.packages.get(name) else {
            return Ok(None);
        };
        let shard_path = entry.shard_path(name);
        let path = self.root.join(shard_path.as_str());
        let text = fs::read_to_string(&path)?;
        Ok(Some(Shard::parse(shard_path.as_str(), &text)?))
    }

    /// Copies `file` into the pool at `relative`; a file already there must
    /// have the same bytes.
    fn put(&self, relative: &RelativePath, file: &Path) -> Result<(Sha256, u64), PublishError> {
        let destination = self.root.join(relative.as_str());
        // Copied and hashed in one pass, block by block (an artifact may be
        // gigabytes); the copy appears only if nothing is published there.
        let mut copy = kpack_fs::AtomicFile::create(&destination)?;
        let mut reader = HashingReader::new(fs::File::open(file)?);
        std::io::copy(&mut reader, &mut copy)?;
        let (digest, size) = reader.finish();
        match Sha256::of_file(&destination) {
            Ok((existing, _)) if existing == digest => return Ok((digest, size)),
            Ok(_) => return Err(PublishError::Immutable { path: destination }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        copy.commit()?;
        Ok((digest, size))
    }

    /// Adds version `version` of `name` with `artifacts` and publishes a new
    /// root signed with `key` (unsigned when `None`).
    pub fn add(
        &self,
        name: &PackageName,
        version: &semver::Version,
        depends: Vec<Dependency>,
        artifacts: &[NewArtifact],
        summary: Option<String>,
        key: Option<&SecretKey>,
    ) -> Result<RootIndex, PublishError> {
        let mut root = match self.root_index()? {
            Some(root) => root,
            None => empty_root(self.default_name()),
        };
        let mut shard = self.shard(&root, name)?.unwrap_or_else(|| Shard {
            name: name.clone(),
            versions: Vec::new(),
        });
        if shard.versions.iter().any(|v| &v.version == version) {
            return Err(PublishError::VersionExists {
                name: name.clone(),
                version: version.clone(),
            });
        }
        let mut entries = Vec::new();
        for artifact in artifacts {
            entries.push(self.add_artifact(name, version, artifact)?);
        }
        shard.versions.push(VersionEntry {
            version: version.clone(),
            depends,
            artifacts: entries,
        });
        shard.versions.sort_by(|a, b| a.version.cmp(&b.version));
        let previous_summary = root.packages.get(name).map(|p| p.summary.clone());
        self.publish_shard(
            &mut root,
            shard,
            summary.or(previous_summary).unwrap_or_default(),
        )?;
        self.publish_root(root, key)
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
                message: "no usable file name".into(),
            })?;
        let bad = |message: String| PublishError::Artifact {
            path: artifact.file.clone(),
            message,
        };
        let relative: RelativePath = format!("pool/{name}/{version}/{file_name}")
            .parse()
            .map_err(|e: crate::types::InvalidValue| bad(e.to_string()))?;
        let (kind, install_as, targets) = if file_name.ends_with(".kpack") {
            let archive = rocm_kpack::Archive::open(&artifact.file)?;
            let targets = archive
                .architectures()
                .iter()
                .cloned()
                .map(Listed::Target)
                .collect();
            let install_as: RelativePath = format!(".kpack/{file_name}")
                .parse()
                .map_err(|e: crate::types::InvalidValue| bad(e.to_string()))?;
            (ArtifactKind::Kpack, Some(install_as), Some(targets))
        } else if file_name.ends_with(".tar.zst") {
            (ArtifactKind::Tree, None, artifact.targets.clone())
        } else {
            return Err(bad(
                "an artifact is a .kpack archive or a .tar.zst tree".into()
            ));
        };
        let device = targets.as_ref().is_some_and(|t| !t.is_empty());
        if artifact.component.is_some() && !device {
            return Err(bad(
                "a component names device code: give the tree its targets".into(),
            ));
        }
        let (sha256, size) = self.put(&relative, &artifact.file)?;
        Ok(Artifact {
            kind,
            // The default is left unsaid, so the index reads as before.
            component: artifact.component.clone().filter(|c| !c.is_default()),
            path: relative,
            install_as,
            targets,
            sha256,
            size,
        })
    }

    /// Writes a shard (content-addressed, so never over another) and points
    /// the root at it.
    fn publish_shard(
        &self,
        root: &mut RootIndex,
        shard: Shard,
        summary: String,
    ) -> Result<(), PublishError> {
        let text = shard.to_toml()?;
        let path: RelativePath = Shard::path_for(&shard.name, text.as_bytes())
            .parse()
            .map_err(|e: crate::types::InvalidValue| PublishError::Artifact {
                path: PathBuf::from("packages"),
                message: e.to_string(),
            })?;
        let destination = self.root.join(path.as_str());
        if !destination.exists() {
            kpack_fs::write_atomic(&destination, text.as_bytes())?;
        }
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
                shard: (path
                    != RelativePath::usual_shard(&shard.name, &Sha256::of(text.as_bytes())))
                .then_some(path),
                sha256: Sha256::of(text.as_bytes()),
                latest,
                summary,
            },
        );
        Ok(())
    }

    /// Checks every published artifact against its shard and publishes a
    /// new root (a new version, fresh dates, signed): for operators who
    /// sync pools by other means. Published versions are immutable: bytes
    /// that changed at a published path are refused, naming the path.
    pub fn reindex(&self, key: Option<&SecretKey>) -> Result<RootIndex, PublishError> {
        let Some(root) = self.root_index()? else {
            return Err(PublishError::NoIndex {
                path: self.root.join("index.toml"),
            });
        };
        for name in root.packages.keys() {
            let Some(shard) = self.shard(&root, name)? else {
                continue;
            };
            for artifact in shard.versions.iter().flat_map(|v| &v.artifacts) {
                let path = self.root.join(artifact.path.as_str());
                let (sha256, size) = Sha256::of_file(&path)?;
                if sha256 != artifact.sha256 || size != artifact.size {
                    return Err(PublishError::Immutable { path });
                }
            }
        }
        self.publish_root(root, key)
    }

    /// Bumps the version, refreshes the dates, signs, and renames the
    /// signature then the root into place.
    pub fn publish_root(
        &self,
        mut root: RootIndex,
        key: Option<&SecretKey>,
    ) -> Result<RootIndex, PublishError> {
        let now = Timestamp::now();
        root.repo.version += 1;
        root.repo.generated = Timestamp::from_second(now.as_second()).unwrap_or(now);
        root.repo.expires =
            Timestamp::from_second(now.as_second() + DEFAULT_VALIDITY_DAYS * 86_400).unwrap_or(now);
        let text = root.to_toml()?;
        let index = self.root.join("index.toml");
        let signature_path = self.root.join("index.toml.minisig");
        match key {
            Some(key) => {
                let signature = sign_root(key, text.as_bytes())?;
                kpack_fs::write_atomic(&signature_path, signature.as_bytes())?;
            }
            None => match fs::remove_file(&signature_path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            },
        }
        kpack_fs::write_atomic(&index, text.as_bytes())?;
        Ok(root)
    }

    /// Signs the current root as it is (after an unsigned publish).
    pub fn sign(&self, key: &SecretKey) -> Result<(), PublishError> {
        let index = self.root.join("index.toml");
        let bytes = fs::read(&index)?;
        let signature = sign_root(key, &bytes)?;
        kpack_fs::write_atomic(&self.root.join("index.toml.minisig"), signature.as_bytes())?;
        Ok(())
    }
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

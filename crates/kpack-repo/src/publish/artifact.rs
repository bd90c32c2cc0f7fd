//! Artifacts written into the pool: named by package and version,
//! described for the index (kind, targets or owner, component, unpacked
//! size), transport-encoded when that is worth it, written create-only and
//! pinned by hash.

use std::ffi::OsStr;
use std::path::Path;

use fs_err as fs;
use tempfile::NamedTempFile;

use super::{BadArtifact, NewArtifact, NewVersion, PublishError, Publisher, Staged};
use crate::store::{Body, CacheControl, Created};
use kpack_repo_index::schema::{Artifact, ArtifactKind, Pin};
use kpack_repo_index::types::{
    Encoding, HashingReader, InvalidPath, InvalidValue, Listed, PackageName, RelativePath, Sha256,
};
use rocm_kpack::format::{ARCHIVE_EXTENSION, KPACK_DIR};

impl Publisher {
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

    /// Writes `artifact` into the pool under `name` and `version` and
    /// describes it for the index.
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
            .map_err(|e: InvalidPath| bad(InvalidValue::from(e).into()))?;
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
                    .map_err(|e: InvalidPath| bad(InvalidValue::from(e).into()))?;
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
        self.put_artifact(&mut published, &artifact.file, opened.as_ref())?;
        Ok(published)
    }

    /// Writes `file` into the pool at `published`'s path and pins what was
    /// written: the archive `opened` transport-encoded (at that path with
    /// `.zst` added) when the policy finds that worth it, else the file as
    /// it is.
    fn put_artifact(
        &self,
        published: &mut Artifact,
        file: &Path,
        opened: Option<&rocm_kpack::Archive>,
    ) -> Result<(), PublishError> {
        let encoded = match opened {
            Some(archive) => self.encoded(archive)?,
            None => None,
        };
        let (sha256, size) = match encoded {
            Some((encoded, decoded)) => {
                let served: RelativePath =
                    format!("{}.zst", published.path)
                        .parse()
                        .map_err(|e: InvalidPath| PublishError::Artifact {
                            path: file.to_owned(),
                            problem: InvalidValue::from(e).into(),
                        })?;
                published.path = served;
                published.encoding = Some(Encoding::Zstd);
                published.decoded_sha256 = Some(decoded.sha256);
                published.decoded_size = Some(decoded.size);
                self.put(&published.path, encoded.path())?
            }
            None => self.put(&published.path, file)?,
        };
        published.sha256 = sha256;
        published.size = size;
        Ok(())
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
}

/// How far the tree `file` unpacks, decoded as it streams.
fn tree_unpacked_size(file: &Path) -> Result<u64, PublishError> {
    let reader = fs::File::open(file)?;
    crate::unpacked::unpacked_size(reader).map_err(|e| PublishError::Artifact {
        path: file.to_owned(),
        problem: BadArtifact::NotATree(e),
    })
}

//! Checking a repository as a client would: the root's signature and
//! expiry, then every shard and artifact against the hash and size the
//! level above pins.

use std::io::Write;
use std::path::Path;

use crate::source::{FetchError, Source};
use kpack_repo_index::freshness::{Freshness, Stale};
use kpack_repo_index::limits::Cap;

use kpack_repo_index::schema::{Artifact, PackageEntry, RootIndex, SchemaError, Shard};
use kpack_repo_index::sign::{read_signed_root, RootReadError, SignError, SignedRoot};
use kpack_repo_index::transport::{DecodeError, Decoder};
use kpack_repo_index::types::{HashingWriter, PackageName, RelativePath, Sha256, Timestamp};
use kpack_sign::PublicKey;

/// What is wrong with a repository.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error(transparent)]
    Sign(#[from] SignError),
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error("index.toml: expired at {expires} (now {now})")]
    Expired { expires: Timestamp, now: Timestamp },
    #[error("index.toml: version {found} is older than version {seen} already seen for {name}")]
    Rollback { name: String, found: u64, seen: u64 },
    #[error("{path}: sha256 {actual}, but {pinned_by} pins {expected}")]
    HashMismatch {
        path: String,
        pinned_by: String,
        expected: Sha256,
        actual: Sha256,
    },
    #[error("{path}: {actual} bytes, but {pinned_by} pins {expected}")]
    SizeMismatch {
        path: String,
        pinned_by: String,
        expected: u64,
        actual: u64,
    },
    /// A transport-encoded artifact that does not decode to what its
    /// shard pins.
    #[error("{path}: {source}")]
    Decode {
        path: String,
        #[source]
        source: DecodeError,
    },
    #[error("{path}: holds package {found}, but index.toml lists it for {expected}")]
    WrongShard {
        path: String,
        expected: String,
        found: String,
    },
}

/// What `verify_repository` checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub packages: usize,
    pub versions: usize,
    pub artifacts: usize,
    pub bytes: u64,
    /// Artifacts not present (allowed for a partial mirror).
    pub missing: usize,
}

/// Verifies the repository at `dir` with `key`: signature, expiry at `now`,
/// no rollback below `min_version` (the highest version a client has
/// seen), and every pinned hash and size.
pub fn verify_repository(
    dir: &Path,
    key: &PublicKey,
    now: Timestamp,
    min_version: Option<u64>,
) -> Result<(RootIndex, VerifyReport), VerifyError> {
    verify_repository_with(&Source::dir(dir), key, now, min_version, false)
}

/// As [`verify_repository`]; with `partial`, artifacts that are absent (a
/// mirror that carries some targets only) are counted, not errors.
pub fn verify_repository_with(
    source: &Source,
    key: &PublicKey,
    now: Timestamp,
    min_version: Option<u64>,
    partial: bool,
) -> Result<(RootIndex, VerifyReport), VerifyError> {
    let (root, _) = verified_root(source, key, now, min_version)?;
    let mut report = VerifyReport::default();
    for (name, entry) in &root.packages {
        let (shard_path, shard, _) = verified_shard(source, name, entry)?;
        report.packages += 1;
        for version in &shard.versions {
            report.versions += 1;
            for artifact in &version.artifacts {
                let mut checked = ArtifactCheck::new(artifact, std::io::sink())?;
                let cap = Cap::Pinned(artifact.size);
                if !source.copy_to(artifact.path.as_str(), &mut checked, cap)? {
                    if partial {
                        report.missing += 1;
                        continue;
                    }
                    return Err(FetchError::NotFound {
                        location: source.location(artifact.path.as_str()),
                    }
                    .into());
                }
                checked.finish(&shard_path)?;
                report.artifacts += 1;
                report.bytes += artifact.size;
            }
        }
    }
    Ok((root, report))
}

/// The root index of `source` (read within its cap), its signature checked
/// with `key` before it is parsed, then its expiry at `now` and its version against
/// `min_version`; with the signature's bytes.
pub(crate) fn verified_root(
    source: &Source,
    key: &PublicKey,
    now: Timestamp,
    min_version: Option<u64>,
) -> Result<(RootIndex, RootBytes), VerifyError> {
    let SignedRoot {
        root,
        bytes,
        signature,
    } = read_signed_root(key, |path| source.read(path)).map_err(|error| match error {
        RootReadError::Read(error) => VerifyError::Fetch(error),
        RootReadError::Sign(error) => VerifyError::Sign(error),
    })?;
    Freshness::strict(now, min_version)
        .check(&root)
        .map_err(|stale| match stale {
            Stale::Expired { expires, now } => VerifyError::Expired { expires, now },
            Stale::Rollback { found, seen } => VerifyError::Rollback {
                name: root.repo.name.to_string(),
                found,
                seen,
            },
        })?;
    Ok((
        root,
        RootBytes {
            bytes,
            signature: signature.into_bytes(),
        },
    ))
}

/// The exact bytes of a verified root and of its signature (what a mirror
/// copies).
#[derive(Debug, Clone)]
pub(crate) struct RootBytes {
    pub bytes: Vec<u8>,
    pub signature: Vec<u8>,
}

/// The shard of `name` from `source`, checked against the hash the root's
/// `entry` pins and the package it names; with its path and bytes.
pub(crate) fn verified_shard(
    source: &Source,
    name: &PackageName,
    entry: &PackageEntry,
) -> Result<(RelativePath, Shard, Vec<u8>), VerifyError> {
    let shard_path = entry.shard_path(name);
    let cap = source
        .limits()
        .pinned_or_unpinned(shard_path.as_str(), entry.size);
    let bytes = source.read_capped(shard_path.as_str(), cap)?;
    check(
        shard_path.as_str(),
        "index.toml",
        Sha256::of(&bytes),
        entry.sha256,
    )?;
    let shard = Shard::parse(shard_path.as_str(), &String::from_utf8_lossy(&bytes))?;
    if &shard.name != name {
        return Err(VerifyError::WrongShard {
            path: shard_path.to_string(),
            expected: name.to_string(),
            found: shard.name.to_string(),
        });
    }
    Ok((shard_path, shard, bytes))
}

/// A writer that checks an artifact's bytes as they stream into `out`:
/// their hash and size and, for a transport-encoded artifact, what they
/// decode to.
pub(crate) struct ArtifactCheck<'a, W> {
    artifact: &'a Artifact,
    served: HashingWriter<W>,
    decoder: Option<Decoder<std::io::Sink>>,
    /// Why the bytes stopped decoding, once they did.
    failed: Option<DecodeError>,
}

impl<'a, W: Write> ArtifactCheck<'a, W> {
    pub fn new(artifact: &'a Artifact, out: W) -> Result<ArtifactCheck<'a, W>, VerifyError> {
        let decoder = artifact
            .transport()
            .map(|transport| Decoder::new(&transport, std::io::sink()))
            .transpose()
            .map_err(|source| VerifyError::Decode {
                path: artifact.path.to_string(),
                source,
            })?;
        Ok(ArtifactCheck {
            artifact,
            served: HashingWriter::new(out),
            decoder,
            failed: None,
        })
    }

    /// Checks the bytes written against the shard at `shard_path`; returns
    /// the output.
    pub fn finish(self, shard_path: &RelativePath) -> Result<W, VerifyError> {
        let (sha256, size, out) = self.served.finish();
        check_artifact(shard_path, self.artifact, sha256, size)?;
        if let Some(source) = self.failed {
            return Err(VerifyError::Decode {
                path: self.artifact.path.to_string(),
                source,
            });
        }
        if let Some(decoder) = self.decoder {
            decoder.finish().map_err(|source| VerifyError::Decode {
                path: self.artifact.path.to_string(),
                source,
            })?;
        }
        Ok(out)
    }
}

impl<W: Write> Write for ArtifactCheck<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.served.write(buf)?;
        if let Some(decoder) = &mut self.decoder {
            // Decoding stops at its first failure; the rest is still
            // hashed, so that bytes other than those pinned are told as
            // such first.
            if let Err(error) = decoder.write_all(&buf[..n]) {
                self.failed = Some(decoder.error(error));
                self.decoder = None;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.served.flush()
    }
}

/// Checks an artifact's digest and size against what its shard pins.
fn check_artifact(
    shard_path: &RelativePath,
    artifact: &Artifact,
    sha256: Sha256,
    size: u64,
) -> Result<(), VerifyError> {
    let (path, pinned_by) = (artifact.path.as_str(), shard_path.as_str());
    if size != artifact.size {
        return Err(VerifyError::SizeMismatch {
            path: path.to_owned(),
            pinned_by: pinned_by.to_owned(),
            expected: artifact.size,
            actual: size,
        });
    }
    check(path, pinned_by, sha256, artifact.sha256)
}

fn check(path: &str, pinned_by: &str, actual: Sha256, expected: Sha256) -> Result<(), VerifyError> {
    if actual != expected {
        return Err(VerifyError::HashMismatch {
            path: path.to_owned(),
            pinned_by: pinned_by.to_owned(),
            expected,
            actual,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kpack_repo_index::schema::ArtifactKind;
    use kpack_repo_index::types::Encoding;

    /// An archive served zstd-encoded, pinned as `decoded` decodes.
    fn encoded(served: &[u8], decoded: &[u8]) -> Artifact {
        Artifact {
            kind: ArtifactKind::Kpack,
            component: None,
            path: "pool/x/1.0.0/x_gfx1100.kpack.zst".parse().unwrap(),
            install_as: Some(".kpack/x_gfx1100.kpack".parse().unwrap()),
            targets: None,
            owner: None,
            sha256: Sha256::of(served),
            size: served.len() as u64,
            encoding: Some(Encoding::Zstd),
            decoded_sha256: Some(Sha256::of(decoded)),
            decoded_size: Some(decoded.len() as u64),
            unpacked_size: None,
        }
    }

    fn check(artifact: &Artifact, served: &[u8]) -> Result<(), VerifyError> {
        let shard: RelativePath = "packages/x/1.toml".parse().unwrap();
        let mut checked = ArtifactCheck::new(artifact, std::io::sink())?;
        std::io::copy(&mut &served[..], &mut checked).unwrap();
        checked.finish(&shard).map(|_| ())
    }

    #[test]
    fn an_encoded_artifact_is_checked_as_served_and_as_decoded() {
        let archive = b"an archive, as installed".repeat(100);
        let served = zstd::encode_all(&archive[..], 3).unwrap();
        check(&encoded(&served, &archive), &served).unwrap();

        let other = zstd::encode_all(&b"other bytes"[..], 3).unwrap();
        let wrong_decoding = encoded(&other, &archive);
        let error = check(&wrong_decoding, &other).unwrap_err();
        assert!(
            matches!(
                error,
                VerifyError::Decode {
                    source: DecodeError::WrongSize { .. },
                    ..
                }
            ),
            "{error}"
        );
        let bomb = zstd::encode_all(&vec![0u8; 1 << 20][..], 3).unwrap();
        let error = check(&encoded(&bomb, &archive), &bomb).unwrap_err();
        assert_eq!(
            error.to_string(),
            "pool/x/1.0.0/x_gfx1100.kpack.zst: decodes to more than the 2400 bytes pinned"
        );
        let mut flipped = served.clone();
        flipped[served.len() / 2] ^= 1;
        let error = check(&encoded(&served, &archive), &flipped).unwrap_err();
        assert!(matches!(error, VerifyError::HashMismatch { .. }), "{error}");
    }
}

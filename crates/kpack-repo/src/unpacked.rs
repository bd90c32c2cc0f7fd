//! How far a tree artifact unpacks: the length of its decompressed tar
//! stream (`unpacked-size` in its shard), counted when it is published and
//! checked by `kpack-repo verify`, so that an installer can refuse a
//! decompression bomb before it fills the disk.

use std::io::{self, Read, Write};

use crate::source::{FetchError, Source};
use crate::verify::{verified_shard, VerifyError};
use kpack_hash::CountingWriter;
use kpack_repo_index::limits::Cap;
use kpack_repo_index::schema::{Artifact, ArtifactKind, RootIndex};
use kpack_repo_index::types::RelativePath;

/// The length of the decompressed stream of the zstd-compressed tree
/// `reader`, decoded as it streams (memory bounded by the decoder's window).
pub fn unpacked_size(reader: impl Read) -> io::Result<u64> {
    let mut decoder = zstd::stream::read::Decoder::new(reader)?;
    io::copy(&mut decoder, &mut io::sink())
}

/// A tree that does not unpack to the size its shard declares.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UnpackedError {
    #[error(
        "{path}: unpacks to more than {declared} bytes, the unpacked-size {pinned_by} declares"
    )]
    Exceeds {
        path: String,
        pinned_by: String,
        declared: u64,
    },
    #[error(
        "{path}: unpacks to {actual} bytes, but {pinned_by} declares unpacked-size {declared}"
    )]
    Mismatch {
        path: String,
        pinned_by: String,
        declared: u64,
        actual: u64,
    },
    #[error("{path}: not a zstd stream")]
    Decode {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

/// What [`verify_unpacked_sizes`] checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnpackedReport {
    /// Trees that declare their unpacked size and unpack to it.
    pub trees: usize,
    /// What they unpack to, in all.
    pub bytes: u64,
}

/// Decodes every tree of `root` (already verified, with its artifacts)
/// that declares its unpacked size and checks it unpacks to exactly that,
/// stopping as soon as one goes past it. Absent trees (a partial mirror)
/// are skipped; [`crate::verify`] has counted them.
pub fn verify_unpacked_sizes(
    source: &Source,
    root: &RootIndex,
) -> Result<UnpackedReport, UnpackedError> {
    let mut report = UnpackedReport::default();
    for (name, entry) in &root.packages {
        let (shard_path, shard, _) = verified_shard(source, name, entry)?;
        for artifact in shard.versions.iter().flat_map(|v| &v.artifacts) {
            let Some(declared) = artifact.unpacked_size else {
                continue;
            };
            if artifact.kind == ArtifactKind::Tree && check_tree(source, &shard_path, artifact)? {
                report.trees += 1;
                report.bytes += declared;
            }
        }
    }
    Ok(report)
}

/// Checks one tree against its declared unpacked size; `false` when it is
/// absent.
fn check_tree(
    source: &Source,
    shard_path: &RelativePath,
    artifact: &Artifact,
) -> Result<bool, UnpackedError> {
    let declared = artifact.unpacked_size.unwrap_or_default();
    let path = artifact.path.as_str();
    let decode = |source| UnpackedError::Decode {
        path: path.to_owned(),
        source,
    };
    let counter = CountingWriter::with_limit(io::sink(), declared);
    let mut decoder = zstd::stream::write::Decoder::new(counter).map_err(decode)?;
    let copied = source.copy_to(path, &mut decoder, Cap::Pinned(artifact.size));
    let flushed = match copied {
        Ok(true) => decoder.flush(),
        _ => Ok(()),
    };
    let actual = decoder.get_ref().count();
    if actual > declared {
        return Err(UnpackedError::Exceeds {
            path: path.to_owned(),
            pinned_by: shard_path.to_string(),
            declared,
        });
    }
    if !copied? {
        return Ok(false);
    }
    flushed.map_err(decode)?;
    if actual != declared {
        return Err(UnpackedError::Mismatch {
            path: path.to_owned(),
            pinned_by: shard_path.to_string(),
            declared,
            actual,
        });
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpacked_size_is_the_decompressed_length() {
        let compressed = zstd::encode_all(&vec![0u8; 1 << 20][..], 3).unwrap();
        assert_eq!(unpacked_size(&compressed[..]).unwrap(), 1 << 20);
        assert!(unpacked_size(&b"not zstd"[..]).is_err());
    }
}

//! A repository's signed root: it is signed with a trusted comment
//! carrying the repository's name, version and expiry, and verified before
//! it is parsed (verify the exact bytes, then read them). Keys, signing and
//! verifying themselves are `kpack-sign`'s.

use kpack_sign::{BadSignature, PublicKey, SecretKey, SigningError};

use crate::schema::{RootIndex, SchemaError};

/// Why a root cannot be signed or its signature does not hold.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignError {
    #[error(transparent)]
    BadSignature(#[from] BadSignature),
    #[error("{file}: bad signature: the index is not UTF-8")]
    NotUtf8 { file: String },
    #[error("{file}: the signature's trusted comment {found:?} does not describe this index ({expected:?})")]
    CommentMismatch {
        file: String,
        expected: String,
        found: String,
    },
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error(transparent)]
    Signing(#[from] SigningError),
}

/// The trusted comment a root's signature carries.
pub fn root_comment(root: &RootIndex) -> String {
    format!(
        "repo:{} version:{} expires:{}",
        root.repo.name, root.repo.version, root.repo.expires
    )
}

/// Signs the root index's exact bytes.
pub fn sign_root(key: &SecretKey, bytes: &[u8]) -> Result<String, SignError> {
    let root = RootIndex::parse("index.toml", &String::from_utf8_lossy(bytes))?;
    Ok(key.sign("index.toml", bytes, &root_comment(&root))?)
}

/// Verifies the root's signature over its exact bytes, then parses them and
/// checks the signed comment describes this very index (name, version,
/// expiry), so a signature cannot be moved to another root.
pub fn verify_root(
    key: &PublicKey,
    file: &str,
    bytes: &[u8],
    signature: &str,
) -> Result<RootIndex, SignError> {
    let comment = key.verify(file, bytes, signature)?;
    let text = std::str::from_utf8(bytes).map_err(|_| SignError::NotUtf8 {
        file: file.to_owned(),
    })?;
    let root = RootIndex::parse(file, text)?;
    let expected = root_comment(&root);
    if comment != expected {
        return Err(SignError::CommentMismatch {
            file: file.to_owned(),
            expected,
            found: comment,
        });
    }
    Ok(root)
}

/// A root index whose signature verified, with the exact bytes of both.
#[derive(Debug, Clone)]
pub struct SignedRoot {
    pub root: RootIndex,
    pub bytes: Vec<u8>,
    pub signature: String,
}

/// Why [`read_signed_root`] found no verified root: the reader's own error,
/// or the signature's.
#[derive(Debug)]
pub enum RootReadError<E> {
    Read(E),
    Sign(SignError),
}

/// Reads `index.toml` and its signature through `read` and verifies them
/// with `key`. A reader can catch the two out of step (a publish writes the
/// root, then its signature): they are read once more, and if they still
/// disagree the signature of the root's immutable copy (`roots/<version>`,
/// written before the root) is tried, so a publisher stopped between the
/// two writes leaves a root that verifies.
pub fn read_signed_root<E>(
    key: &PublicKey,
    mut read: impl FnMut(&str) -> Result<Vec<u8>, E>,
) -> Result<SignedRoot, RootReadError<E>> {
    let mut attempt = || -> Result<Result<SignedRoot, (Vec<u8>, SignError)>, E> {
        let bytes = read("index.toml")?;
        let signature = read("index.toml.minisig")?;
        let signature = String::from_utf8_lossy(&signature).into_owned();
        Ok(match verify_root(key, "index.toml", &bytes, &signature) {
            Ok(root) => Ok(SignedRoot {
                root,
                bytes,
                signature,
            }),
            Err(error) => Err((bytes, error)),
        })
    };
    if let Ok(signed) = attempt().map_err(RootReadError::Read)? {
        return Ok(signed);
    }
    let (bytes, error) = match attempt().map_err(RootReadError::Read)? {
        Ok(signed) => return Ok(signed),
        Err(failed) => failed,
    };
    if let Some(version) = RootIndex::peek_version(&bytes) {
        let key_path = format!("{}.minisig", RootIndex::versioned_key(version));
        if let Ok(signature) = read(&key_path) {
            let signature = String::from_utf8_lossy(&signature).into_owned();
            if let Ok(root) = verify_root(key, "index.toml", &bytes, &signature) {
                return Ok(SignedRoot {
                    root,
                    bytes,
                    signature,
                });
            }
        }
    }
    Err(RootReadError::Sign(error))
}

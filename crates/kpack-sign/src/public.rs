//! Public keys, and verifying signatures with them: a signature is checked
//! over the exact bytes it signs, and its trusted comment is returned for
//! the caller to compare with what the bytes say.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use fs_err as fs;
use minisign::{PublicKeyBox, SignatureBox};

/// A public key.
#[derive(Debug, Clone)]
pub struct PublicKey(pub(crate) minisign::PublicKey);

/// Why a public key cannot be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublicKeyError {
    /// The key file cannot be read; the error names it.
    #[error(transparent)]
    Read(#[from] std::io::Error),
    #[error("{}: {source}", path.display())]
    Malformed {
        path: PathBuf,
        #[source]
        source: minisign::PError,
    },
    #[error("{}: neither a key file nor a key: {source}", text.display())]
    NeitherFileNorKey {
        text: PathBuf,
        #[source]
        source: minisign::PError,
    },
}

/// A signature that does not verify.
#[derive(Debug, thiserror::Error)]
#[error("{file}: bad signature: {source}")]
pub struct BadSignature {
    /// What the signature is of, as messages name it.
    pub file: String,
    #[source]
    pub source: minisign::PError,
}

impl PublicKey {
    /// Loads a public key file (or takes the key itself: `RWQ...`).
    pub fn load(path_or_key: &str) -> Result<PublicKey, PublicKeyError> {
        let path = Path::new(path_or_key);
        if path.exists() {
            let text = fs::read_to_string(path)?;
            let malformed = |source| PublicKeyError::Malformed {
                path: path.to_owned(),
                source,
            };
            let boxed = PublicKeyBox::from_string(&text).map_err(malformed)?;
            return boxed.into_public_key().map(PublicKey).map_err(malformed);
        }
        minisign::PublicKey::from_base64(path_or_key.trim())
            .map(PublicKey)
            .map_err(|source| PublicKeyError::NeitherFileNorKey {
                text: path.to_owned(),
                source,
            })
    }

    /// The key itself (`RWQ...`, as `minisign -P` takes it): what client
    /// state is kept under, whatever file it was loaded from.
    pub fn to_base64(&self) -> String {
        self.0.to_base64()
    }

    /// Verifies a signature over `data`; returns its trusted comment.
    /// `file` names the data in an error.
    pub fn verify(&self, file: &str, data: &[u8], signature: &str) -> Result<String, BadSignature> {
        let bad = |source| BadSignature {
            file: file.to_owned(),
            source,
        };
        let signature = SignatureBox::from_string(signature).map_err(bad)?;
        minisign::verify(&self.0, &signature, Cursor::new(data), true, false, false)
            .map_err(bad)?;
        signature.trusted_comment().map_err(bad)
    }
}

//! minisign keys and signatures for repositories: the root index is signed
//! with a trusted comment carrying the repository's name, version and
//! expiry, and verified before it is parsed (verify the exact bytes, then
//! read them). Files interoperate with the stock `minisign` tool.

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use fs_err as fs;
use fs_err::os::unix::fs::OpenOptionsExt;
use minisign::{KeyPair, PublicKeyBox, SignatureBox};

use crate::schema::{RootIndex, SchemaError};

/// Why a key or a signature cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignError {
    #[error("{}: {message}", path.display())]
    Key { path: PathBuf, message: String },
    /// A file-system call failed; the error names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{file}: bad signature: {message}")]
    BadSignature { file: String, message: String },
    #[error("{file}: the signature's trusted comment {found:?} does not describe this index ({expected:?})")]
    CommentMismatch {
        file: String,
        expected: String,
        found: String,
    },
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error(transparent)]
    SecretKey(#[from] kpack_sign::KeyError),
}

/// A secret key, unlocked.
pub struct SecretKey(minisign::SecretKey);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey { .. }")
    }
}

/// A public key.
#[derive(Debug, Clone)]
pub struct PublicKey(minisign::PublicKey);

fn key_error(path: &Path, message: impl std::fmt::Display) -> SignError {
    SignError::Key {
        path: path.to_owned(),
        message: message.to_string(),
    }
}

/// Makes a key pair: the secret key encrypted with `password`, or stored
/// unencrypted when it is `None` (for CI). Existing files are not
/// overwritten.
pub fn keygen(
    secret: &Path,
    public: &Path,
    password: Option<String>,
) -> Result<PublicKey, SignError> {
    for path in [secret, public] {
        if path.exists() {
            return Err(key_error(path, "already exists; not overwriting a key"));
        }
    }
    let pair = match password {
        Some(password) => KeyPair::generate_encrypted_keypair(Some(password)),
        None => KeyPair::generate_unencrypted_keypair(),
    }
    .map_err(|e| key_error(secret, e))?;
    let secret_text = pair
        .sk
        .to_box(Some("kpack-repo secret key"))
        .map_err(|e| key_error(secret, e))?
        .to_string();
    let public_text = pair
        .pk
        .to_box()
        .map_err(|e| key_error(public, e))?
        .to_string();
    write_new(secret, &secret_text, 0o600)?;
    write_new(public, &public_text, 0o644)?;
    Ok(PublicKey(pair.pk))
}

fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), SignError> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    Ok(file.write_all(text.as_bytes())?)
}

impl SecretKey {
    /// Loads a secret key file; `password` unlocks an encrypted one.
    pub fn load(path: &Path, password: Option<String>) -> Result<SecretKey, SignError> {
        Ok(SecretKey(kpack_sign::load_secret_key(path, password)?))
    }

    /// Signs `data` (prehashed, as minisign does by default) with a trusted
    /// comment; returns the `.minisig` text.
    pub fn sign(&self, data: &[u8], trusted_comment: &str) -> Result<String, SignError> {
        minisign::sign(
            None,
            &self.0,
            Cursor::new(data),
            Some(trusted_comment),
            None,
        )
        .map(|signature| signature.into_string())
        .map_err(|e| SignError::BadSignature {
            file: "(signing)".into(),
            message: e.to_string(),
        })
    }
}

impl PublicKey {
    /// Loads a public key file (or takes the key itself: `RWQ...`).
    pub fn load(path_or_key: &str) -> Result<PublicKey, SignError> {
        let path = Path::new(path_or_key);
        if path.exists() {
            let text = fs::read_to_string(path)?;
            let boxed = PublicKeyBox::from_string(&text).map_err(|e| key_error(path, e))?;
            return boxed
                .into_public_key()
                .map(PublicKey)
                .map_err(|e| key_error(path, e));
        }
        minisign::PublicKey::from_base64(path_or_key.trim())
            .map(PublicKey)
            .map_err(|e| key_error(path, format!("neither a key file nor a key: {e}")))
    }

    /// The key itself (`RWQ...`, as `minisign -P` takes it): what client
    /// state is kept under, whatever file it was loaded from.
    pub fn to_base64(&self) -> String {
        self.0.to_base64()
    }

    /// Verifies a signature over `data`; returns its trusted comment.
    pub fn verify(&self, file: &str, data: &[u8], signature: &str) -> Result<String, SignError> {
        let bad = |message: String| SignError::BadSignature {
            file: file.to_owned(),
            message,
        };
        let signature = SignatureBox::from_string(signature).map_err(|e| bad(e.to_string()))?;
        minisign::verify(&self.0, &signature, Cursor::new(data), true, false, false)
            .map_err(|e| bad(e.to_string()))?;
        signature.trusted_comment().map_err(|e| bad(e.to_string()))
    }
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
    key.sign(bytes, &root_comment(&root))
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
    let text = std::str::from_utf8(bytes).map_err(|_| SignError::BadSignature {
        file: file.to_owned(),
        message: "the index is not UTF-8".into(),
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

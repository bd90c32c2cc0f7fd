//! Secret keys, loaded the way an operator's keys come: encrypted,
//! unencrypted by `kpack-repo keygen --unencrypted`, or unencrypted by the
//! stock tool (`minisign -G -W`, which leaves the key's checksum zero, so
//! the minisign crate calls it corrupted). Such a key is checked instead by
//! what it does: a signature made with its secret half must verify with
//! its public half, and a public key file beside it must be the same key.
//! A loaded key signs data or a file.

use std::io::{Cursor, Read};
use std::path::{Path, PathBuf};

use ct_codecs::{Base64, Decoder};
use fs_err as fs;
use minisign::{PublicKeyBox, SecretKeyBox};

/// Why a secret key file cannot be used.
#[derive(Debug)]
pub struct KeyError {
    pub path: PathBuf,
    pub problem: KeyProblem,
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.problem {
            // Its cause names the path.
            KeyProblem::Read(_) => write!(f, "{}", self.problem),
            problem => write!(f, "{}: {problem}", self.path.display()),
        }
    }
}

impl std::error::Error for KeyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.problem {
            KeyProblem::Read(source) => Some(source),
            _ => None,
        }
    }
}

/// What is wrong with a secret key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyProblem {
    #[error("cannot read the secret key")]
    Read(#[source] std::io::Error),
    #[error("not a minisign secret key ({0})")]
    Malformed(&'static str),
    #[error("the secret key is password-protected and no password was given")]
    NeedsPassword,
    #[error("cannot load the secret key: {0}")]
    Minisign(#[source] minisign::PError),
    #[error("the key is corrupted: its secret and public halves do not belong together")]
    Mismatched,
    #[error("the key does not match the public key beside it, {}", .0.display())]
    NotThePublicKey(PathBuf),
}

/// The size of a decoded secret key: algorithms, KDF parameters, key id,
/// secret key (seed and public half) and checksum.
const SECRET_KEY_BYTES: usize = 2 + 2 + 2 + 32 + 8 + 8 + 8 + 64 + 32;
/// Where the KDF algorithm and the checksum sit in it.
const KDF_ALG: std::ops::Range<usize> = 2..4;
const CHECKSUM: std::ops::Range<usize> = SECRET_KEY_BYTES - 32..SECRET_KEY_BYTES;

/// A secret key, unlocked.
pub struct SecretKey(minisign::SecretKey);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey { .. }")
    }
}

/// Why data or a file cannot be signed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SigningError {
    /// minisign could not sign (it failed to read what it signs).
    #[error("{what}: {source}")]
    Minisign {
        what: String,
        #[source]
        source: minisign::PError,
    },
    /// The file to sign cannot be opened; the error names it.
    #[error(transparent)]
    Open(#[from] std::io::Error),
    #[error(transparent)]
    Write(#[from] kpack_fs::PathError),
}

impl SecretKey {
    /// Loads the secret key at `path`; `password` unlocks an encrypted one
    /// and is ignored for an unencrypted one.
    pub fn load(path: &Path, password: Option<String>) -> Result<SecretKey, KeyError> {
        load_secret_key(path, password).map(SecretKey)
    }

    /// Signs `data` (prehashed, as minisign does by default) with a trusted
    /// comment; returns the `.minisig` text. `what` names the data in an
    /// error.
    pub fn sign(
        &self,
        what: &str,
        data: impl Read,
        trusted_comment: &str,
    ) -> Result<String, SigningError> {
        minisign::sign(None, &self.0, data, Some(trusted_comment), None)
            .map(|signature| signature.into_string())
            .map_err(|source| SigningError::Minisign {
                what: what.to_owned(),
                source,
            })
    }

    /// Signs `file`, writing `<file>.minisig` beside it atomically, with a
    /// trusted comment; returns the signature's path.
    pub fn sign_file(&self, file: &Path, trusted_comment: &str) -> Result<PathBuf, SigningError> {
        let reader = fs::File::open(file)?;
        let signature = self.sign(&file.display().to_string(), reader, trusted_comment)?;
        let mut path = file.as_os_str().to_owned();
        path.push(".minisig");
        let path = PathBuf::from(path);
        kpack_fs::write_atomic(&path, signature.as_bytes())?;
        Ok(path)
    }
}

fn load_secret_key(path: &Path, password: Option<String>) -> Result<minisign::SecretKey, KeyError> {
    let error = |problem| KeyError {
        path: path.to_owned(),
        problem,
    };
    let text = fs::read_to_string(path).map_err(|e| error(KeyProblem::Read(e)))?;
    let bytes = decode(&text).map_err(error)?;
    let key = if bytes[KDF_ALG] == [0, 0] {
        load_unencrypted(&text, &bytes).map_err(error)?
    } else {
        let password = password.ok_or_else(|| error(KeyProblem::NeedsPassword))?;
        SecretKeyBox::from_string(&text)
            .and_then(|boxed| boxed.into_secret_key(Some(password)))
            .map_err(|e| error(KeyProblem::Minisign(e)))?
    };
    check_public_key_beside(path, &key).map_err(error)?;
    Ok(key)
}

/// The key line of a secret key file, decoded.
fn decode(text: &str) -> Result<Vec<u8>, KeyProblem> {
    let line = text
        .lines()
        .nth(1)
        .ok_or(KeyProblem::Malformed("no key line"))?;
    let bytes = Base64::decode_to_vec(line.trim(), None)
        .map_err(|_| KeyProblem::Malformed("the key line is not base64"))?;
    if bytes.len() != SECRET_KEY_BYTES || &bytes[..2] != b"Ed" {
        return Err(KeyProblem::Malformed(
            "not an Ed25519 key of the right size",
        ));
    }
    Ok(bytes)
}

fn load_unencrypted(text: &str, bytes: &[u8]) -> Result<minisign::SecretKey, KeyProblem> {
    let checked = SecretKeyBox::from_string(text).and_then(|b| b.into_unencrypted_secret_key());
    match checked {
        Ok(key) => Ok(key),
        // The stock tool's unencrypted keys carry no checksum.
        Err(_) if bytes[CHECKSUM].iter().all(|&b| b == 0) => {
            let key = minisign::SecretKey::from_bytes(bytes).map_err(KeyProblem::Minisign)?;
            check_halves(&key)?;
            Ok(key)
        }
        Err(e) => Err(KeyProblem::Minisign(e)),
    }
}

/// Signs a probe with the secret half and verifies it with the public half.
fn check_halves(key: &minisign::SecretKey) -> Result<(), KeyProblem> {
    let public = minisign::PublicKey::from_secret_key(key).map_err(|_| KeyProblem::Mismatched)?;
    let probe = b"kpack key check";
    let signature = minisign::sign(None, key, Cursor::new(probe), None, None)
        .map_err(|_| KeyProblem::Mismatched)?;
    minisign::verify(&public, &signature, Cursor::new(probe), true, false, false)
        .map_err(|_| KeyProblem::Mismatched)
}

/// A public key file beside the secret key (`NAME.pub` for `NAME.key` or
/// `NAME.sec`), when there is one, must hold the same key and key id.
fn check_public_key_beside(path: &Path, key: &minisign::SecretKey) -> Result<(), KeyProblem> {
    let beside = path.with_extension("pub");
    if beside == path {
        return Ok(());
    }
    let Ok(text) = fs::read_to_string(&beside) else {
        return Ok(());
    };
    let expected = PublicKeyBox::from_string(&text)
        .and_then(|boxed| boxed.into_public_key())
        .map_err(|_| KeyProblem::NotThePublicKey(beside.clone()))?;
    let derived = minisign::PublicKey::from_secret_key(key).map_err(|_| KeyProblem::Mismatched)?;
    if derived.to_bytes() != expected.to_bytes() {
        return Err(KeyProblem::NotThePublicKey(beside));
    }
    Ok(())
}

//! Making a key pair, as the stock `minisign -G` does: the secret key
//! encrypted with a password, or unencrypted for CI.

use std::io::Write;
use std::path::{Path, PathBuf};

use fs_err as fs;
use fs_err::os::unix::fs::OpenOptionsExt;
use minisign::KeyPair;

use crate::PublicKey;

/// Why a key pair cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeygenError {
    #[error("{}: already exists; not overwriting a key", .0.display())]
    Exists(PathBuf),
    #[error("{}: {source}", path.display())]
    Minisign {
        path: PathBuf,
        #[source]
        source: minisign::PError,
    },
    /// Writing a key file failed; the error names it.
    #[error(transparent)]
    Write(#[from] std::io::Error),
}

/// Makes a key pair: the secret key encrypted with `password`, or stored
/// unencrypted when it is `None` (for CI). Existing files are not
/// overwritten.
pub fn keygen(
    secret: &Path,
    public: &Path,
    password: Option<String>,
) -> Result<PublicKey, KeygenError> {
    for path in [secret, public] {
        if path.exists() {
            return Err(KeygenError::Exists(path.to_owned()));
        }
    }
    let failed = |path: &Path| {
        let path = path.to_owned();
        move |source| KeygenError::Minisign { path, source }
    };
    let pair = match password {
        Some(password) => KeyPair::generate_encrypted_keypair(Some(password)),
        None => KeyPair::generate_unencrypted_keypair(),
    }
    .map_err(failed(secret))?;
    let secret_text = pair
        .sk
        .to_box(Some("kpack-repo secret key"))
        .map_err(failed(secret))?
        .to_string();
    let public_text = pair.pk.to_box().map_err(failed(public))?.to_string();
    write_new(secret, &secret_text, 0o600)?;
    write_new(public, &public_text, 0o644)?;
    Ok(PublicKey(pair.pk))
}

fn write_new(path: &Path, text: &str, mode: u32) -> std::io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(text.as_bytes())
}

//! Detached minisign signatures for archives (`<archive>.minisig`),
//! verifiable with the stock `minisign -Vm`.

use std::path::{Path, PathBuf};

use minisign::SecretKey;

use crate::error::{Error, Result};

/// A loaded secret key.
pub struct Signer {
    key: SecretKey,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer { .. }")
    }
}

impl Signer {
    /// Loads a minisign secret key; `password` unlocks an encrypted one.
    pub fn from_file(path: &Path, password: Option<String>) -> Result<Signer> {
        let key = kpack_sign::load_secret_key(path, password)?;
        Ok(Signer { key })
    }

    /// Signs `file`, writing `<file>.minisig` atomically; the trusted
    /// comment names the file.
    pub fn sign_file(&self, file: &Path) -> Result<PathBuf> {
        let failed = |message: String| Error::Sign {
            path: file.to_owned(),
            message,
        };
        let reader = fs_err::File::open(file)?;
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let signature =
            minisign::sign(None, &self.key, reader, Some(&format!("file:{name}")), None)
                .map_err(|e| failed(e.to_string()))?;
        let mut path = file.as_os_str().to_owned();
        path.push(".minisig");
        let path = PathBuf::from(path);
        kpack_fs::write_atomic(&path, signature.into_string().as_bytes())?;
        Ok(path)
    }
}

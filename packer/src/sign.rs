//! Detached minisign signatures for archives (`<archive>.minisig`),
//! verifiable with the stock `minisign -Vm`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use minisign::{SecretKey, SecretKeyBox};

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
        let failed = |message: String| Error::Sign {
            path: path.to_owned(),
            message,
        };
        let text = fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        let boxed = SecretKeyBox::from_string(&text).map_err(|e| failed(e.to_string()))?;
        let key = match password {
            Some(password) => boxed.into_secret_key(Some(password)),
            None => boxed.into_unencrypted_secret_key(),
        }
        .map_err(|e| failed(format!("cannot load the secret key: {e}")))?;
        if key.is_encrypted() {
            return Err(failed(
                "the secret key is password-protected and no password was given".into(),
            ));
        }
        Ok(Signer { key })
    }

    /// Signs `file`, writing `<file>.minisig` atomically; the trusted
    /// comment names the file.
    pub fn sign_file(&self, file: &Path) -> Result<PathBuf> {
        let failed = |message: String| Error::Sign {
            path: file.to_owned(),
            message,
        };
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| Error::Io { path, source }
        };
        let reader = fs::File::open(file).map_err(io(file))?;
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
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
        temp.write_all(signature.into_string().as_bytes())
            .map_err(io(&path))?;
        temp.persist(&path).map_err(|e| Error::Io {
            path: path.clone(),
            source: e.error,
        })?;
        Ok(path)
    }
}

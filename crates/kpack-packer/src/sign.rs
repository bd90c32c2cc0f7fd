//! Detached minisign signatures for archives (`<archive>.minisig`),
//! verifiable with the stock `minisign -Vm`: signed with a trusted comment
//! naming the file. Keys and signing are `kpack-sign`'s.

use std::path::{Path, PathBuf};

use kpack_sign::{SecretKey, SigningError};

/// Signs the archive `file`, writing `<file>.minisig` atomically; the
/// trusted comment names the file.
pub fn sign_archive(key: &SecretKey, file: &Path) -> Result<PathBuf, SigningError> {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    key.sign_file(file, &format!("file:{name}"))
}

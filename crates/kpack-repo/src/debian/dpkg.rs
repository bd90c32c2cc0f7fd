//! Running `dpkg-deb` on a Debian package: its control data, its files.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why `dpkg-deb` could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DpkgError {
    #[error("cannot run dpkg-deb")]
    Run(#[source] std::io::Error),
    #[error("{}: dpkg-deb cannot {what}: {stderr}", deb.display())]
    Failed {
        deb: PathBuf,
        what: &'static str,
        /// What it said, trimmed.
        stderr: String,
    },
}

/// Runs `dpkg-deb OPTION DEB [DIR]`; its standard output. A failure
/// names the package and what could not be done (`what`).
pub fn dpkg_deb(
    option: &str,
    deb: &Path,
    dir: Option<&Path>,
    what: &'static str,
) -> Result<Vec<u8>, DpkgError> {
    let output = Command::new("dpkg-deb")
        .arg(option)
        .arg(deb)
        .args(dir)
        .output()
        .map_err(DpkgError::Run)?;
    if !output.status.success() {
        return Err(DpkgError::Failed {
            deb: deb.to_owned(),
            what,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(output.stdout)
}

//! `pip download` for a fleet (06-python.md, "Downloading for other
//! machines"): the host wheels and exactly the device wheels a set of
//! targets needs (the extras chosen for each, as `pip install` chooses
//! them), fetched by pip with the hashes the index gives, into a directory
//! that `--no-index --find-links` installs from offline.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use kpack_gpu::Target;
use serde::Serialize;

use super::installer::run;
use super::requirement::Requirement;
use super::resolution::{resolve_requirements, Resolved};
use super::PipError;
use crate::output::Output;

/// What a download fetched.
#[derive(Debug, Serialize)]
pub struct Downloaded {
    /// The requirements given to pip, with their extras.
    pub requirements: Vec<String>,
    /// The files now in the directory that were not there before.
    pub files: Vec<String>,
    /// Their bytes.
    pub bytes: u64,
}

/// Downloads `requirements` with the device extras `targets` need into
/// `dir`: `pip` (as [`super::installer::resolver`] builds it, called once
/// to resolve and once to download) with the installer's `args`. An entry
/// wheel that demands every GPU's device code is refused, saying why,
/// unless `all_targets`.
pub fn download(
    pip: impl Fn() -> Result<Command, PipError>,
    targets: &[Target],
    requirements: &[Requirement],
    all_targets: bool,
    args: &[String],
    dir: &Path,
    output: &dyn Output,
) -> Result<Downloaded, PipError> {
    let resolved = resolve_requirements(pip()?, targets, requirements, all_targets, args, output)?;
    if let Some((name, requirement)) = demanding(&resolved).filter(|_| !all_targets) {
        return Err(PipError::EveryGpuIndex { name, requirement });
    }
    let texts: Vec<String> = resolved.iter().map(Resolved::text).collect();
    fs_err::create_dir_all(dir).map_err(PipError::Io)?;
    let before = files(dir)?;
    let mut command = pip()?;
    command
        .args(["download", "--quiet", "--dest"])
        .arg(dir)
        .args(args)
        .arg("--")
        .args(&texts)
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
    run(&mut command)?;
    let new: Vec<(String, u64)> = files(dir)?
        .into_iter()
        .filter(|file| !before.contains(file))
        .collect();
    let bytes = new.iter().map(|(_, size)| size).sum();
    let downloaded = Downloaded {
        requirements: texts,
        files: new.into_iter().map(|(name, _)| name).collect(),
        bytes,
    };
    output.line(&format!(
        "downloaded {} into {}: {}",
        downloaded.requirements.join(" "),
        dir.display(),
        downloaded.files.join(" ")
    ));
    Ok(downloaded)
}

/// The first resolved distribution demanding every GPU's device code, and
/// its requirement.
fn demanding(resolved: &[Resolved]) -> Option<(String, String)> {
    resolved.iter().find_map(|r| {
        let requirement = r.demands_all.clone()?;
        Some((r.requirement.name.to_string(), requirement))
    })
}

/// The files in `dir` with their sizes.
fn files(dir: &Path) -> Result<BTreeSet<(String, u64)>, PipError> {
    let mut out = BTreeSet::new();
    for entry in fs_err::read_dir(dir).map_err(PipError::Io)? {
        let entry = entry.map_err(PipError::Io)?;
        let size = entry.metadata().map_err(PipError::Io)?.len();
        out.insert((entry.file_name().to_string_lossy().into_owned(), size));
    }
    Ok(out)
}

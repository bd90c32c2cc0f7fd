//! `pip download` for a fleet (06-python.md, "Downloading for other
//! machines"): the host wheels and exactly the device wheels a set of
//! targets needs (the extras chosen for each, as `pip install` chooses
//! them), fetched by pip with the hashes the index gives, into a directory
//! that `--no-index --find-links` installs from offline. An entry wheel
//! that demands every GPU's device code (an every-GPU index's) is taken
//! instead from another index given (`--extra-index-url`) that offers it
//! with explicit extras, or refused saying why.

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
/// `dir`: `pip` (as [`super::installer::resolver`] builds it, called to
/// resolve and to download) with the installer's `args`.
pub fn download(
    pip: impl Fn() -> Result<Command, PipError>,
    targets: &[Target],
    requirements: &[Requirement],
    all_targets: bool,
    args: &[String],
    dir: &Path,
    output: &dyn Output,
) -> Result<Downloaded, PipError> {
    let mut args = args.to_vec();
    let mut resolved =
        resolve_requirements(pip()?, targets, requirements, all_targets, &args, output)?;
    if let Some((name, requirement)) = demanding(&resolved).filter(|_| !all_targets) {
        // The explicit-extras twin, where another index given offers it.
        let twin = other_indexes(&args).into_iter().find_map(|index| {
            let alone = with_only_index(&args, &index);
            let again =
                resolve_requirements(pip().ok()?, targets, requirements, false, &alone, output)
                    .ok()?;
            demanding(&again).is_none().then_some((alone, again, index))
        });
        let Some((alone, again, index)) = twin else {
            return Err(PipError::EveryGpuIndex { name, requirement });
        };
        output.note(&format!(
            "{name} demands every GPU's device code (`{requirement}`) on the first index; taking it from {index}, which offers it with explicit extras"
        ));
        (args, resolved) = (alone, again);
    }
    let args = &args[..];
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

/// The index URLs `args` give pip other than the first
/// (`--extra-index-url URL` or `--extra-index-url=URL`).
fn other_indexes(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut next = false;
    for arg in args {
        if next {
            out.push(arg.clone());
            next = false;
        } else if arg == "--extra-index-url" {
            next = true;
        } else if let Some(url) = arg.strip_prefix("--extra-index-url=") {
            out.push(url.to_owned());
        }
    }
    out
}

/// `args` with `index` the only index pip reads.
fn with_only_index(args: &[String], index: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for arg in args {
        if skip {
            skip = false;
            continue;
        }
        if arg == "--index-url" || arg == "-i" || arg == "--extra-index-url" {
            skip = true;
            continue;
        }
        if arg.starts_with("--index-url=") || arg.starts_with("--extra-index-url=") {
            continue;
        }
        out.push(arg.clone());
    }
    out.extend(["--index-url".to_owned(), index.to_owned()]);
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn another_index_is_the_only_one_the_retry_reads() {
        let args = strings(&[
            "--index-url",
            "https://r/whl/simple",
            "--extra-index-url=https://r/whl-next/simple",
            "--extra-index-url",
            "https://pypi/simple",
            "--timeout",
            "5",
        ]);
        assert_eq!(
            other_indexes(&args),
            ["https://r/whl-next/simple", "https://pypi/simple"]
        );
        assert_eq!(
            with_only_index(&args, "https://r/whl-next/simple"),
            strings(&["--timeout", "5", "--index-url", "https://r/whl-next/simple"])
        );
    }
}

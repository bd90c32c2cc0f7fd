//! The fat layout (08-hip-runtimes.md): as a package is staged, each of
//! its split binaries is made fat again for the installed targets, from
//! the host tree and the archives in the download cache, and its archives
//! are left out of the prefix (no runtime reads them then).

use std::io::{Seek, SeekFrom};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use kpack_binary::materialize::{planned_code_size, BoundedArchives, Destination};
use kpack_binary::BinaryFormat;
use kpack_fs::confined::ConfinedDir;
use kpack_repo_index::{ArtifactKind, RelativePath, Sha256};

use super::stage::{StageDir, StagedFiles};
use super::{InstallError, PackageInstall};
use crate::decode_budget::DecodeBudget;

/// Makes every split binary staged in `stage` fat for `package`'s targets
/// and takes its archives out of `files`; `scratch` holds each binary
/// while it is written. Returns how many binaries were made fat.
pub(crate) fn materialize_package(
    package: &PackageInstall,
    stage: StageDir<'_>,
    scratch: &ConfinedDir,
    files: &mut StagedFiles,
) -> Result<usize, InstallError> {
    let archives = open_archives(package)?;
    for artifact in package
        .artifacts
        .iter()
        .filter(|a| a.artifact.kind == ArtifactKind::Kpack)
    {
        let placed = super::archive_slot(artifact)?;
        if files.remove(&placed).is_some() {
            stage.dir.remove_file(Path::new(placed.as_str()))?;
        }
    }
    let paths: Vec<RelativePath> = files
        .iter()
        .filter(|(_, file)| file.link.is_none())
        .map(|(path, _)| path.clone())
        .collect();
    let split = split_within_budget(package, stage, &paths, &archives)?;
    for (index, path) in split.iter().enumerate() {
        let (sha256, size) = materialize_one(package, stage, scratch, path, index, &archives)?;
        if let Some(file) = files.get_mut(path) {
            file.sha256 = Some(sha256);
            file.size = Some(size);
        }
    }
    Ok(split.len())
}

/// The split binaries among the staged `paths`, once the code all of them
/// would decode from `archives` (every use of a TOC entry) is found within
/// what the package's archives declare; refused past it, naming the
/// package, before any is written.
fn split_within_budget(
    package: &PackageInstall,
    stage: StageDir<'_>,
    paths: &[RelativePath],
    archives: &BoundedArchives,
) -> Result<Vec<RelativePath>, InstallError> {
    let kpacks = package
        .artifacts
        .iter()
        .filter(|a| a.artifact.kind == ArtifactKind::Kpack);
    let limit = kpacks.fold(0, |sum: u64, a| {
        sum.saturating_add(a.artifact.unpack_limit())
    });
    let mut budget = DecodeBudget::new(
        package.name.to_string(),
        limit,
        "its archives declare (unpacked-size, or what is allowed to archives declaring none)",
    );
    let mut split = Vec::new();
    for path in paths {
        let shown = stage.prefix.join(path.as_str());
        let failed = |source: kpack_binary::Error| InstallError::Materialize {
            path: path.clone(),
            source: Box::new(source),
        };
        let input = stage.dir.open_file(Path::new(path.as_str()))?;
        if !is_binary(&input, &shown)?
            || !kpack_binary::materialize::is_split(&input, &shown).map_err(failed)?
        {
            continue;
        }
        let targets = &package.targets;
        let code = planned_code_size(&input, &shown, targets, archives).map_err(failed)?;
        budget.add(code);
        split.push(path.clone());
    }
    budget.check()?;
    Ok(split)
}

/// The package's archives, from the download cache, where their hashes
/// were checked, each within the size its shard declares.
fn open_archives(package: &PackageInstall) -> Result<BoundedArchives, InstallError> {
    let archives = package
        .artifacts
        .iter()
        .filter(|a| a.artifact.kind == ArtifactKind::Kpack)
        .map(|artifact| {
            Ok((
                super::stage::open_bounded(artifact)?,
                artifact.artifact.unpack_limit(),
            ))
        })
        .collect::<Result<Vec<_>, InstallError>>()?;
    // Each was checked as it was opened, naming its artifact; this only
    // carries the bound along.
    BoundedArchives::declared(archives).map_err(|e| InstallError::Io(std::io::Error::other(e)))
}

/// Makes the staged split binary `path` fat: written into `scratch`, then
/// renamed over it. Its new hash and size.
fn materialize_one(
    package: &PackageInstall,
    stage: StageDir<'_>,
    scratch: &ConfinedDir,
    path: &RelativePath,
    index: usize,
    archives: &BoundedArchives,
) -> Result<(Sha256, u64), InstallError> {
    let at = Path::new(path.as_str());
    let shown = stage.prefix.join(path.as_str());
    let failed = |source: kpack_binary::Error| InstallError::Materialize {
        path: path.clone(),
        source: Box::new(source),
    };
    let input = stage.dir.open_file(at)?;
    let mode = input
        .metadata()
        .map_err(|source| InstallError::Write {
            path: shown.clone(),
            source,
        })?
        .permissions()
        .mode();
    let temporary = PathBuf::from(format!("fat-{index}"));
    let mut output = scratch.create_file(&temporary, mode & 0o7777)?;
    let destination = Destination {
        file: &output,
        path: &shown,
        spool_dir: scratch.path(),
    };
    kpack_binary::materialize::materialize_into(
        &input,
        &shown,
        destination,
        &package.targets,
        archives,
        package.layout.bundle_encoding(),
    )
    .map_err(failed)?;
    let write = |source| InstallError::Write {
        path: shown.clone(),
        source,
    };
    output
        .set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))
        .map_err(write)?;
    output.seek(SeekFrom::Start(0)).map_err(write)?;
    let hashed = Sha256::of_reader(&mut output).map_err(write)?;
    scratch.rename(&temporary, stage.dir, at)?;
    Ok(hashed)
}

/// Whether `file` is in a binary format (a cheap test before parsing).
fn is_binary(file: &std::fs::File, shown: &Path) -> Result<bool, InstallError> {
    match BinaryFormat::of_file(file) {
        Ok(format) => Ok(format.is_some()),
        Err(source) => Err(InstallError::Io(std::io::Error::new(
            source.kind(),
            format!("cannot read {}: {source}", shown.display()),
        ))),
    }
}

//! Package manifests (`manifests/*.toml`, documented in
//! manifests/README.md) and `kpack-repo build`: unpack a real package, map
//! its files into a prefix, split it with the packer, publish the result.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use fs_err as fs;
use kpack_packer::archive::Grouping;
use kpack_packer::tree::{split_tree, KPACK_DIR};
use rocm_kpack::Compression;
use serde::Deserialize;

use kpack_repo_index::publish::{NewArtifact, PublishError, Repo};
use kpack_repo_index::schema::RootIndex;
use kpack_repo_index::sign::SecretKey;
use kpack_repo_index::types::{Dependency, PackageName};

/// A manifest.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub package: ManifestPackage,
    pub source: Source,
    #[serde(default)]
    pub pack: PackOptions,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestPackage {
    pub name: PackageName,
    pub version: semver::Version,
    #[serde(default)]
    pub summary: Option<String>,
    #[serde(default)]
    pub depends: Vec<Dependency>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// A Debian package file name.
    pub debian: String,
    /// Package directory -> prefix directory.
    #[serde(default)]
    pub map: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackOptions {
    #[serde(default = "default_group")]
    pub group: String,
    #[serde(rename = "group-by", default)]
    pub group_by: GroupBy,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            group: default_group(),
            group_by: GroupBy::Processor,
        }
    }
}

fn default_group() -> String {
    "rocm".into()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    #[default]
    Processor,
    Family,
}

/// Why a manifest cannot be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    #[error("{}: {message}", path.display())]
    Manifest { path: PathBuf, message: String },
    /// A file-system call failed; the error names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("cannot make a working directory")]
    WorkDir(#[source] std::io::Error),
    #[error("cannot run dpkg-deb")]
    Dpkg(#[source] std::io::Error),
    /// Packing a file or directory into a tree artifact (tar and zstd's
    /// errors need not name it).
    #[error("cannot pack {} into a tree", path.display())]
    Tree {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Pack(#[from] kpack_packer::Error),
    #[error(transparent)]
    Publish(#[from] PublishError),
}

impl Manifest {
    pub fn load(path: &Path) -> Result<Manifest, BuildError> {
        let text = fs::read_to_string(path)?;
        let manifest: Manifest = toml::from_str(&text).map_err(|e| BuildError::Manifest {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        for (from, to) in &manifest.source.map {
            for part in [from, to] {
                if part.split('/').any(|p| p == "..") || part.starts_with('/') {
                    return Err(BuildError::Manifest {
                        path: path.to_owned(),
                        message: format!("source.map: {part:?} must be a relative path without .."),
                    });
                }
            }
        }
        Ok(manifest)
    }
}

/// Builds `manifest` from the package in `sources` and publishes it to the
/// repository at `repo`, signed with `key` if given.
pub fn build(
    manifest: &Manifest,
    sources: &Path,
    repo: &Path,
    key: Option<&SecretKey>,
) -> Result<RootIndex, BuildError> {
    let work = tempfile::tempdir().map_err(BuildError::WorkDir)?;
    let deb = sources.join(&manifest.source.debian);
    let unpacked = work.path().join("unpacked");
    let output = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&unpacked)
        .output()
        .map_err(BuildError::Dpkg)?;
    if !output.status.success() {
        return Err(BuildError::Manifest {
            path: deb,
            message: format!(
                "dpkg-deb cannot unpack it: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    let prefix = work.path().join("prefix");
    fs::create_dir_all(&prefix)?;
    for (from, to) in &manifest.source.map {
        copy_tree(&unpacked.join(from), &prefix.join(to))?;
    }
    let split = work.path().join("split");
    let grouping = match manifest.pack.group_by {
        GroupBy::Processor => Grouping::Processor,
        GroupBy::Family => Grouping::Family,
    };
    let report = split_tree(
        &prefix,
        &split,
        &manifest.pack.group,
        grouping,
        Compression::DEFAULT,
    )?;

    let package = &manifest.package;
    let host = work
        .path()
        .join(format!("{}-{}-host.tar.zst", package.name, package.version));
    write_host_tree(&split, &host)?;
    let mut artifacts = vec![NewArtifact {
        file: host,
        targets: None,
        component: None,
    }];
    for archive in &report.archives {
        artifacts.push(NewArtifact {
            file: archive.path.clone(),
            targets: None,
            component: None,
        });
    }
    let root = Repo::open(repo)?.add(
        &package.name,
        &package.version,
        package.depends.clone(),
        &artifacts,
        package.summary.clone(),
        key,
    )?;
    Ok(root)
}

/// Copies the tree at `from` into `to`, keeping symlinks.
fn copy_tree(from: &Path, to: &Path) -> Result<(), BuildError> {
    fs::create_dir_all(to)?;
    let mut entries: Vec<_> = fs::read_dir(from)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let source = entry.path();
        let destination = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            fs::os::unix::fs::symlink(fs::read_link(&source)?, &destination)?;
        } else if kind.is_dir() {
            copy_tree(&source, &destination)?;
        } else {
            fs::copy(&source, &destination)?;
        }
    }
    Ok(())
}

/// A deterministic zstd tar of the tree at `root`, without `.kpack/`: a
/// tree artifact.
pub fn write_host_tree(root: &Path, out: &Path) -> Result<(), BuildError> {
    let pack = |path: &Path, source| BuildError::Tree {
        path: path.to_owned(),
        source,
    };
    let file = fs::File::create(out)?;
    let encoder = zstd::Encoder::new(file, 10).map_err(|e| pack(root, e))?;
    let mut builder = tar::Builder::new(encoder);
    builder.mode(tar::HeaderMode::Deterministic);
    builder.follow_symlinks(false);
    let mut paths = Vec::new();
    collect(root, Path::new(""), &mut paths)?;
    for relative in paths {
        if relative.starts_with(KPACK_DIR) {
            continue;
        }
        let path = root.join(&relative);
        builder
            .append_path_with_name(&path, &relative)
            .map_err(|e| pack(&path, e))?;
    }
    let encoder = builder.into_inner().map_err(|e| pack(root, e))?;
    encoder.finish().map_err(|e| pack(root, e))?;
    Ok(())
}

fn collect(root: &Path, relative: &Path, out: &mut Vec<PathBuf>) -> Result<(), BuildError> {
    let dir = root.join(relative);
    let mut entries: Vec<_> = fs::read_dir(&dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let child = relative.join(entry.file_name());
        let kind = entry.file_type()?;
        out.push(child.clone());
        if kind.is_dir() {
            collect(root, &child, out)?;
        }
    }
    Ok(())
}

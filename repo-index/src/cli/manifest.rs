//! Package manifests (`manifests/*.toml`, documented in
//! manifests/README.md) and `kpack-repo build`: unpack a real package, map
//! its files into a prefix, split it with the packer, publish the result.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use fs_err as fs;
use kpack_packer::archive::Grouping;
use kpack_packer::tree::{split_tree_with, TreeOptions, TreeReport, KPACK_DIR};
use serde::Deserialize;

use kpack_repo_index::publish::{NewArtifact, NewVersion, PublishError, Repo};
use kpack_repo_index::schema::RootIndex;
use kpack_repo_index::sign::SecretKey;
use kpack_repo_index::types::{Dependency, InvalidValue, Listed, PackageName};
use kpack_repo_index::unpacked::CountingWriter;

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
/// repository `repo`, signed with `key` if given: a host tree, one
/// archive per processor (or family), and one payload per processor and
/// kernel database (a component of its own, e.g. `tensile`).
pub fn build(
    manifest: &Manifest,
    sources: &Path,
    repo: &Repo,
    key: Option<&SecretKey>,
) -> Result<RootIndex, BuildError> {
    let work = tempfile::tempdir().map_err(BuildError::WorkDir)?;
    let prefix = unpack(manifest, sources, work.path())?;
    let split = work.path().join("split");
    let grouping = match manifest.pack.group_by {
        GroupBy::Processor => Grouping::Processor,
        GroupBy::Family => Grouping::Family,
    };
    let options = TreeOptions {
        grouping,
        payload_dir: Some(work.path().join("payloads")),
        ..TreeOptions::new(&manifest.pack.group)
    };
    let report = split_tree_with(&prefix, &split, &options)?;
    let artifacts = pack_artifacts(manifest, &split, &report, work.path())?;
    let package = &manifest.package;
    let root = repo.add(
        &NewVersion {
            depends: package.depends.clone(),
            summary: package.summary.clone(),
            ..NewVersion::new(&package.name, &package.version)
        },
        &artifacts,
        key,
    )?;
    Ok(root)
}

/// The package's files, unpacked with `dpkg-deb` and mapped into a prefix
/// under `work`.
fn unpack(manifest: &Manifest, sources: &Path, work: &Path) -> Result<PathBuf, BuildError> {
    let deb = sources.join(&manifest.source.debian);
    let unpacked = work.join("unpacked");
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
    let prefix = work.join("prefix");
    fs::create_dir_all(&prefix)?;
    let map = &manifest.source.map;
    for (from, to) in map {
        let (source, destination) = (unpacked.join(from), prefix.join(to));
        // A whole directory no other mapping reads from is moved, not
        // copied (a package's gigabytes of kernels need not be written twice).
        let shared = map
            .keys()
            .any(|other| other != from && Path::new(other).starts_with(from));
        if !shared && !destination.exists() {
            if let Some(parent) = destination.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::rename(&source, &destination)?;
        } else {
            copy_tree(&source, &destination)?;
        }
    }
    Ok(prefix)
}

/// The artifacts of a split: the host tree, each archive, and each
/// database payload packed as a tree (`<name>-<processor>-<component>`),
/// listed for its processor.
fn pack_artifacts(
    manifest: &Manifest,
    split: &Path,
    report: &TreeReport,
    work: &Path,
) -> Result<Vec<NewArtifact>, BuildError> {
    let package = &manifest.package;
    let host = work.join(format!("{}-{}-host.tar.zst", package.name, package.version));
    let unpacked_size = write_tree(split, &host, TreeCompression::Host)?;
    let mut artifacts = vec![NewArtifact {
        file: host,
        targets: None,
        component: None,
        unpacked_size: Some(unpacked_size),
    }];
    for archive in &report.archives {
        artifacts.push(NewArtifact {
            file: archive.path.clone(),
            targets: None,
            component: None,
            unpacked_size: None,
        });
    }
    for payload in &report.payloads {
        let file = work.join(format!(
            "{}-{}-{}.tar.zst",
            package.name, payload.processor, payload.component
        ));
        let unpacked_size = write_tree(&payload.dir, &file, TreeCompression::Databases)?;
        let component =
            payload
                .component
                .parse()
                .map_err(|e: InvalidValue| BuildError::Manifest {
                    path: payload.dir.clone(),
                    message: e.to_string(),
                })?;
        artifacts.push(NewArtifact {
            file,
            targets: Some(vec![Listed::Target(payload.processor.clone())]),
            component: Some(component),
            unpacked_size: Some(unpacked_size),
        });
    }
    Ok(artifacts)
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

/// How a tree artifact is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeCompression {
    /// A host tree: zstd level 10, fast to make.
    Host,
    /// A kernel database payload: large files that repeat themselves far
    /// apart, so level 13 with long-distance matching over a 128 MiB window
    /// (what a decoder accepts without being told) on every core, still
    /// fast to decompress. On Debian's rocBLAS (1.7 GB of Tensile files,
    /// two cores): 20 s for 51 MB; level 15 saves 4% in twice the time,
    /// level 19 another 5% in ten times.
    Databases,
}

impl TreeCompression {
    fn encoder<W: std::io::Write>(self, out: W) -> std::io::Result<zstd::Encoder<'static, W>> {
        match self {
            TreeCompression::Host => zstd::Encoder::new(out, 10),
            TreeCompression::Databases => {
                let mut encoder = zstd::Encoder::new(out, 13)?;
                encoder.long_distance_matching(true)?;
                encoder.window_log(27)?;
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                encoder.multithread(u32::try_from(cores).unwrap_or(1))?;
                Ok(encoder)
            }
        }
    }
}

/// A deterministic zstd tar of the tree at `root` (relative paths, sorted,
/// no owners or times), without `.kpack/`; the length of the tar stream
/// (its `unpacked-size`), counted as it goes to the encoder.
pub fn write_tree(
    root: &Path,
    out: &Path,
    compression: TreeCompression,
) -> Result<u64, BuildError> {
    let pack = |path: &Path, source| BuildError::Tree {
        path: path.to_owned(),
        source,
    };
    let file = fs::File::create(out)?;
    let encoder = compression.encoder(file).map_err(|e| pack(root, e))?;
    let mut builder = tar::Builder::new(CountingWriter::new(encoder));
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
    let counted = builder.into_inner().map_err(|e| pack(root, e))?;
    let unpacked_size = counted.count();
    counted.into_inner().finish().map_err(|e| pack(root, e))?;
    Ok(unpacked_size)
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

//! `kpack-repo build` of one manifest: unpack its packages, map their
//! files into a prefix, split it with the packer, and stage the host tree,
//! archives and database payloads in the repository's pool.

use std::path::{Path, PathBuf};

use fs_err as fs;
use kpack_gpu::{Level, Owner, Target};
use kpack_packer::archive::Grouping;
use kpack_packer::tree::{split_tree_with, TreeOptions, TreeReport};
use rocm_kpack::format::KPACK_DIR;
use rocm_kpack::Compression;

use kpack_repo_index::types::{InvalidValue, Listed};

use crate::debian::{dpkg_deb, DpkgError};
use crate::manifest::{GroupBy, Manifest, ManifestError, Resolved};
use crate::publish::{NewArtifact, PublishError, Publisher, Staged};
use kpack_hash::CountingWriter;

/// Why a manifest cannot be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Dpkg(#[from] DpkgError),
    /// A database payload whose component is not a component name.
    #[error("{}: {error}", path.display())]
    Component { path: PathBuf, error: InvalidValue },
    /// A file-system call failed; the error names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("cannot make a working directory")]
    WorkDir(#[source] std::io::Error),
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

/// A step of one manifest's build, in the order they come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Unpacking the source packages into a prefix.
    Reading,
    /// Splitting the prefix: fat binaries, archives, database payloads.
    Splitting,
    /// Compressing the host tree and the payloads into artifacts.
    Compressing,
    /// Writing the artifacts to the repository's pool.
    Writing,
}

impl Phase {
    /// The phase as a person reads it: `reading sources`.
    pub fn describe(self) -> &'static str {
        match self {
            Phase::Reading => "reading sources",
            Phase::Splitting => "splitting",
            Phase::Compressing => "compressing",
            Phase::Writing => "writing",
        }
    }
}

/// Told each phase of a build as it starts.
pub trait BuildProgress: Sync {
    fn phase(&self, resolved: &Resolved, phase: Phase);
}

/// Builds `resolved` and stages it in `repo`'s pool, unpublished: a host
/// tree, one archive per processor (or family), and one payload per
/// processor and kernel database (a component of its own, e.g. `tensile`).
/// `progress` is told each phase.
pub fn build(
    resolved: &Resolved,
    repo: &Publisher,
    progress: &dyn BuildProgress,
) -> Result<Staged, BuildError> {
    let manifest = &resolved.manifest;
    let work = tempfile::tempdir().map_err(BuildError::WorkDir)?;
    progress.phase(resolved, Phase::Reading);
    let prefix = unpack(resolved, work.path())?;
    let split = work.path().join("split");
    let grouping = match manifest.pack.group_by {
        GroupBy::Processor => Grouping::Processor,
        GroupBy::Family => Grouping::Family,
    };
    let options = TreeOptions {
        grouping,
        payload_dir: Some(work.path().join("payloads")),
        compression: Compression::Zstd {
            level: manifest.pack.level,
        },
        ..TreeOptions::new(&manifest.pack.group)
    };
    progress.phase(resolved, Phase::Splitting);
    let report = split_tree_with(&prefix, &split, &options)?;
    progress.phase(resolved, Phase::Compressing);
    let artifacts = pack_artifacts(resolved, &split, &report, work.path())?;
    progress.phase(resolved, Phase::Writing);
    Ok(repo.stage(&resolved.new, &artifacts)?)
}

/// The packages' files, unpacked with `dpkg-deb` and mapped into a
/// prefix under `work`.
fn unpack(resolved: &Resolved, work: &Path) -> Result<PathBuf, BuildError> {
    let manifest: &Manifest = &resolved.manifest;
    let unpacked = work.join("unpacked");
    for deb in &resolved.debs {
        dpkg_deb("-x", deb, Some(&unpacked), "unpack it")?;
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
    resolved: &Resolved,
    split: &Path,
    report: &TreeReport,
    work: &Path,
) -> Result<Vec<NewArtifact>, BuildError> {
    let package = &resolved.new;
    let host = work.join(format!("{}-{}-host.tar.zst", package.name, package.version));
    let unpacked_size = write_tree(split, &host, TreeCompression::Package)?;
    let mut artifacts = vec![NewArtifact {
        owner: None,
        file: host,
        targets: None,
        component: None,
        unpacked_size: Some(unpacked_size),
    }];
    for archive in &report.archives {
        artifacts.push(NewArtifact {
            owner: None,
            file: archive.path.clone(),
            targets: None,
            component: None,
            unpacked_size: None,
        });
    }
    for payload in &report.payloads {
        let file = work.join(format!(
            "{}-{}-{}.tar.zst",
            package.name, payload.owner, payload.component
        ));
        let unpacked_size = write_tree(&payload.dir, &file, TreeCompression::Databases)?;
        let component = payload
            .component
            .parse()
            .map_err(|error| BuildError::Component {
                path: payload.dir.clone(),
                error,
            })?;
        let (targets, owner) = payload_owner(&payload.owner);
        artifacts.push(NewArtifact {
            owner,
            file,
            targets,
            component: Some(component),
            unpacked_size: Some(unpacked_size),
        });
    }
    Ok(artifacts)
}

/// What a database payload's artifact is listed for: a processor's package
/// lists the processors it holds (`gfx1250` holds `gfx1250-strict` too),
/// so that clients before owners existed read it as before; a sub-family's
/// or family's names its owner.
fn payload_owner(owner: &Owner) -> (Option<Vec<Listed>>, Option<Owner>) {
    match owner.level() {
        Level::Target => {
            let members: Vec<Listed> = owner
                .members()
                .into_iter()
                .filter_map(|processor| Target::bare(processor).ok())
                .map(Listed::Target)
                .collect();
            // A processor the table does not know is its own only member.
            let members = if members.is_empty() {
                Target::bare(owner.key())
                    .map(Listed::Target)
                    .into_iter()
                    .collect()
            } else {
                members
            };
            (Some(members), None)
        }
        Level::SubFamily | Level::Family => (None, Some(owner.clone())),
    }
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
    /// A package's host tree, made once and downloaded by every user:
    /// level 19 with long-distance matching over a 128 MiB window, on
    /// every core. On Debian 13's ROCm stack (293 MiB of host files, two
    /// cores) it is a quarter smaller than level 10 (rocRAND's 26 MB of
    /// tables: 11.4 MB against 16.7 MB, and smaller than xz -6's 14.6 MB),
    /// at about 2 MB/s.
    Package,
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
            TreeCompression::Package | TreeCompression::Databases => {
                let level = if self == TreeCompression::Package {
                    19
                } else {
                    13
                };
                let mut encoder = zstd::Encoder::new(out, level)?;
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

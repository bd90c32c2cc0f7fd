//! Materializing (08-hip-runtimes.md): a host-only binary and the archives
//! its marker names, for a set of installed targets, made into a fat
//! binary that any HIP runtime registers. Each wrapper gets an
//! uncompressed offload bundle holding the host entry and every code
//! object the archives hold for it that runs on an installed GPU: every
//! feature variant of an installed processor (the runtime chooses between
//! `xnack+` and `xnack-` by the GPU's live mode) and its generic target.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use rocm_kpack::{Archive, Loader, LoaderConfig, Marker, Target};

use crate::bundle::write_offload_bundle;
use crate::elf::{materialize_elf, Machine, SplitElf};
use crate::error::{Error, Result};

/// Alignment of code objects in a bundle, as clang lays them out.
const CODE_ALIGN: u64 = 4096;

/// Where the archives a binary's code comes from are.
#[derive(Debug, Clone)]
pub enum ArchiveSource {
    /// Where its marker points, as the runtime's loader finds them.
    Marker,
    /// Every `*.kpack` file in this directory.
    Dir(PathBuf),
}

/// What materializing one binary did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Materialized {
    /// Wrappers made fat again.
    pub wrappers: usize,
    /// Code objects put into bundles, over all wrappers.
    pub code_objects: usize,
    /// The targets whose code was put in, sorted.
    pub targets: Vec<Target>,
    /// Wrappers whose bundle got no code object (host entry only).
    pub empty: usize,
    /// The archives code was taken from.
    pub archives: Vec<PathBuf>,
}

/// Writes the binary at `input` materialized for `targets` to `output`
/// (atomically, with the input's mode).
pub fn materialize_file(
    input: &Path,
    output: &Path,
    targets: &[Target],
    source: &ArchiveSource,
) -> Result<Materialized> {
    let data = fs_err::read(input)?;
    let (bytes, report) = materialize(&data, input, targets, source)?;
    let mode = fs_err::metadata(input)?.permissions().mode();
    kpack_fs::write_atomic_with_mode(output, &bytes, mode & 0o7777)?;
    Ok(report)
}

/// `data`, the host-only binary at `path`, materialized for `targets`.
pub fn materialize(
    data: &[u8],
    path: &Path,
    targets: &[Target],
    source: &ArchiveSource,
) -> Result<(Vec<u8>, Materialized)> {
    let elf_error = |source| Error::Elf {
        path: path.to_owned(),
        source,
    };
    let split = SplitElf::parse(data)
        .map_err(elf_error)?
        .ok_or_else(|| Error::NotSplit {
            path: path.to_owned(),
        })?;
    let marker = Marker::parse(split.marker_bytes)?;
    let archives = open_archives(&marker, path, targets, source)?;
    if archives.is_empty() {
        return Err(Error::NoArchives {
            path: path.to_owned(),
            targets: rocm_kpack::target::join_targets(targets),
        });
    }
    let host = match split.machine {
        Machine::X86_64 => "host-x86_64-unknown-linux",
        Machine::Aarch64 => "host-aarch64-unknown-linux",
    };
    let mut report = Materialized {
        wrappers: split.wrappers.len(),
        archives: archives.iter().map(|a| a.path().to_owned()).collect(),
        ..Materialized::default()
    };
    let mut bundles = BTreeMap::new();
    let mut chosen = std::collections::BTreeSet::new();
    for wrapper in &split.wrappers {
        let key = format!("{}#{}", marker.kernel_name, wrapper.bundle);
        let code = code_objects(&archives, &key, targets)?;
        report.code_objects += code.len();
        report.empty += usize::from(code.is_empty());
        chosen.extend(code.keys().cloned());
        // Sorted by triple, as clang orders them.
        let mut entries: Vec<(String, &[u8])> = code
            .iter()
            .map(|(target, bytes)| (format!("hipv4-amdgcn-amd-amdhsa--{target}"), &bytes[..]))
            .collect();
        entries.sort();
        bundles.insert(
            wrapper.bundle,
            write_offload_bundle(host, &entries, CODE_ALIGN),
        );
    }
    report.targets = chosen.into_iter().collect();
    let out = materialize_elf(data, &split, &bundles).map_err(elf_error)?;
    Ok((out, report))
}

/// Whether code built for `code` is for one of the installed `targets`:
/// any feature variant of an installed processor, or its generic target.
fn wanted(code: &Target, targets: &[Target]) -> bool {
    targets.iter().any(|gpu| {
        code.processor() == gpu.processor()
            || gpu
                .generic()
                .is_some_and(|generic| generic.processor() == code.processor())
    })
}

/// The code objects for TOC key `key` that `targets` want, by target (the
/// first archive holding a target wins).
fn code_objects(
    archives: &[Archive],
    key: &str,
    targets: &[Target],
) -> Result<BTreeMap<Target, Vec<u8>>> {
    let mut code = BTreeMap::new();
    for archive in archives {
        let Some(held) = archive.targets_of(key) else {
            continue;
        };
        for target in held.filter(|t| wanted(t, targets)) {
            if !code.contains_key(target) {
                let bytes = archive.kernel(key, target)?.into_owned();
                code.insert(target.clone(), bytes);
            }
        }
    }
    Ok(code)
}

/// The archives to take code from, in the order they are searched.
fn open_archives(
    marker: &Marker,
    binary: &Path,
    targets: &[Target],
    source: &ArchiveSource,
) -> Result<Vec<Archive>> {
    let paths = match source {
        ArchiveSource::Marker => {
            let arches: Vec<Target> = targets.iter().flat_map(Target::selection_order).collect();
            Loader::new(LoaderConfig::default()).candidates(marker, binary, &arches)
        }
        ArchiveSource::Dir(dir) => {
            let mut paths: Vec<PathBuf> = fs_err::read_dir(dir)?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|path| path.extension().is_some_and(|e| e == "kpack"))
                .collect();
            paths.sort();
            paths
        }
    };
    let mut archives = Vec::new();
    for path in paths {
        match Archive::open(&path) {
            Ok(archive) => archives.push(archive),
            Err(rocm_kpack::Error::Open(error)) if error.kind() == std::io::ErrorKind::NotFound => {
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(archives)
}

//! One installed binary checked for each GPU the way its runtime loads it:
//! a split binary (`HIPK` wrappers and a kpack marker) through the
//! runtime's loader, every wrapper's bundle asked for with the GPU's arch
//! list as a HIP runtime passes it (its target, then its generic target);
//! a fat binary (`HIPF` wrappers, materialized ones included) by the
//! targets of the code objects in each wrapper's bundle, served when one
//! of them is in the GPU's selection order.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use kpack_binary::image::FatImage;
use kpack_binary::input::MappedFile;
use kpack_binary::sniff::{sniff, Sniffed};
use kpack_binary::BinaryFormat;
use kpack_error::one_line;
use kpack_gpu::Target;
use rocm_kpack::{Loader, Marker};

use super::report::Reason;

/// How a binary's device code reaches its runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinaryKind {
    Split,
    Fat,
}

/// Why one GPU would fail with one binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BinaryFailure {
    pub gpu: Target,
    pub reason: Reason,
    pub detail: String,
}

/// A binary checked for every GPU.
#[derive(Debug, Clone)]
pub(crate) struct BinaryCheck {
    pub kind: BinaryKind,
    /// The GPUs it fails for; empty when it serves them all.
    pub failures: Vec<BinaryFailure>,
}

/// Checks the file at `path` for `gpus`, naming files in details relative
/// to `root`; `None` when it is no split or fat binary (or not there).
pub(crate) fn check_binary(
    loader: &Loader,
    path: &Path,
    root: &Path,
    gpus: &[Target],
) -> Option<BinaryCheck> {
    if !is_binary_file(path) {
        return None;
    }
    let unreadable = |kind: BinaryKind, detail: String| {
        let failures = gpus
            .iter()
            .map(|gpu| BinaryFailure {
                gpu: gpu.clone(),
                reason: Reason::Unreadable,
                detail: detail.clone(),
            })
            .collect();
        Some(BinaryCheck { kind, failures })
    };
    let mapped = match MappedFile::open(path) {
        Ok(mapped) => mapped,
        Err(error) => return unreadable(BinaryKind::Split, error.to_string()),
    };
    match sniff(mapped.bytes(), path) {
        Ok(Sniffed::Split(split)) => {
            let bundles: BTreeSet<u32> = split.bundles.iter().copied().collect();
            let split = Split {
                loader,
                marker: &split.marker,
                path,
                root,
                bundles: &bundles,
            };
            let failures = gpus.iter().filter_map(|gpu| split.check(gpu)).collect();
            Some(BinaryCheck {
                kind: BinaryKind::Split,
                failures,
            })
        }
        Ok(Sniffed::Fat(fat)) => Some(BinaryCheck {
            kind: BinaryKind::Fat,
            failures: gpus.iter().filter_map(|gpu| check_fat(&fat, gpu)).collect(),
        }),
        Ok(Sniffed::Plain | Sniffed::NotBinary) => None,
        Err(kpack_binary::Error::ReadFat { source, .. }) => {
            unreadable(BinaryKind::Fat, source.to_string())
        }
        Err(error) => unreadable(BinaryKind::Split, one_line(&error)),
    }
}

/// Whether `path` is a regular file in a binary format.
fn is_binary_file(path: &Path) -> bool {
    fs_err::symlink_metadata(path).is_ok_and(|m| m.is_file())
        && BinaryFormat::of_path(path).is_ok_and(|format| format.is_some())
}

/// The arch list a HIP runtime passes the loader for `gpu`: its target,
/// then its generic target (the loader tries each one's feature-dropping
/// variants), the order of [`Target::selection_order`].
pub fn arch_list(gpu: &Target) -> Vec<Target> {
    let mut arches = vec![gpu.clone()];
    arches.extend(gpu.generic());
    arches
}

/// A split binary's wrappers, looked up through the loader.
struct Split<'a> {
    loader: &'a Loader,
    marker: &'a Marker,
    path: &'a Path,
    root: &'a Path,
    bundles: &'a BTreeSet<u32>,
}

impl Split<'_> {
    /// The first wrapper that fails for `gpu`, with how many fail.
    fn check(&self, gpu: &Target) -> Option<BinaryFailure> {
        let arches = arch_list(gpu);
        let mut failed = 0;
        let mut first = None;
        for &bundle in self.bundles {
            if let Err(error) = self.loader.locate(self.marker, self.path, bundle, &arches) {
                failed += 1;
                first.get_or_insert(error);
            }
        }
        let (reason, detail) = classify(&first?, self.root);
        let detail = if self.bundles.len() > 1 {
            format!("{failed} of {} wrappers: {detail}", self.bundles.len())
        } else {
            detail
        };
        Some(BinaryFailure {
            gpu: gpu.clone(),
            reason,
            detail,
        })
    }
}

/// The reason and the words for a loader's error.
fn classify(error: &rocm_kpack::Error, root: &Path) -> (Reason, String) {
    use rocm_kpack::Error;
    match error {
        Error::ArchiveNotFound { tried } => (
            Reason::ArchiveMissing,
            format!(
                "no archive its marker names is there (looked for {})",
                join(tried.iter().map(|p| shown(p, root)))
            ),
        ),
        Error::ArchNotFound { available, .. } => (
            Reason::TargetMissing,
            format!(
                "its archives hold code for other GPUs only ({})",
                join(available.iter().map(|(path, targets)| format!(
                    "{}: {}",
                    shown(path, root),
                    kpack_gpu::target::join_targets(targets)
                )))
            ),
        ),
        Error::KernelNotFoundAnywhere { binary, misses } => (
            Reason::KernelMissing,
            format!(
                "no archive for this GPU holds {binary} ({})",
                join(
                    misses
                        .iter()
                        .map(|(path, target)| format!("{} for {target}", shown(path, root)))
                )
            ),
        ),
        other => (Reason::Unreadable, one_line(other)),
    }
}

/// Why `gpu` fails with the fat binary `fat`: some wrapper's bundle holds
/// no code object for any target of its selection order.
fn check_fat(fat: &FatImage<'_>, gpu: &Target) -> Option<BinaryFailure> {
    let order = gpu.selection_order();
    let used: BTreeSet<usize> = fat.wrapper_bundles().into_iter().collect();
    let failing = used
        .iter()
        .filter_map(|&index| fat.bundles().get(index))
        .filter(|bundle| {
            !bundle
                .entries
                .iter()
                .any(|code| order.contains(&code.target))
        })
        .count();
    if failing == 0 {
        return None;
    }
    let mut held: Vec<Target> = fat
        .bundles()
        .iter()
        .flat_map(|bundle| bundle.entries.iter().map(|code| code.target.clone()))
        .collect();
    held.sort();
    held.dedup();
    let what = if held.is_empty() {
        "it holds no code object (made for no GPU)".to_owned()
    } else {
        format!(
            "it holds code for {} only",
            kpack_gpu::target::join_targets(&held)
        )
    };
    let detail = if used.len() > 1 {
        format!("{failing} of {} wrappers: {what}", used.len())
    } else {
        what
    };
    Some(BinaryFailure {
        gpu: gpu.clone(),
        reason: Reason::FatForOtherGpus,
        detail,
    })
}

/// `path` relative to `root` when it is under it, `..` taken lexically
/// (`lib/../.kpack/x.kpack` is `.kpack/x.kpack`), as a marker's relative
/// paths read.
pub fn shown(path: &Path, root: &Path) -> String {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir if normal.file_name().is_some() => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    let relative = normal.strip_prefix(root).unwrap_or(&normal);
    relative.display().to_string()
}

fn join(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arch_list_is_the_target_then_its_generic_target() {
        let names = |gpu: &str| -> Vec<String> {
            arch_list(&Target::parse(gpu).unwrap())
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(names("gfx1100"), ["gfx1100", "gfx11-generic"]);
        assert_eq!(names("gfx90a:sramecc+:xnack-"), ["gfx90a:sramecc+:xnack-"]);
    }

    #[test]
    fn loader_errors_are_classified_by_what_the_user_lacks() {
        let root = Path::new("/p");
        let (reason, detail) = classify(
            &rocm_kpack::Error::ArchiveNotFound {
                tried: vec![PathBuf::from("/p/.kpack/x_gfx1100.kpack")],
            },
            root,
        );
        assert_eq!(reason, Reason::ArchiveMissing);
        assert!(detail.contains(".kpack/x_gfx1100.kpack)"), "{detail}");
        let (reason, detail) = classify(
            &rocm_kpack::Error::ArchNotFound {
                requested: vec![Target::parse("gfx1100").unwrap()],
                available: vec![(
                    PathBuf::from("/p/.kpack/x_gfx1030.kpack"),
                    vec![Target::parse("gfx1030").unwrap()],
                )],
            },
            root,
        );
        assert_eq!(reason, Reason::TargetMissing);
        assert!(
            detail.contains(".kpack/x_gfx1030.kpack: gfx1030"),
            "{detail}"
        );
    }

    #[test]
    fn paths_are_shown_from_the_root_with_parent_steps_taken() {
        let root = Path::new("/p");
        assert_eq!(
            shown(Path::new("/p/lib/../.kpack/x.kpack"), root),
            ".kpack/x.kpack"
        );
        assert_eq!(shown(Path::new("/q/x.kpack"), root), "/q/x.kpack");
        assert_eq!(shown(Path::new("/p/a/./b"), root), "a/b");
    }
}

//! Kernel databases: the per-target files that rocBLAS, hipBLASLt,
//! hipSPARSELt, AOTriton, MIOpen, rocFFT, Composable Kernel,
//! hip-kernel-provider and RocJitsu keep beside their libraries,
//! recognised by their path in an install tree.
//!
//! Each library has a [`Recogniser`]: given a file's path relative to the
//! tree's root, it says whether the file belongs to the library's database
//! and, if so, whether it is shared (needed whatever the GPU, so it stays
//! in the host tree), device code for one full target, or device code for
//! every GPU of a sub-family or family (AOTriton's `amd-gfx11xx`, owned by
//! `gfx11`). File names spell targets with `-` where targets use `:`
//! (`Kernels.so-000-gfx90a-xnack-.hsaco` is for `gfx90a:xnack-`); the full
//! target is kept. Only processors the table of GPU facts knows count as
//! targets, so an unknown name is never routed: files no recogniser claims
//! stay in the host tree.
//!
//! The packer's tree split copies device files into payloads, one per
//! owner, or stores a target's files in the kpack archives; kpack-get's
//! `check` asks the same recognisers which files a GPU needs.

mod aotriton;
mod composable_kernel;
mod hip_kernel_provider;
mod hipblaslt;
mod hipsparselt;
mod miopen;
mod rocblas;
mod rocfft;
mod rocjitsu;
mod tensile;

use std::fmt;
use std::path::{Component, Path};

use kpack_gpu::gpus::PROCESSORS;
use kpack_gpu::{Owner, Target};

pub use aotriton::AoTriton;
pub use composable_kernel::ComposableKernel;
pub use hip_kernel_provider::HipKernelProvider;
pub use hipblaslt::HipBlasLt;
pub use hipsparselt::HipSparseLt;
pub use miopen::MiOpen;
pub use rocblas::RocBlas;
pub use rocfft::RocFft;
pub use rocjitsu::RocJitsu;

/// What a file of a library's database is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Needed whatever the GPU (Tensile's `TensileLibrary.dat`): stays in
    /// the host tree.
    Shared,
    /// Device code for one full target.
    Device {
        target: Target,
        /// The file's name within its library and target, the last part of
        /// its TOC key `<library>/<target>/<name>` when packed into an
        /// archive: the file name, or in layouts with a directory per
        /// target, the path below that directory (AOTriton's
        /// `flash/attn_fwd/....aks2`), which keeps keys unique.
        name: String,
    },
    /// Device code for every GPU of a sub-family or family: its payload is
    /// owned by that group, whatever GPUs a machine has of it.
    Group {
        owner: Owner,
        /// As for [`Role::Device`].
        name: String,
    },
}

/// Recognises one library's kernel database files by their path.
pub trait Recogniser: Send + Sync {
    /// The library's name (`rocblas`), which TOC keys and entry metadata
    /// carry.
    fn library(&self) -> &'static str;

    /// The artifact component its payloads are published as: `tensile`
    /// for the Tensile libraries (rocBLAS, hipBLASLt), else the library's
    /// name. A GPU installs one artifact per component, so libraries
    /// sharing a component share one payload per processor.
    fn component(&self) -> &'static str {
        self.library()
    }

    /// What the file at `path` (its components relative to the tree's
    /// root) is to this library; `None` when it is not part of its
    /// database.
    fn recognise(&self, path: &[&str]) -> Option<Role>;
}

/// A file a recogniser claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recognised {
    pub library: &'static str,
    pub component: &'static str,
    pub role: Role,
}

/// The recognisers a tree split asks, in order; the first to claim a file
/// decides.
pub struct Recognisers {
    list: Vec<Box<dyn Recogniser>>,
}

impl Recognisers {
    /// Every library this crate knows: rocBLAS, hipBLASLt, hipSPARSELt,
    /// AOTriton, MIOpen, rocFFT, Composable Kernel, hip-kernel-provider,
    /// RocJitsu.
    pub fn builtin() -> Recognisers {
        Recognisers::none()
            .with(RocBlas)
            .with(HipBlasLt)
            .with(HipSparseLt)
            .with(AoTriton)
            .with(MiOpen)
            .with(RocFft)
            .with(ComposableKernel)
            .with(HipKernelProvider)
            .with(RocJitsu)
    }

    /// None: every file is copied or split as it is.
    pub fn none() -> Recognisers {
        Recognisers { list: Vec::new() }
    }

    /// These recognisers and `recogniser` after them.
    pub fn with(mut self, recogniser: impl Recogniser + 'static) -> Recognisers {
        self.list.push(Box::new(recogniser));
        self
    }

    /// What the file at `relative` (relative to the tree's root) is, if a
    /// recogniser claims it. Paths that are not plain UTF-8 components are
    /// never claimed.
    pub fn recognise(&self, relative: &Path) -> Option<Recognised> {
        if self.list.is_empty() {
            return None;
        }
        let components = relative
            .components()
            .map(|c| match c {
                Component::Normal(name) => name.to_str(),
                _ => None,
            })
            .collect::<Option<Vec<&str>>>()?;
        self.list.iter().find_map(|recogniser| {
            recogniser.recognise(&components).map(|role| Recognised {
                library: recogniser.library(),
                component: recogniser.component(),
                role,
            })
        })
    }
}

impl Default for Recognisers {
    fn default() -> Self {
        Recognisers::builtin()
    }
}

impl fmt::Debug for Recognisers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.list.iter().map(|r| r.library()))
            .finish()
    }
}

/// Parses a target as file and directory names spell it: a processor, then
/// each feature after a `-` (`gfx90a`, `gfx90a-xnack-`,
/// `gfx942-sramecc+-xnack-`, `gfx1250-strict-xnack-`). Only processors of
/// the table of GPU facts, with features they have, count; the longest
/// processor name wins (`gfx1250-strict` over `gfx1250`).
pub fn target_in_name(text: &str) -> Option<Target> {
    let facts = PROCESSORS
        .iter()
        .filter(|p| {
            text.strip_prefix(p.name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
        })
        .max_by_key(|p| p.name.len())?;
    let processor = facts.name;
    let mut rest = &text[processor.len()..];
    let mut id = processor.to_owned();
    while !rest.is_empty() {
        rest = rest.strip_prefix('-')?;
        let name_len = rest.bytes().take_while(u8::is_ascii_alphanumeric).count();
        let sign = *rest.as_bytes().get(name_len)?;
        let known = match &rest[..name_len] {
            "xnack" => facts.xnack,
            "sramecc" => facts.sramecc,
            _ => false,
        };
        if !known || !matches!(sign, b'+' | b'-') {
            return None;
        }
        id.push(':');
        id.push_str(&rest[..=name_len]);
        rest = &rest[name_len + 1..];
    }
    Target::parse(&id).ok()
}

/// Where a name ends in a target (`TensileLibrary_gfx90a`,
/// `Kernels.so-000-gfx90a-xnack-`): the last `gfx` at the start or after
/// `_` or `-`. `None` when the name names no target at all; `Some(None)`
/// when it ends in something target-like that is not a known target.
fn target_suffix(stem: &str) -> Option<Option<Target>> {
    let at = stem
        .rmatch_indices("gfx")
        .map(|(at, _)| at)
        .find(|&at| at == 0 || matches!(stem.as_bytes().get(at - 1), Some(b'_') | Some(b'-')))?;
    Some(target_in_name(&stem[at..]))
}

/// The role of a file whose name may end in a target: device code for that
/// target, shared when it names none, and not claimed when it names an
/// unknown one.
fn role_by_suffix(stem: &str, file_name: &str) -> Option<Role> {
    match target_suffix(stem) {
        None => Some(Role::Shared),
        Some(Some(target)) => Some(Role::Device {
            target,
            name: file_name.to_owned(),
        }),
        Some(None) => None,
    }
}

/// Device code for the target a directory names (`gfx942`,
/// `amd-gfx942` without its prefix), named by the path below it.
fn role_below_target_dir(dir: &str, below: &[&str]) -> Option<Role> {
    if below.is_empty() {
        return None;
    }
    Some(Role::Device {
        target: target_in_name(dir)?,
        name: below.join("/"),
    })
}

/// The role of device code for `target` (as text) named `name`, for the
/// recognisers' tests.
#[cfg(test)]
fn device(target: &str, name: &str) -> Option<Role> {
    Some(Role::Device {
        target: Target::parse(target).ok()?,
        name: name.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Target {
        Target::parse(s).unwrap()
    }

    #[test]
    fn targets_in_names_keep_their_features() {
        assert_eq!(target_in_name("gfx90a"), Some(t("gfx90a")));
        assert_eq!(target_in_name("gfx90a-xnack-"), Some(t("gfx90a:xnack-")));
        assert_eq!(target_in_name("gfx90a-xnack+"), Some(t("gfx90a:xnack+")));
        assert_eq!(
            target_in_name("gfx942-sramecc+-xnack-"),
            Some(t("gfx942:sramecc+:xnack-"))
        );
        assert_eq!(target_in_name("gfx1100"), Some(t("gfx1100")));
        assert_eq!(target_in_name("gfx1250-strict"), Some(t("gfx1250-strict")));
        assert_eq!(target_in_name("gfx1250"), Some(t("gfx1250")));
    }

    #[test]
    fn unknown_processors_families_and_features_are_not_targets() {
        for text in [
            "gfx11xx",
            "gfx110x",
            "gfx9999",
            "gfx90a-xnack",
            "gfx90a-foo+",
            "gfx1100-xnack+",
            "gfx90a_",
            "gfx90a-",
            "",
            "amd-gfx90a",
            "gfx1250-strictly",
            "gfx1250-b0-a0",
        ] {
            assert_eq!(target_in_name(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_name_ends_in_a_target_after_a_separator() {
        assert_eq!(
            target_suffix("Kernels.so-000-gfx90a-xnack-"),
            Some(Some(t("gfx90a:xnack-")))
        );
        assert_eq!(
            target_suffix("TensileLibrary_Type_HH_fallback_gfx1100"),
            Some(Some(t("gfx1100")))
        );
        assert_eq!(target_suffix("TensileLibrary"), None);
        assert_eq!(target_suffix("TensileLibrary_gfx9999"), Some(None));
        assert_eq!(target_suffix("mygfx90a"), None);
    }

    #[test]
    fn the_builtin_recognisers_claim_files_by_library() {
        let recognisers = Recognisers::builtin();
        let found = recognisers
            .recognise(Path::new(
                "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/TensileLibrary_gfx90a.co",
            ))
            .unwrap();
        assert_eq!((found.library, found.component), ("rocblas", "tensile"));
        let found = recognisers
            .recognise(Path::new("share/miopen/db/gfx90a68.kdb"))
            .unwrap();
        assert_eq!((found.library, found.component), ("miopen", "miopen"));
        assert_eq!(recognisers.recognise(Path::new("usr/lib/libfoo.so")), None);
        assert_eq!(
            Recognisers::none().recognise(Path::new("share/miopen/db/gfx90a68.kdb")),
            None
        );
    }
}

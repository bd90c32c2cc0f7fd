//! Resolution: package requests to versions (dependencies included), and a
//! version's artifacts to the ones a machine's GPUs need (one of each
//! component of device code per GPU), with the reasons for each choice so
//! `kpack-get` can explain itself.

mod admitted;
mod versions;

use std::fmt;

use kpack_gpu::{Owner, Target};

use crate::families::Families;
use crate::schema::{Artifact, VersionEntry};
use crate::types::{Component, Listed, RelativePath};

pub use versions::{resolve, ResolveError, Resolved, Resolver};

/// Why an artifact was or was not chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Explanation {
    /// Host artifacts go to every machine.
    Host { path: RelativePath },
    /// Device code chosen for a GPU, its one artifact of `component`:
    /// `listed` (in the artifact's targets) covers `matched`, the `rank`-th
    /// entry of the GPU's selection order.
    Chosen {
        gpu: Target,
        path: RelativePath,
        component: Component,
        listed: Listed,
        matched: Target,
        rank: usize,
    },
    /// Another artifact of the same component served the same GPU at the
    /// same rank and is smaller.
    Smaller {
        gpu: Target,
        path: RelativePath,
        chosen: RelativePath,
    },
    /// Device code a sub-family or family owns, chosen once for the GPUs
    /// that belong to it.
    Owned {
        path: RelativePath,
        owner: Owner,
        gpus: Vec<Target>,
    },
    /// Device code a sub-family or family owns that none of the GPUs
    /// belongs to.
    NotOwned { path: RelativePath, owner: Owner },
    /// An artifact none of the GPUs can use.
    Incompatible {
        path: RelativePath,
        targets: Vec<Listed>,
    },
    /// A GPU the package has no device code for, in any component: it gets
    /// host parts only.
    NoDeviceCode { gpu: Target, offered: Vec<Listed> },
    /// A GPU other components serve, but not `component`, which the
    /// package offers for `offered` only.
    NoComponent {
        gpu: Target,
        component: Component,
        offered: Vec<Listed>,
    },
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Explanation::Host { path } => write!(f, "{path}: host part, needed on every machine"),
            Explanation::Chosen {
                gpu,
                path,
                component,
                listed,
                matched,
                rank,
            } => {
                // The default component goes unsaid, as in the index.
                let component = if component.is_default() {
                    String::new()
                } else {
                    format!("{component}, ")
                };
                if rank == &0 {
                    write!(f, "{path}: for {gpu} ({component}lists {listed})")
                } else {
                    write!(
                        f,
                        "{path}: for {gpu}, as {matched} ({component}lists {listed}; choice {} in its order)",
                        rank + 1
                    )
                }
            }
            Explanation::Owned { path, owner, gpus } => write!(
                f,
                "{path}: for {} (owned by {owner})",
                kpack_gpu::target::join_targets(gpus)
            ),
            Explanation::NotOwned { path, owner } => write!(
                f,
                "{path}: not needed (owned by {owner}, which none of these GPUs belongs to)"
            ),
            Explanation::Smaller { gpu, path, chosen } => {
                write!(f, "{path}: serves {gpu} too, but {chosen} is smaller")
            }
            Explanation::Incompatible { path, targets } => {
                write!(
                    f,
                    "{path}: not needed ({} run on none of these GPUs)",
                    join_listed(targets)
                )
            }
            Explanation::NoDeviceCode { gpu, offered } => write!(
                f,
                "{gpu}: no device code in this package (it has code for {}); host parts only",
                if offered.is_empty() {
                    "no GPU".to_owned()
                } else {
                    join_listed(offered)
                }
            ),
            Explanation::NoComponent {
                gpu,
                component,
                offered,
            } => write!(
                f,
                "{gpu}: no {component} in this package (it has {component} for {})",
                join_listed(offered)
            ),
        }
    }
}

/// Listed targets and families, as a list for people.
pub fn join_listed(listed: &[Listed]) -> String {
    listed
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The artifacts a machine needs from one package version.
#[derive(Debug, Clone)]
pub struct Selection<'a> {
    /// Host artifacts, then device artifacts, each once, in index order.
    pub artifacts: Vec<&'a Artifact>,
    pub explanations: Vec<Explanation>,
}

impl Selection<'_> {
    /// Total size of the chosen artifacts.
    pub fn size(&self) -> u64 {
        self.artifacts.iter().map(|a| a.size).sum()
    }
}

/// The targets an artifact lists (none for host code).
fn listed(artifact: &Artifact) -> Vec<Listed> {
    artifact.targets.clone().unwrap_or_default()
}

/// The artifact chosen for one GPU, and why.
struct Best<'a> {
    artifact: &'a Artifact,
    listed: Listed,
    matched: Target,
    rank: usize,
}

/// Along `gpu`'s selection order, the first target some artifact of
/// `device` (one component's) lists, served by the smallest such artifact
/// (the others are explained as passed over).
fn best_for<'a>(
    gpu: &Target,
    device: &[&'a Artifact],
    families: &Families,
    explanations: &mut Vec<Explanation>,
) -> Option<Best<'a>> {
    for (rank, candidate) in gpu.selection_order().into_iter().enumerate() {
        let mut matches: Vec<(&'a Artifact, Listed)> = device
            .iter()
            .filter_map(|artifact| {
                listed(artifact)
                    .into_iter()
                    .find(|name| families.covers(name, &candidate))
                    .map(|name| (*artifact, name))
            })
            .collect();
        matches.sort_by_key(|(artifact, _)| artifact.size);
        let mut matches = matches.into_iter();
        let Some((best, name)) = matches.next() else {
            continue;
        };
        for (other, _) in matches {
            let smaller = Explanation::Smaller {
                gpu: gpu.clone(),
                path: other.path.clone(),
                chosen: best.path.clone(),
            };
            if !explanations.contains(&smaller) {
                explanations.push(smaller);
            }
        }
        return Some(Best {
            artifact: best,
            listed: name,
            matched: candidate,
            rank,
        });
    }
    None
}

/// Chooses `version`'s artifacts for `gpus` (05-kpack-get.md, "Choosing
/// artifacts"): every host artifact; for each GPU and each component of
/// device code, along the GPU's selection order (full target,
/// feature-dropping variants, generic target), the first artifact of that
/// component listing a match, the smaller when two match equally. Each
/// artifact is chosen once, however many GPUs it serves.
pub fn select_artifacts<'a>(
    version: &'a VersionEntry,
    gpus: &[Target],
    families: &Families,
) -> Selection<'a> {
    let mut chosen: Vec<&'a Artifact> = Vec::new();
    let mut explanations = Vec::new();
    for artifact in version.artifacts.iter().filter(|a| !a.is_device()) {
        chosen.push(artifact);
        explanations.push(Explanation::Host {
            path: artifact.path.clone(),
        });
    }
    let device: Vec<&'a Artifact> = version
        .artifacts
        .iter()
        .filter(|a| a.is_device() && a.owner.is_none())
        .collect();
    let mut used = choose_owned(version, gpus, &mut explanations);
    for gpu in gpus {
        let owned: Vec<&Component> = used
            .iter()
            .filter(|a| a.owner.as_ref().is_some_and(|o| o.contains(gpu)))
            .filter_map(|a| a.component())
            .collect();
        for artifact in choose_for_gpu(gpu, &device, families, &owned, &mut explanations) {
            if !used.iter().any(|a| std::ptr::eq(*a, artifact)) {
                used.push(artifact);
            }
        }
    }
    explain_unneeded(&device, &mut explanations);
    // Index order, whatever order the GPUs were given in.
    for artifact in version.artifacts.iter().filter(|a| a.is_device()) {
        if used.iter().any(|a| std::ptr::eq(*a, artifact)) {
            chosen.push(artifact);
        }
    }
    Selection {
        artifacts: chosen,
        explanations,
    }
}

/// The artifacts a sub-family or family owns that some GPU belongs to, each
/// once for all of them; the others explained as not needed.
fn choose_owned<'a>(
    version: &'a VersionEntry,
    gpus: &[Target],
    explanations: &mut Vec<Explanation>,
) -> Vec<&'a Artifact> {
    let mut chosen = Vec::new();
    for artifact in &version.artifacts {
        let Some(owner) = &artifact.owner else {
            continue;
        };
        let members: Vec<Target> = gpus.iter().filter(|g| owner.contains(g)).cloned().collect();
        let path = artifact.path.clone();
        if members.is_empty() {
            let owner = owner.clone();
            explanations.push(Explanation::NotOwned { path, owner });
        } else {
            let owner = owner.clone();
            explanations.push(Explanation::Owned {
                path,
                owner,
                gpus: members,
            });
            chosen.push(artifact);
        }
    }
    chosen
}

/// The components of `device`, each once, in index order.
fn components<'a>(device: &[&'a Artifact]) -> Vec<&'a Component> {
    let mut components: Vec<&'a Component> = Vec::new();
    for component in device.iter().filter_map(|a| a.component()) {
        if !components.contains(&component) {
            components.push(component);
        }
    }
    components
}

/// One artifact of each component of `device` for `gpu`, with why; a
/// component without code for it is explained unless an artifact its
/// sub-family or family owns serves it (`owned`: their components), and a
/// GPU nothing serves gets host parts only. A GPU that leaves features of
/// its processor unsaid (`--target gfx90a`) runs in either mode of each,
/// so it gets one artifact of each component per mode
/// ([`Target::mode_variants`]): Debian's `gfx90a:xnack-` and
/// `gfx90a:xnack+` code alike.
fn choose_for_gpu<'a>(
    gpu: &Target,
    device: &[&'a Artifact],
    families: &Families,
    owned: &[&Component],
    explanations: &mut Vec<Explanation>,
) -> Vec<&'a Artifact> {
    let variants = gpu.mode_variants();
    let mut chosen: Vec<&'a Artifact> = Vec::new();
    let mut missing = Vec::new();
    for component in components(device) {
        let of_component: Vec<&'a Artifact> = device
            .iter()
            .filter(|a| a.component() == Some(component))
            .copied()
            .collect();
        let mut served = false;
        for variant in &variants {
            let Some(best) = best_for(variant, &of_component, families, explanations) else {
                continue;
            };
            served = true;
            if chosen.iter().any(|a| std::ptr::eq(*a, best.artifact)) {
                continue;
            }
            explanations.push(Explanation::Chosen {
                gpu: variant.clone(),
                path: best.artifact.path.clone(),
                component: component.clone(),
                listed: best.listed,
                matched: best.matched,
                rank: best.rank,
            });
            chosen.push(best.artifact);
        }
        if !served && !owned.contains(&component) {
            missing.push(Explanation::NoComponent {
                gpu: gpu.clone(),
                component: component.clone(),
                offered: of_component.iter().flat_map(|a| listed(a)).collect(),
            });
        }
    }
    if chosen.is_empty() && owned.is_empty() {
        explanations.push(Explanation::NoDeviceCode {
            gpu: gpu.clone(),
            offered: device.iter().flat_map(|a| listed(a)).collect(),
        });
    } else {
        explanations.extend(missing);
    }
    chosen
}

/// Explains each artifact that serves none of the GPUs, in any component.
fn explain_unneeded(device: &[&Artifact], explanations: &mut Vec<Explanation>) {
    for artifact in device {
        let serves_a_gpu = explanations.iter().any(|e| match e {
            Explanation::Chosen { path, .. } | Explanation::Smaller { path, .. } => {
                *path == artifact.path
            }
            _ => false,
        });
        if !serves_a_gpu {
            explanations.push(Explanation::Incompatible {
                path: artifact.path.clone(),
                targets: listed(artifact),
            });
        }
    }
}

//! How an installed package stands for one GPU, from its install record
//! (the GPUs it was installed for, its artifacts with their targets,
//! owners and components) and, when kept, its repository's index entry:
//! the artifacts an install for the GPU would choose (`select_artifacts`,
//! as `install --dry-run --offline` computes them) against those installed.

use kpack_gpu::{Owner, Target};
use kpack_repo_index::{select_artifacts, Artifact, Families, Listed};

use super::index::Indexed;
use crate::install::record::{InstalledArtifact, InstalledPackage};

/// A package's standing for one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Coverage<'a> {
    /// What an install for the GPU would choose is installed (without the
    /// index: some installed device code serves it, or none is installed).
    Covered,
    /// Installed for other GPUs, or without one: nothing installed serves it.
    OtherGpus { installed_for: Vec<Target> },
    /// Installed for it, but without these artifacts an install would choose.
    Lacking(Vec<&'a Artifact>),
    /// The installed version has no device code for it; it offers these.
    NotPublished { offered: Vec<Listed> },
}

/// Whether device code listed for `targets`, or owned by `owner`, runs on
/// `gpu`: some target of its selection order is listed (directly or
/// through a family), or it belongs to the owner.
pub fn serves(
    targets: Option<&[Listed]>,
    owner: Option<&Owner>,
    gpu: &Target,
    families: &Families,
) -> bool {
    if let Some(owner) = owner {
        return owner.contains(gpu);
    }
    let Some(targets) = targets else {
        return false;
    };
    gpu.selection_order().iter().any(|candidate| {
        targets
            .iter()
            .any(|listed| families.covers(listed, candidate))
    })
}

fn is_device(artifact: &InstalledArtifact) -> bool {
    artifact.targets.is_some() || artifact.owner.is_some()
}

/// How `package` stands for `gpu`, judged by its kept index entry when
/// there is one, else by its record.
pub(crate) fn coverage<'a>(
    package: &InstalledPackage,
    gpu: &Target,
    indexed: Option<&'a Indexed>,
) -> Coverage<'a> {
    let builtin;
    let families = match indexed {
        Some(indexed) => &indexed.families,
        None => {
            builtin = Families::builtin();
            &builtin
        }
    };
    let installed: Vec<&InstalledArtifact> =
        package.artifacts.iter().filter(|a| is_device(a)).collect();
    let any_serves = installed
        .iter()
        .any(|a| serves(a.targets.as_deref(), a.owner.as_ref(), gpu, families));
    let other_gpus = || Coverage::OtherGpus {
        installed_for: package.targets.clone(),
    };
    let Some(indexed) = indexed else {
        return if installed.is_empty() || any_serves {
            Coverage::Covered
        } else {
            other_gpus()
        };
    };
    let selection = select_artifacts(&indexed.entry, std::slice::from_ref(gpu), families);
    let wanted: Vec<&Artifact> = selection
        .artifacts
        .into_iter()
        .filter(|a| a.is_device())
        .collect();
    if wanted.is_empty() {
        let offered = indexed.entry.offered();
        let has_device = indexed.entry.artifacts.iter().any(Artifact::is_device);
        return if has_device {
            Coverage::NotPublished { offered }
        } else {
            Coverage::Covered
        };
    }
    let lacking: Vec<&Artifact> = wanted
        .iter()
        .copied()
        .filter(|a| {
            let installed = a.installed().sha256;
            !package.artifacts.iter().any(|i| i.sha256 == installed)
        })
        .collect();
    if lacking.is_empty() {
        Coverage::Covered
    } else if lacking.len() == wanted.len() && !any_serves {
        other_gpus()
    } else {
        Coverage::Lacking(lacking)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Target {
        Target::parse(text).unwrap()
    }

    fn listed(list: &[&str]) -> Vec<Listed> {
        list.iter().map(|l| l.parse().unwrap()).collect()
    }

    #[test]
    fn device_code_serves_the_gpus_its_targets_families_or_owner_cover() {
        let families = Families::builtin();
        let gfx90a = t("gfx90a:sramecc+:xnack-");
        assert!(serves(Some(&listed(&["gfx90a"])), None, &gfx90a, &families));
        assert!(serves(
            Some(&listed(&["gfx90a:xnack-"])),
            None,
            &gfx90a,
            &families
        ));
        assert!(!serves(
            Some(&listed(&["gfx90a:xnack+"])),
            None,
            &gfx90a,
            &families
        ));
        assert!(!serves(
            Some(&listed(&["gfx1030"])),
            None,
            &gfx90a,
            &families
        ));
        assert!(serves(
            Some(&listed(&["gfx110X-all"])),
            None,
            &t("gfx1101"),
            &families
        ));
        let gfx11: Owner = "gfx11".parse().unwrap();
        assert!(serves(None, Some(&gfx11), &t("gfx1151"), &families));
        assert!(!serves(None, Some(&gfx11), &t("gfx1030"), &families));
        assert!(!serves(None, None, &gfx90a, &families));
    }
}

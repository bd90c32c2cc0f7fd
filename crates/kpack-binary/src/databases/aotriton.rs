//! AOTriton's kernel images.
//!
//! Follows the torch ROCm wheels' `torch/lib/aotriton.images/amd-<gfx>/`
//! (`__signature__`, `flash/attn_fwd/FONLY__..._<gfx>.aks2`, ...) and
//! `.../aotriton/kernels/<gfx>/...` of source builds: everything below a
//! directory naming one processor is that processor's. AOTriton's group
//! directories serve every GPU of a sub-family or family (the torch
//! wheels' RDNA attention kernels: `amd-gfx11xx` for gfx11, `amd-gfx120x`
//! for gfx12_0), so their files go into a payload that group owns
//! (07-gpu-targets.md, "Packaging levels"). A group directory of another
//! name is not routed and stays in the host tree.

use kpack_gpu::Owner;

use super::{role_below_target_dir, Recogniser, Role};

/// AOTriton's group directories (without `amd-`) and the owners they map
/// to, as ROCm's reference handler maps them.
const GROUP_DIRS: &[(&str, &str)] = &[
    ("gfx11xx", "gfx11"),
    ("gfx110x", "gfx110x"),
    ("gfx115x", "gfx115x"),
    ("gfx120x", "gfx12_0"),
];

/// What a file below the image directory `dir` (without `amd-`) is: a
/// processor's, a group's, or nothing of AOTriton's.
fn role_below_image_dir(dir: &str, below: &[&str]) -> Option<Role> {
    let group = GROUP_DIRS.iter().find(|(name, _)| *name == dir);
    match group {
        Some((_, owner)) if !below.is_empty() => Some(Role::Group {
            owner: Owner::parse(owner).ok()?,
            name: below.join("/"),
        }),
        Some(_) => None,
        None => role_below_target_dir(dir, below),
    }
}

/// AOTriton: component `aotriton`.
#[derive(Debug, Clone, Copy, Default)]
pub struct AoTriton;

impl Recogniser for AoTriton {
    fn library(&self) -> &'static str {
        "aotriton"
    }

    fn recognise(&self, path: &[&str]) -> Option<Role> {
        (0..path.len()).find_map(|at| match &path[at..] {
            ["aotriton.images", dir, below @ ..] => {
                role_below_image_dir(dir.strip_prefix("amd-")?, below)
            }
            ["aotriton", "kernels", dir, below @ ..] => role_below_target_dir(dir, below),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::databases::device;

    fn role(path: &str) -> Option<Role> {
        AoTriton.recognise(&path.split('/').collect::<Vec<_>>())
    }

    #[test]
    fn routes_the_torch_wheels_images_by_processor() {
        let images = "torch/lib/aotriton.images";
        assert_eq!(
            role(&format!("{images}/amd-gfx942/__signature__")),
            device("gfx942", "__signature__")
        );
        let kernel = "flash/attn_fwd/FONLY__\u{ff0a}bf16@16_256_F_F_3_0___gfx942.aks2";
        assert_eq!(
            role(&format!("{images}/amd-gfx942/{kernel}")),
            device("gfx942", kernel)
        );
        assert_eq!(
            role(&format!(
                "{images}/amd-gfx90a/flash/bwd_kernel_dk_dv/x.aks2"
            )),
            device("gfx90a", "flash/bwd_kernel_dk_dv/x.aks2")
        );
    }

    #[test]
    fn routes_source_build_kernels_by_target() {
        assert_eq!(
            role("lib/aotriton/kernels/gfx1100/flash_attention_fwd.hsaco"),
            device("gfx1100", "flash_attention_fwd.hsaco")
        );
        assert_eq!(
            role("lib/aotriton/kernels/gfx90a-xnack+/fwd.hsaco"),
            device("gfx90a:xnack+", "fwd.hsaco")
        );
    }

    fn group(owner: &str, name: &str) -> Option<Role> {
        Some(Role::Group {
            owner: Owner::parse(owner).unwrap(),
            name: name.to_owned(),
        })
    }

    #[test]
    fn routes_group_directories_to_their_sub_family_or_family() {
        let images = "torch/lib/aotriton.images";
        for (dir, owner) in [
            ("amd-gfx11xx", "gfx11"),
            ("amd-gfx110x", "gfx110x"),
            ("amd-gfx115x", "gfx115x"),
            ("amd-gfx120x", "gfx12_0"),
        ] {
            assert_eq!(
                role(&format!("{images}/{dir}/flash/attn_fwd/kernel.aks2")),
                group(owner, "flash/attn_fwd/kernel.aks2"),
                "{dir}"
            );
        }
        assert_eq!(
            role(&format!("{images}/amd-gfx120x/flash/flyc_attn_fwd.zip")),
            group("gfx12_0", "flash/flyc_attn_fwd.zip")
        );
    }

    #[test]
    fn leaves_unknown_groups_and_other_layouts_alone() {
        for path in [
            "torch/lib/aotriton.images/amd-gfx125x/flash/attn_fwd/x.aks2",
            "torch/lib/aotriton.images/amd-common/flash/kernel.aks2",
            "torch/lib/aotriton.images/amd-gfx11xx",
            "torch/lib/aotriton.images/gfx942/flash/x.aks2",
            "torch/lib/aotriton.images/amd-gfx942",
            "torch/lib/aotriton/amd-gfx942/flash/x.aks2",
            "torch/lib/libaotriton_v2.so",
            "lib/aotriton/kernels/gfx942",
        ] {
            assert_eq!(role(path), None, "{path}");
        }
    }
}

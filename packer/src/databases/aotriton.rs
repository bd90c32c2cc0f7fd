//! AOTriton's kernel images.
//!
//! Follows the torch ROCm wheels' `torch/lib/aotriton.images/amd-<gfx>/`
//! (`__signature__`, `flash/attn_fwd/FONLY__..._<gfx>.aks2`, ...) and
//! `.../aotriton/kernels/<gfx>/...` of source builds: everything below a
//! directory naming one processor is that processor's. AOTriton's family
//! directories (`amd-gfx11xx`, `amd-gfx120x`) serve several processors, so
//! they are not routed and stay in the host tree.

use super::{role_below_target_dir, Recogniser, Role};

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
                role_below_target_dir(dir.strip_prefix("amd-")?, below)
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

    #[test]
    fn leaves_families_and_other_layouts_alone() {
        for path in [
            "torch/lib/aotriton.images/amd-gfx11xx/flash/attn_fwd/x.aks2",
            "torch/lib/aotriton.images/amd-gfx120x/flash/flyc_attn_fwd.zip",
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

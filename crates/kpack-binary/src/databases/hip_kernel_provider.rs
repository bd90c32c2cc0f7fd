//! hip-kernel-provider's engine content for hipDNN.
//!
//! Follows ROCm's reference handler (rocm-systems `shared/kpack`): hipDNN
//! plugins keep each kernel producer's per-target content below
//! `engines/arch_content/` (and `engines/test_arch_content/` for tests),
//! as `lib/hipdnn_plugins/engines/arch_content/<producer>/.../<gfx>/...`
//! (`kernels_gfx942.kpack`, `descriptor.json`, anything deeper). The first
//! directory below the anchor that names a target decides; a file with
//! none (`config/settings.json`) is the producer's, for every GPU.

use super::{role_below_target_dir, target_in_name, Recogniser, Role};

/// hip-kernel-provider: component `hip-kernel-provider`.
#[derive(Debug, Clone, Copy, Default)]
pub struct HipKernelProvider;

/// The directories below `engines/` that hold per-target content.
const ANCHORS: [&str; 2] = ["arch_content", "test_arch_content"];

impl Recogniser for HipKernelProvider {
    fn library(&self) -> &'static str {
        "hip-kernel-provider"
    }

    fn recognise(&self, path: &[&str]) -> Option<Role> {
        let anchor =
            (1..path.len()).find(|&at| ANCHORS.contains(&path[at]) && path[at - 1] == "engines")?;
        let below = &path[anchor + 1..];
        // Directories only: the last component is the file.
        let (_, dirs) = below.split_last()?;
        let at = dirs.iter().position(|dir| target_in_name(dir).is_some())?;
        role_below_target_dir(dirs[at], &below[at + 1..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::databases::device;

    fn role(path: &str) -> Option<Role> {
        HipKernelProvider.recognise(&path.split('/').collect::<Vec<_>>())
    }

    const PRODUCER: &str = "lib/hipdnn_plugins/engines/arch_content/some-producer";

    #[test]
    fn routes_content_below_a_target_directory() {
        for (below, target, name) in [
            (
                "gfx942/kernels_gfx942.kpack",
                "gfx942",
                "kernels_gfx942.kpack",
            ),
            (
                "gfx942/kernels_gfx942.json",
                "gfx942",
                "kernels_gfx942.json",
            ),
            ("gfx942/sub/extra/blob.bin", "gfx942", "sub/extra/blob.bin"),
            (
                "gfx90a/kernels_gfx90a.kpack",
                "gfx90a",
                "kernels_gfx90a.kpack",
            ),
            (
                "gfx1151/kernels_gfx1151.kpack",
                "gfx1151",
                "kernels_gfx1151.kpack",
            ),
            (
                "gfx942-xnack+/kernels_gfx942-xnack+.kpack",
                "gfx942:xnack+",
                "kernels_gfx942-xnack+.kpack",
            ),
            (
                "gfx1250-strict/kernels.kpack",
                "gfx1250-strict",
                "kernels.kpack",
            ),
        ] {
            assert_eq!(
                role(&format!("{PRODUCER}/{below}")),
                device(target, name),
                "{below}"
            );
        }
        for (path, target) in [
            ("lib/hipdnn_plugins/engines/arch_content/aiter/gfx942/kernels.kpack", "gfx942"),
            ("lib/hipdnn_plugins/engines/arch_content/gfx942/kernels.kpack", "gfx942"),
            ("lib/hipdnn_plugins/engines/test_arch_content/gfx1101/kernels.kpack", "gfx1101"),
            (
                "lib/hipdnn_plugins/engines/arch_content/hip-kernel-provider/rocke/gfx942/kernels.kpack",
                "gfx942",
            ),
            (
                "lib/hipdnn_plugins/engines/test_arch_content/hip-kernel-provider/unit/shared/gfx1101/kernels.kpack",
                "gfx1101",
            ),
        ] {
            assert_eq!(role(path), device(target, path.rsplit('/').next().unwrap()), "{path}");
        }
    }

    #[test]
    fn leaves_shared_and_foreign_content_alone() {
        for path in [
            "lib/hipdnn_plugins/engines/test_arch_content/some-producer/test_kpack_binary/test_zstd.kpack",
            "share/some_component/test_arch_content/gfx942/data.bin",
            "lib/hipdnn_plugins/engines/arch_content/some-producer/config/settings.json",
            "lib/hipdnn_plugins/engines/arch_content/some-producer/common/shared.json",
            "lib/hipdnn_plugins/engines/other/gfx942/blob.bin",
            "bin/hip_kernel_provider/rocke/instances/gfx942/wmma_gemm.py",
            "share/some_component/arch_content/gfx942/data.bin",
            "lib/arch_content/gfx942/kernels_gfx942.kpack",
            "lib/hipdnn_plugins/engines/arch_content/p/gfx11-generic/k.kpack",
            "lib/hipdnn_plugins/engines/arch_content/p/gfx1250-b0-a0/k.kpack",
            "lib/hipdnn_plugins/engines/arch_content/p/gfx942",
        ] {
            assert_eq!(role(path), None, "{path}");
        }
    }
}

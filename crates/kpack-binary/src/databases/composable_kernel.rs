//! Composable Kernel's per-target static libraries.
//!
//! Follows ROCm's reference handler (rocm-systems `shared/kpack`): CK's
//! convolution instances are built into one static library per target,
//! `libdevice_conv_operations_<gfx>[_xnackp|_xnack_|_srameccp|...].a`
//! (`.lib` on Windows), the target's `:` `+` `-` spelt `_` `p` `_`, beside
//! the unified `libdevice_conv_operations.a` that every GPU's build links
//! (shared). A library serves its processor whatever the feature settings
//! in its name, so the target is the bare processor
//! (`gfx1250_strict` is `gfx1250-strict`).

use kpack_gpu::gpus::PROCESSORS;
use kpack_gpu::Target;

use super::{Recogniser, Role};

/// Composable Kernel: component `composablekernel`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ComposableKernel;

/// The per-target libraries' stem before the target.
const STEM: &str = "device_conv_operations";

impl Recogniser for ComposableKernel {
    fn library(&self) -> &'static str {
        "composablekernel"
    }

    fn recognise(&self, path: &[&str]) -> Option<Role> {
        let file = *path.last()?;
        let base = file
            .strip_suffix(".a")
            .or_else(|| file.strip_suffix(".lib"))?;
        let rest = base
            .strip_prefix("lib")
            .unwrap_or(base)
            .strip_prefix(STEM)?;
        if rest.is_empty() {
            return Some(Role::Shared);
        }
        let spelt = rest.strip_prefix('_')?;
        let processor = PROCESSORS
            .iter()
            .filter(|p| {
                spelt
                    .strip_prefix(&p.name.replace('-', "_"))
                    .is_some_and(is_feature_suffix)
            })
            .max_by_key(|p| p.name.len())?;
        Some(Role::Device {
            target: Target::bare(processor.name).ok()?,
            name: file.to_owned(),
        })
    }
}

/// Whether `rest` is a run of sanitized feature settings: `_xnackp`,
/// `_xnack_`, `_srameccp`, `_sramecc_`.
fn is_feature_suffix(mut rest: &str) -> bool {
    while !rest.is_empty() {
        let Some(after) = rest
            .strip_prefix("_xnack")
            .or_else(|| rest.strip_prefix("_sramecc"))
        else {
            return false;
        };
        let Some(after) = after.strip_prefix('p').or_else(|| after.strip_prefix('_')) else {
            return false;
        };
        rest = after;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::databases::device;

    fn role(path: &str) -> Option<Role> {
        ComposableKernel.recognise(&path.split('/').collect::<Vec<_>>())
    }

    #[test]
    fn routes_each_targets_library_to_its_processor() {
        for (file, target) in [
            ("libdevice_conv_operations_gfx942.a", "gfx942"),
            ("libdevice_conv_operations_gfx950_xnackp.a", "gfx950"),
            ("libdevice_conv_operations_gfx90a_xnack_.a", "gfx90a"),
            (
                "libdevice_conv_operations_gfx942_srameccp_xnack_.a",
                "gfx942",
            ),
            (
                "libdevice_conv_operations_gfx1250_strict.a",
                "gfx1250-strict",
            ),
            (
                "libdevice_conv_operations_gfx1250_strict_xnackp.a",
                "gfx1250-strict",
            ),
            ("libdevice_conv_operations_gfx1250.a", "gfx1250"),
            ("libdevice_conv_operations_gfx1100.a", "gfx1100"),
            ("device_conv_operations_gfx942.lib", "gfx942"),
            (
                "device_conv_operations_gfx1250_strict.lib",
                "gfx1250-strict",
            ),
        ] {
            let path = format!("opt/rocm/lib/{file}");
            assert_eq!(role(&path), device(target, file), "{file}");
        }
    }

    #[test]
    fn the_unified_library_is_shared_and_others_are_not_claimed() {
        assert_eq!(role("lib/libdevice_conv_operations.a"), Some(Role::Shared));
        for file in [
            "libdevice_conv_operations_foo.a",
            "libdevice_conv_operations_xnack.a",
            "libdevice_conv_operations_gfx11_generic.a",
            "libdevice_gemm_operations_gfx942.a",
            "libdevice_conv_operations_gfx942.so",
            "libdevice_conv_operations_gfx942.a.bak",
            "libdevice_conv_operations_gfx942.lib.a",
            "xlibdevice_conv_operations_gfx942.a",
            "libMIOpen.a",
        ] {
            assert_eq!(role(&format!("lib/{file}")), None, "{file}");
        }
    }
}

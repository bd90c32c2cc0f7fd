//! What detection tells beside the targets, so that its answer explains
//! itself: a product name and whether a GPU is integrated from the GPU
//! table when no source names it, the visibility variables sysfs cannot
//! honour, and why HSA failed on a machine whose driver is loaded.

use std::collections::BTreeMap;

use kpack_env::EnvVars;

use super::hsa::{HsaError, HSA_STATUS_ERROR_OUT_OF_RESOURCES};
use super::Gpu;

/// The variables that hide GPUs from programs, in the order the runtime
/// applies them: HSA's, then HIP's, then the name HIP also reads.
pub(crate) const VISIBILITY: [&str; 3] = [
    EnvVars::ROCR_VISIBLE_DEVICES,
    EnvVars::HIP_VISIBLE_DEVICES,
    EnvVars::CUDA_VISIBLE_DEVICES,
];

/// The visibility variables set in this process's environment, by name.
pub(crate) fn visibility_from_environment() -> BTreeMap<String, String> {
    VISIBILITY
        .iter()
        .filter_map(|name| {
            let value = std::env::var_os(name)?;
            Some(((*name).to_owned(), value.to_string_lossy().into_owned()))
        })
        .collect()
}

/// The note for GPUs listed from sysfs while visibility variables are
/// set: the kernel's topology lists every GPU, also those programs will
/// not see. `None` when none is set.
pub(crate) fn visibility_ignored(variables: &BTreeMap<String, String>) -> Option<String> {
    let set: Vec<String> = VISIBILITY
        .iter()
        .filter_map(|name| {
            let value = variables.get(*name)?;
            let aside = if *name == EnvVars::CUDA_VISIBLE_DEVICES {
                " (which HIP reads when HIP_VISIBLE_DEVICES is unset)"
            } else {
                ""
            };
            Some(format!("{name}={value}{aside}"))
        })
        .collect();
    if set.is_empty() {
        return None;
    }
    Some(format!(
        "sysfs: {} set, which HSA and HIP honour but the kernel's topology does not: \
         every GPU is listed, also any those variables hide from programs",
        set.join(", ")
    ))
}

/// The warning for `hsa_init` failing with 0x1008 while the kernel driver
/// lists `sysfs_gpus` GPUs: the driver is loaded, so this user most likely
/// may not open `/dev/kfd`. `None` otherwise.
pub(crate) fn kfd_denied(error: Option<&HsaError>, sysfs_gpus: usize) -> Option<String> {
    let denied = matches!(
        error,
        Some(HsaError::InitFailed { status, .. }) if *status == HSA_STATUS_ERROR_OUT_OF_RESOURCES
    );
    if !denied || sysfs_gpus == 0 {
        return None;
    }
    Some(format!(
        "hsa_init failed with {HSA_STATUS_ERROR_OUT_OF_RESOURCES:#x} (HSA_STATUS_ERROR_OUT_OF_RESOURCES) \
         though the amdgpu driver lists {sysfs_gpus} GPU{}: this user most likely may not open /dev/kfd, \
         so ROCm programs will not run either; add the user to the render group (and video, which older \
         systems use): `sudo usermod -aG render,video $USER`, then log in again",
        if sysfs_gpus == 1 { "" } else { "s" }
    ))
}

/// `gpus` with what the GPU table knows of each chip (the processor an
/// override replaced, not the one it runs as): whether it is integrated,
/// and its product when no source named it.
pub(crate) fn described(gpus: Vec<Gpu>) -> Vec<Gpu> {
    gpus.into_iter()
        .map(|mut gpu| {
            let chip = gpu.overridden.as_ref().map_or(&gpu.target, |o| &o.chip);
            let Some(processor) = kpack_gpu::gpus::processor(chip.processor()) else {
                return gpu;
            };
            gpu.integrated = processor.is_integrated();
            if gpu.product.is_none() && !processor.product.is_empty() {
                gpu.product = Some(processor.product.to_owned());
            }
            gpu
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_variables_are_named_in_the_runtimes_order() {
        let variables = BTreeMap::from([
            ("CUDA_VISIBLE_DEVICES".to_owned(), "1".to_owned()),
            ("ROCR_VISIBLE_DEVICES".to_owned(), "0,1".to_owned()),
        ]);
        assert_eq!(
            visibility_ignored(&variables).as_deref(),
            Some(
                "sysfs: ROCR_VISIBLE_DEVICES=0,1, CUDA_VISIBLE_DEVICES=1 (which HIP reads when \
                 HIP_VISIBLE_DEVICES is unset) set, which HSA and HIP honour but the kernel's \
                 topology does not: every GPU is listed, also any those variables hide from programs"
            )
        );
        assert_eq!(visibility_ignored(&BTreeMap::new()), None);
    }

    #[test]
    fn only_0x1008_with_the_driver_loaded_suggests_the_render_group() {
        let failed = |status| HsaError::InitFailed { status, text: None };
        let warning = kfd_denied(Some(&failed(0x1008)), 2).unwrap();
        assert!(warning.contains("render group"), "{warning}");
        assert!(warning.contains("lists 2 GPUs"), "{warning}");
        assert_eq!(kfd_denied(Some(&failed(0x1008)), 0), None);
        assert_eq!(kfd_denied(Some(&failed(0x1000)), 2), None);
        assert_eq!(kfd_denied(None, 2), None);
    }
}

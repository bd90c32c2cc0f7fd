//! hipBLASLt's TensileLite kernel database.
//!
//! Follows ROCm's `lib/hipblaslt/library/` (ROCm 6.x and TheRock builds):
//! `TensileLibrary_<problem type>_<gfx>.co|.dat`,
//! `TensileLiteLibrary_lazy_<gfx>.dat`, `extop_<gfx>.co`,
//! `Kernels.so-000-<gfx>[-xnack+|-xnack-].hsaco`, and the shared
//! `hipblasltTransform.hsaco`, `hipblasltExtOpLibrary.dat` and
//! `TensileLiteLibrary_lazy_Mapping.dat`; a directory per target below
//! `library/` is that target's.

use super::{tensile, Recogniser, Role};

/// hipBLASLt: component `tensile`, like rocBLAS.
#[derive(Debug, Clone, Copy, Default)]
pub struct HipBlasLt;

impl Recogniser for HipBlasLt {
    fn library(&self) -> &'static str {
        "hipblaslt"
    }

    fn component(&self) -> &'static str {
        "tensile"
    }

    fn recognise(&self, path: &[&str]) -> Option<Role> {
        tensile::recognise(
            path,
            "hipblaslt",
            &[
                "TensileLibrary",
                "TensileLiteLibrary",
                "Kernels.so-",
                "extop_",
                "hipblaslt",
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::databases::device;

    const DIR: &str = "opt/rocm/lib/hipblaslt/library";

    fn role(file: &str) -> Option<Role> {
        let path = format!("{DIR}/{file}");
        HipBlasLt.recognise(&path.split('/').collect::<Vec<_>>())
    }

    #[test]
    fn routes_rocms_hipblaslt_library() {
        for (file, target) in [
            ("Kernels.so-000-gfx1100.hsaco", "gfx1100"),
            ("Kernels.so-000-gfx942-xnack+.hsaco", "gfx942:xnack+"),
            ("Kernels.so-000-gfx942-xnack-.hsaco", "gfx942:xnack-"),
            ("extop_gfx1100.co", "gfx1100"),
            ("extop_gfx942.co", "gfx942"),
            (
                "TensileLibrary_BB_BB_HA_Bias_Aux_SAV_UA_Type_BB_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx1100.co",
                "gfx1100",
            ),
            (
                "TensileLibrary_BB_BB_HA_Bias_Aux_SAV_UA_Type_BB_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx1100.dat",
                "gfx1100",
            ),
            ("TensileLiteLibrary_lazy_gfx942.dat", "gfx942"),
        ] {
            assert_eq!(role(file), device(target, file), "{file}");
        }
    }

    #[test]
    fn keeps_the_shared_files_in_the_host_tree() {
        for file in [
            "hipblasltTransform.hsaco",
            "hipblasltExtOpLibrary.dat",
            "TensileLiteLibrary_lazy_Mapping.dat",
        ] {
            assert_eq!(role(file), Some(Role::Shared), "{file}");
        }
    }

    #[test]
    fn leaves_unknown_files_alone() {
        for file in [
            "TensileManifest.txt",
            "extop_gfx9999.co",
            "libfoo_gfx942.so",
            "extop_gfx942.json",
        ] {
            assert_eq!(role(file), None, "{file}");
        }
        let rocblas = "opt/rocm/lib/rocblas/library/extop_gfx942.co";
        assert_eq!(
            HipBlasLt.recognise(&rocblas.split('/').collect::<Vec<_>>()),
            None
        );
    }
}

//! hipSPARSELt's Tensile kernel database.
//!
//! Follows ROCm's `lib/hipsparselt/library/` as ROCm's reference handler
//! describes it (rocm-systems `shared/kpack`): flat files named after their
//! target (`extop_gfx942.co`, `Kernels.so-000-gfx950.hsaco`,
//! `TensileLibrary_BB_BB_A_gfx942.dat`), a directory per target below
//! `library/` (rocm-libraries#5976: `gfx950/TensileLibrary_..._fallback.dat`),
//! and shared files naming no target.

use super::{tensile, Recogniser, Role};

/// hipSPARSELt: component `tensile`, like rocBLAS and hipBLASLt.
#[derive(Debug, Clone, Copy, Default)]
pub struct HipSparseLt;

impl Recogniser for HipSparseLt {
    fn library(&self) -> &'static str {
        "hipsparselt"
    }

    fn component(&self) -> &'static str {
        "tensile"
    }

    fn recognise(&self, path: &[&str]) -> Option<Role> {
        tensile::recognise(
            path,
            "hipsparselt",
            &["TensileLibrary", "Kernels.so-", "extop_", "hipsparselt"],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::databases::device;

    const DIR: &str = "opt/rocm/lib/hipsparselt/library";

    fn role(file: &str) -> Option<Role> {
        let path = format!("{DIR}/{file}");
        HipSparseLt.recognise(&path.split('/').collect::<Vec<_>>())
    }

    #[test]
    fn routes_flat_and_per_target_files() {
        for (file, target) in [
            ("extop_gfx942.co", "gfx942"),
            ("Kernels.so-000-gfx950.hsaco", "gfx950"),
            ("TensileLibrary_BB_BB_A_gfx942.dat", "gfx942"),
            ("Kernels.so-000-gfx942-xnack+.hsaco", "gfx942:xnack+"),
            ("TensileLibrary_gfx1250-strict.dat", "gfx1250-strict"),
        ] {
            assert_eq!(role(file), device(target, file), "{file}");
        }
        assert_eq!(
            role("gfx950/TensileLibrary_BB_BB_A_fallback.dat"),
            device("gfx950", "TensileLibrary_BB_BB_A_fallback.dat")
        );
    }

    #[test]
    fn shared_and_foreign_files() {
        assert_eq!(
            role("TensileLibrary_BB_BB_A_fallback.dat"),
            Some(Role::Shared)
        );
        assert_eq!(role("TensileLibrary.dat"), Some(Role::Shared));
        for file in ["something_gfx942.so", "TensileLibrary_gfx1100.txt"] {
            assert_eq!(role(file), None, "{file}");
        }
        let path = "opt/rocm/lib/rocblas/library/TensileLibrary_gfx942.dat";
        assert_eq!(
            HipSparseLt.recognise(&path.split('/').collect::<Vec<_>>()),
            None
        );
    }
}

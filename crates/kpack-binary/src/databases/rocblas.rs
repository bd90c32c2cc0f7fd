//! rocBLAS's Tensile kernel database.
//!
//! Follows Debian 13's `librocblas0` 5.5.1 (`usr/lib/x86_64-linux-gnu/
//! rocblas/2.47.0/library/`: `TensileLibrary_<gfx>.co`,
//! `Kernels.so-000-<gfx>[-xnack+|-xnack-].hsaco` and the shared
//! `TensileLibrary.dat`) and ROCm's lazy-loading layout
//! (`lib/rocblas/library/`: `TensileLibrary_lazy_<gfx>.dat`,
//! `TensileLibrary_Type_..._<gfx>.co|.dat`,
//! `TensileLibrary_Type_..._fallback_<gfx>.hsaco` and the shared
//! `TensileLibrary_Type_..._fallback.dat`); a directory per target below
//! `library/` is that target's.

use super::{tensile, Recogniser, Role};

/// rocBLAS: component `tensile`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RocBlas;

impl Recogniser for RocBlas {
    fn library(&self) -> &'static str {
        "rocblas"
    }

    fn component(&self) -> &'static str {
        "tensile"
    }

    fn recognise(&self, path: &[&str]) -> Option<Role> {
        tensile::recognise(path, "rocblas", &["TensileLibrary", "Kernels.so-"])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::databases::device;

    /// Every file of Debian 13's `librocblas0_5.5.1+dfsg-7_amd64.deb`
    /// (`dpkg-deb -c`), directories left out.
    const DEBIAN_LIBROCBLAS0: &[&str] = &[
        "usr/lib/x86_64-linux-gnu/librocblas.so.0.1",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/Kernels.so-000-gfx1010.hsaco",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/Kernels.so-000-gfx1030.hsaco",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/Kernels.so-000-gfx1100.hsaco",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/Kernels.so-000-gfx1101.hsaco",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/Kernels.so-000-gfx1102.hsaco",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/Kernels.so-000-gfx803.hsaco",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/Kernels.so-000-gfx900.hsaco",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/Kernels.so-000-gfx906.hsaco",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/Kernels.so-000-gfx908.hsaco",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/Kernels.so-000-gfx90a-xnack+.hsaco",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/Kernels.so-000-gfx90a-xnack-.hsaco",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/TensileLibrary.dat",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/TensileLibrary_gfx1030.co",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/TensileLibrary_gfx1100.co",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/TensileLibrary_gfx1101.co",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/TensileLibrary_gfx1102.co",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/TensileLibrary_gfx803.co",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/TensileLibrary_gfx900.co",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/TensileLibrary_gfx906.co",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/TensileLibrary_gfx908.co",
        "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library/TensileLibrary_gfx90a.co",
        "usr/share/doc/librocblas0/changelog.Debian.gz",
        "usr/share/doc/librocblas0/changelog.gz",
        "usr/share/doc/librocblas0/copyright",
        "usr/share/lintian/overrides/librocblas0",
        "usr/lib/x86_64-linux-gnu/librocblas.so.0",
    ];

    fn role(path: &str) -> Option<Role> {
        RocBlas.recognise(&path.split('/').collect::<Vec<_>>())
    }

    /// What each file of the real package must be: the target its name
    /// ends in for the library directory's code objects, shared for the
    /// solution index, not claimed for everything else.
    fn expected(path: &str) -> Option<Role> {
        let (dir, file) = path.rsplit_once('/').unwrap();
        if !dir.ends_with("rocblas/2.47.0/library") {
            return None;
        }
        if file == "TensileLibrary.dat" {
            return Some(Role::Shared);
        }
        let stem = file
            .strip_suffix(".hsaco")
            .or_else(|| file.strip_suffix(".co"))
            .unwrap();
        let gfx = &stem[stem.find("gfx").unwrap()..];
        device(&gfx.replacen("-x", ":x", 1), file)
    }

    #[test]
    fn routes_every_file_of_debians_librocblas0() {
        let mut devices = 0;
        for path in DEBIAN_LIBROCBLAS0 {
            let role = role(path);
            assert_eq!(role, expected(path), "{path}");
            devices += usize::from(matches!(role, Some(Role::Device { .. })));
        }
        assert_eq!(devices, 20);
    }

    #[test]
    fn keeps_xnack_variants_apart() {
        let dir = "usr/lib/x86_64-linux-gnu/rocblas/2.47.0/library";
        let plus = "Kernels.so-000-gfx90a-xnack+.hsaco";
        let minus = "Kernels.so-000-gfx90a-xnack-.hsaco";
        assert_eq!(
            role(&format!("{dir}/{plus}")),
            device("gfx90a:xnack+", plus)
        );
        assert_eq!(
            role(&format!("{dir}/{minus}")),
            device("gfx90a:xnack-", minus)
        );
        assert_eq!(
            role(&format!("{dir}/TensileLibrary_gfx90a.co")),
            device("gfx90a", "TensileLibrary_gfx90a.co")
        );
    }

    #[test]
    fn routes_rocms_lazy_loading_layout() {
        let dir = "opt/rocm/lib/rocblas/library";
        for (file, role_of) in [
            ("TensileLibrary_lazy_gfx942.dat", Some("gfx942")),
            (
                "TensileLibrary_Type_HH_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx942.co",
                Some("gfx942"),
            ),
            (
                "TensileLibrary_Type_HH_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx942.dat",
                Some("gfx942"),
            ),
            (
                "TensileLibrary_Type_4xi8I_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_fallback_gfx1100.hsaco",
                Some("gfx1100"),
            ),
            ("Kernels.so-000-gfx942.hsaco", Some("gfx942")),
            (
                "TensileLibrary_Type_4xi8I_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_fallback.dat",
                None,
            ),
        ] {
            let expected = match role_of {
                Some(target) => device(target, file),
                None => Some(Role::Shared),
            };
            assert_eq!(role(&format!("{dir}/{file}")), expected, "{file}");
        }
        assert_eq!(
            role(&format!("{dir}/gfx942/TensileLibrary_Type_HH_fallback.dat")),
            device("gfx942", "TensileLibrary_Type_HH_fallback.dat")
        );
    }

    #[test]
    fn leaves_unknown_files_and_other_directories_alone() {
        for path in [
            "opt/rocm/lib/rocblas/library/TensileManifest.txt",
            "opt/rocm/lib/rocblas/library/TensileLibrary_gfx9999.co",
            "opt/rocm/lib/rocblas/library/notes_gfx90a.co",
            "opt/rocm/lib/rocblas/library/gfx11xx/TensileLibrary.co",
            "opt/rocm/lib/other/library/TensileLibrary_gfx90a.co",
            "opt/rocm/lib/hipblaslt/library/TensileLibrary_gfx90a.co",
            "opt/rocm/lib/rocblas/TensileLibrary_gfx90a.co",
        ] {
            assert_eq!(role(path), None, "{path}");
        }
    }
}

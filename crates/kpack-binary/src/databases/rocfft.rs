//! rocFFT's precompiled kernel cache.
//!
//! rocFFT 1.0.37 (ROCm 7) splits its ahead-of-time kernel cache into one
//! SQLite file per target, `rocfft_kernel_cache_<gfx>.db`, installed where
//! the single `rocfft_kernel_cache.db` of earlier releases was:
//! `lib/rocfft/` (ROCm, TheRock) or beside `librocfft.so` (Fedora's
//! `%{_libdir}`). The single file holds every target's kernels, so it is
//! shared. Debian's `librocfft0` 6.1.2 ships no cache at all (it compiles
//! kernels at run time); the per-target names come from rocFFT's changelog,
//! not from a package listing, so only that exact name is routed.

use super::{target_in_name, Recogniser, Role};

/// rocFFT: component `rocfft`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RocFft;

impl Recogniser for RocFft {
    fn library(&self) -> &'static str {
        "rocfft"
    }

    fn recognise(&self, path: &[&str]) -> Option<Role> {
        let (file, dirs) = path.split_last()?;
        let in_place = match dirs {
            [.., "rocfft"] | [.., "rocfft", _] => true,
            [.., dir] => *dir == "lib" || *dir == "lib64" || dir.ends_with("-linux-gnu"),
            [] => false,
        };
        let stem = file.strip_suffix(".db")?;
        if !in_place {
            return None;
        }
        match stem.strip_prefix("rocfft_kernel_cache")? {
            "" => Some(Role::Shared),
            rest => Some(Role::Device {
                target: target_in_name(rest.strip_prefix('_')?)?,
                name: (*file).to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::databases::device;

    fn role(path: &str) -> Option<Role> {
        RocFft.recognise(&path.split('/').collect::<Vec<_>>())
    }

    #[test]
    fn routes_the_per_target_kernel_caches() {
        for path in [
            "opt/rocm/lib/rocfft/rocfft_kernel_cache_gfx950.db",
            "usr/lib64/rocfft_kernel_cache_gfx950.db",
            "usr/lib/x86_64-linux-gnu/rocfft/1.0.37/rocfft_kernel_cache_gfx950.db",
        ] {
            let expected = device("gfx950", "rocfft_kernel_cache_gfx950.db");
            assert_eq!(role(path), expected, "{path}");
        }
        assert_eq!(
            role("opt/rocm/lib/rocfft/rocfft_kernel_cache_gfx1201.db"),
            device("gfx1201", "rocfft_kernel_cache_gfx1201.db")
        );
    }

    #[test]
    fn keeps_the_single_cache_in_the_host_tree() {
        assert_eq!(
            role("opt/rocm/lib/rocfft/rocfft_kernel_cache.db"),
            Some(Role::Shared)
        );
    }

    #[test]
    fn leaves_debians_package_and_other_files_alone() {
        for path in [
            "usr/lib/x86_64-linux-gnu/librocfft.so.0.1",
            "usr/lib/x86_64-linux-gnu/rocfft/1.0.27/rocfft_rtc_helper",
            "home/user/.cache/rocFFT/rocfft_kernel_cache_gfx950.db",
            "opt/rocm/lib/rocfft/rocfft_kernel_cache_gfx9999.db",
            "opt/rocm/lib/rocfft/rocfft_kernel_cache_old.db",
            "opt/rocm/lib/rocfft/rocfft_kernel_cachegfx950.db",
        ] {
            assert_eq!(role(path), None, "{path}");
        }
    }
}

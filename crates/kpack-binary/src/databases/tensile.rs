//! The Tensile naming scheme rocBLAS and hipBLASLt share: a `library/`
//! directory of code objects (`.co`, `.hsaco`) and their solution indexes
//! (`.dat`), each named after the target it is for, or after none when
//! every GPU needs it.

use super::{role_below_target_dir, role_by_suffix, Role};

/// Extensions of Tensile's database files.
const EXTENSIONS: [&str; 3] = ["co", "dat", "hsaco"];

/// The components after `<owner>/library/` or `<owner>/<one directory,
/// usually a version>/library/` (Debian installs rocBLAS's as
/// `rocblas/2.47.0/library`, ROCm's as `rocblas/library`).
fn below_library<'a>(path: &'a [&'a str], owner: &str) -> Option<&'a [&'a str]> {
    (0..path.len()).rev().find_map(|at| {
        if path[at] != owner {
            return None;
        }
        let after = &path[at + 1..];
        match after {
            ["library", rest @ ..] if !rest.is_empty() => Some(rest),
            [_, "library", rest @ ..] if !rest.is_empty() => Some(rest),
            _ => None,
        }
    })
}

/// What a file under `<owner>/[<version>/]library/` is: a file named with
/// one of `prefixes` and a Tensile extension is device code for the target
/// its name ends in, or shared when it names none; everything below a
/// directory named like a target (`library/gfx942/...`) is that target's.
pub(super) fn recognise(path: &[&str], owner: &str, prefixes: &[&str]) -> Option<Role> {
    match below_library(path, owner)? {
        [file] => {
            let (stem, extension) = file.rsplit_once('.')?;
            let known = EXTENSIONS.contains(&extension)
                && prefixes.iter().any(|prefix| stem.starts_with(prefix));
            if !known {
                return None;
            }
            role_by_suffix(stem, file)
        }
        [dir, below @ ..] => role_below_target_dir(dir, below),
        [] => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(path: &str) -> Vec<&str> {
        path.split('/').collect()
    }

    #[test]
    fn the_library_directory_is_found_with_or_without_a_version() {
        for (path, rest) in [
            ("rocblas/library/a.co", Some(vec!["a.co"])),
            ("usr/lib/rocblas/2.47.0/library/a.co", Some(vec!["a.co"])),
            (
                "opt/rocm/lib/rocblas/library/gfx942/a.co",
                Some(vec!["gfx942", "a.co"]),
            ),
            ("rocblas/a/b/library/a.co", None),
            ("rocblas/library", None),
            ("other/library/a.co", None),
        ] {
            let path = split(path);
            assert_eq!(
                below_library(&path, "rocblas").map(<[&str]>::to_vec),
                rest,
                "{path:?}"
            );
        }
    }
}

//! Whether a HIP runtime loads compressed offload bundles (CCOB, clang's
//! `--offload-compress`): those from ROCm 6.2 on do (08-hip-runtimes.md).
//! Told from the library itself: its soname's major version (7 and later),
//! or the HIP version string it carries (`6.2.41133`, 6.2 and later).
//! Nothing found is no: a runtime that cannot be told gets plain bundles.

use std::fmt;
use std::path::Path;

use serde::Serialize;

use super::elf::{for_each_chunk, DynamicInfo};
use super::HipRuntimeError;

/// The first runtime version that loads compressed bundles.
const FIRST: (u32, u32) = (6, 2);
/// The first soname major version that does.
const FIRST_SONAME_MAJOR: u32 = 7;
/// Digits of a HIP version's build number (`6.2.41133`).
const BUILD_DIGITS: usize = 5;

/// What says a runtime loads compressed bundles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CompressedBundles {
    /// Its soname's major version is 7 or later.
    Soname { soname: String },
    /// It carries a HIP version string of 6.2 or later.
    HipVersion { version: String },
}

impl fmt::Display for CompressedBundles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompressedBundles::Soname { soname } => write!(f, "its soname is {soname}"),
            CompressedBundles::HipVersion { version } => write!(f, "it is HIP {version}"),
        }
    }
}

/// Whether the runtime at `path` (with dynamic entries `info`) loads
/// compressed bundles, and why.
pub(super) fn compressed_bundles(
    path: &Path,
    info: &DynamicInfo,
) -> Result<Option<CompressedBundles>, HipRuntimeError> {
    if let Some(soname) = &info.soname {
        if soname_major(soname).is_some_and(|major| major >= FIRST_SONAME_MAJOR) {
            return Ok(Some(CompressedBundles::Soname {
                soname: soname.clone(),
            }));
        }
    }
    let mut newest: Option<(u32, u32, String)> = None;
    for_each_chunk(path, &info.read_only, 32, |chunk| {
        for found in hip_versions(chunk) {
            if newest
                .as_ref()
                .is_none_or(|n| (found.0, found.1) > (n.0, n.1))
            {
                newest = Some(found);
            }
        }
    })?;
    Ok(newest
        .filter(|&(major, minor, _)| (major, minor) >= FIRST)
        .map(|(_, _, version)| CompressedBundles::HipVersion { version }))
}

/// The major version of a soname `libamdhip64.so.<major>[...]`.
fn soname_major(soname: &str) -> Option<u32> {
    let rest = soname.split_once(".so.")?.1;
    rest.split('.').next()?.parse().ok()
}

/// Every `<major>.<minor>.<build>` in `bytes` whose build number has five
/// digits (HIP's version strings: `6.2.41133`), standing on its own (no
/// digit or dot right before or after it).
fn hip_versions(bytes: &[u8]) -> Vec<(u32, u32, String)> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if !bytes[at].is_ascii_digit() || (at > 0 && is_version_byte(bytes[at - 1])) {
            at += 1;
            continue;
        }
        let end = bytes[at..]
            .iter()
            .position(|&b| !is_version_byte(b))
            .map_or(bytes.len(), |n| at + n);
        if let Some(version) = parse_version(&bytes[at..end]) {
            found.push(version);
        }
        at = end;
    }
    found
}

fn is_version_byte(byte: u8) -> bool {
    byte.is_ascii_digit() || byte == b'.'
}

/// `<major>.<minor>.<build>` with a five-digit build, all of `text`.
fn parse_version(text: &[u8]) -> Option<(u32, u32, String)> {
    let text = std::str::from_utf8(text).ok()?;
    let mut parts = text.split('.');
    let (major, minor, build) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || build.len() != BUILD_DIGITS || major.len() > 2 || minor.len() > 2 {
        return None;
    }
    Some((major.parse().ok()?, minor.parse().ok()?, text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sonames_give_their_major_version() {
        assert_eq!(soname_major("libamdhip64.so.7"), Some(7));
        assert_eq!(soname_major("libamdhip64.so.6.2.41133"), Some(6));
        assert_eq!(soname_major("libamdhip64.so"), None);
    }

    #[test]
    fn hip_versions_are_found_on_their_own_with_five_digit_builds() {
        let text = b"x\x006.2.41133-dd7f95766\x00v5.2.21153 1.2.3 10.0.12345.6 7.0.1234 6.3.42131";
        let found: Vec<String> = hip_versions(text).into_iter().map(|v| v.2).collect();
        assert_eq!(found, ["6.2.41133", "5.2.21153", "6.3.42131"]);
    }
}

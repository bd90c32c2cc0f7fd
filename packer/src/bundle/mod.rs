//! Offload bundles in a `.hip_fatbin` section: one per translation unit,
//! back to back with zero padding between them, each either a clang
//! offload bundle or a compressed bundle (CCOB) holding one.

#[cfg(feature = "test-fixtures")]
pub mod build;
mod ccob;
mod offload;

use std::borrow::Cow;

use rocm_kpack::Target;

use crate::error::BundleError;

pub use ccob::{ccob_hash, CcobHeader, CcobMethod};
pub(crate) use offload::write_zeros;
pub use offload::{OffloadBundleLayout, OFFLOAD_BUNDLE_MAGIC};

/// One device code object out of a bundle.
#[derive(Debug, Clone)]
pub struct CodeObject<'a> {
    /// The bundle entry's triple (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+`).
    pub triple: String,
    /// The target it was compiled for.
    pub target: Target,
    /// Its bytes: borrowed from the section, or owned when decompressed.
    pub bytes: Cow<'a, [u8]>,
}

/// How a bundle is stored in the section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleKind {
    /// A clang offload bundle.
    Uncompressed,
    /// A compressed bundle (`CCOB`) of this header version and method.
    Compressed { version: u16, method: CcobMethod },
}

/// One bundle of a `.hip_fatbin` section.
#[derive(Debug, Clone)]
pub struct Bundle<'a> {
    /// Offset of the bundle's first byte in the section; wrappers point here.
    pub offset: usize,
    /// Bytes the bundle occupies in the section (padding excluded).
    pub len: usize,
    pub kind: BundleKind,
    /// Its device code objects, host entries left out, in entry order.
    pub code_objects: Vec<CodeObject<'a>>,
}

/// Splits a `.hip_fatbin` section into its bundles, in section order (the
/// order that numbers them for `#N` TOC keys).
pub fn parse_fatbin(section: &[u8]) -> Result<Vec<Bundle<'_>>, BundleError> {
    let mut bundles = Vec::new();
    let mut at = 0;
    // Zero padding aligns each bundle; it is not part of either.
    while let Some(skip) = section[at..].iter().position(|&b| b != 0) {
        at += skip;
        let rest = &section[at..];
        let bundle = if rest.starts_with(OFFLOAD_BUNDLE_MAGIC) {
            let (code_objects, len) = offload::parse_borrowed(rest, at)?;
            Bundle {
                offset: at,
                len,
                kind: BundleKind::Uncompressed,
                code_objects,
            }
        } else if rest.starts_with(ccob::CCOB_MAGIC) {
            let (header, payload_len, decompressed) = ccob::decompress(rest, at)?;
            let code_objects = offload::parse_all_owned(&decompressed, at)?;
            Bundle {
                offset: at,
                len: header.header_len() + payload_len,
                kind: BundleKind::Compressed {
                    version: header.version,
                    method: header.method,
                },
                code_objects,
            }
        } else {
            return Err(BundleError::UnknownData {
                offset: at,
                found: rest.iter().take(8).copied().collect(),
            });
        };
        check_unique_targets(&bundle)?;
        at += bundle.len;
        bundles.push(bundle);
    }
    Ok(bundles)
}

/// A wrapper selects a bundle and the runtime a target within it, so one
/// bundle cannot hold two code objects for the same target.
fn check_unique_targets(bundle: &Bundle<'_>) -> Result<(), BundleError> {
    for (i, code_object) in bundle.code_objects.iter().enumerate() {
        if bundle.code_objects[..i]
            .iter()
            .any(|c| c.target == code_object.target)
        {
            return Err(BundleError::DuplicateTarget {
                offset: bundle.offset,
                target: code_object.target.to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;

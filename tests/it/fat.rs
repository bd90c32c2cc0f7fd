//! The fat libraries of the flows that build packages: one bundle with a
//! code object for each target, registered with the HIP runtime when
//! loaded, as a HIP library is (built by `kpack_test_support::fat`).

use std::path::Path;

use kpack_binary::bundle::build::offload_bundle;
use kpack_test_support::fat::FatLibrary;

pub use kpack_test_support::fat::host_library;

/// Builds `library` (soname `soname`): its `.hip_fatbin` holds one bundle
/// with each `(target, code object)` of `codes`, registered with the
/// stand-in HIP runtime built in `work`.
pub fn fat_library(work: &Path, library: &Path, soname: &str, codes: &[(String, Vec<u8>)]) {
    let triples: Vec<(String, &[u8])> = codes
        .iter()
        .map(|(target, bytes)| {
            (
                format!("hipv4-amdgcn-amd-amdhsa--{target}"),
                bytes.as_slice(),
            )
        })
        .collect();
    let entries: Vec<(&str, &[u8])> = triples.iter().map(|(t, b)| (t.as_str(), *b)).collect();
    FatLibrary::new(offload_bundle(&entries))
        .soname(soname)
        .registered(work)
        .compile(library);
}

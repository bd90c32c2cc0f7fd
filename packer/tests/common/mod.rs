//! Helpers for the packer's integration tests: fixtures, the runtime's C
//! library, the stand-in HIP runtime and binutils' view of split files, all
//! from the workspace's test-support crate.
#![allow(unused_imports, dead_code)]

pub use kpack_test_support::elf_checks::*;
pub use kpack_test_support::hip::*;
pub use kpack_test_support::{fixtures, run, unpack_rocrand};

/// Compiles the shared library `library` whose `.hip_fatbin` holds exactly
/// `bundle` (aligned to `align` bytes when given), with one wrapper whose
/// pointer is the C expression `pointer` over the bundle array `b` (`b`,
/// or `b + 8` for a wrapper into the middle of it).
pub fn compile_fat_library(
    library: &std::path::Path,
    bundle: &[u8],
    align: Option<usize>,
    pointer: &str,
) {
    let bytes: Vec<String> = bundle.iter().map(|b| b.to_string()).collect();
    let align = align.map_or(String::new(), |a| format!(", aligned({a})"));
    let source = library.with_extension("c");
    fs_err::write(
        &source,
        format!(
            "#include <stdint.h>\n\
             struct w {{ uint32_t m; uint32_t v; const void* p; void* r; }};\n\
             __attribute__((section(\".hip_fatbin\"){align}, used)) static const unsigned char b[] = {{{}}};\n\
             __attribute__((section(\".hipFatBinSegment\"), aligned(8), used)) static struct w wr = {{ 0x48495046u, 1u, {pointer}, 0 }};\n",
            bytes.join(",")
        ),
    )
    .expect("writing the C source");
    run(kpack_test_support::tool("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(library)
        .arg(&source));
    fs_err::remove_file(&source).expect("removing the C source");
}

/// Each bundle's code objects by target, in section order, of the fat ELF
/// file `data`.
pub fn code_by_bundle(data: &[u8]) -> Vec<std::collections::BTreeMap<rocm_kpack::Target, Vec<u8>>> {
    kpack_packer::elf::FatElf::parse(data)
        .expect("a readable ELF file")
        .expect("a fat binary")
        .bundles
        .iter()
        .map(|bundle| {
            bundle
                .code_objects()
                .expect("readable code objects")
                .iter()
                .map(|c| (c.target.clone(), c.bytes.to_vec()))
                .collect()
        })
        .collect()
}

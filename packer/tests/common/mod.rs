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

/// The targets of [`compile_big_library`]'s bundles.
pub const BIG_TARGETS: [&str; 4] = ["gfx90a", "gfx942", "gfx1100", "gfx1201"];
/// Its compressed bundles, one wrapper each.
pub const BIG_BUNDLES: usize = 16;
/// Each code object's size: 16 bundles x 4 targets x 32 MiB = 2 GiB of
/// device code once decompressed.
pub const BIG_CODE_LEN: u64 = 32 << 20;

/// The 4 KiB block the code object of `bundle` for `BIG_TARGETS[target]`
/// repeats: its own, so no two code objects are alike, and repeated, so
/// gigabytes compress to little.
pub fn big_block(bundle: usize, target: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ ((bundle as u64) << 8 | target as u64);
    (0..4096)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect()
}

/// The SHA-256 of the code object of `bundle` for `BIG_TARGETS[target]`.
pub fn big_code_sha256(bundle: usize, target: usize) -> [u8; 32] {
    use sha2::Digest;
    let block = big_block(bundle, target);
    let mut hasher = sha2::Sha256::new();
    for _ in 0..BIG_CODE_LEN / 4096 {
        hasher.update(&block);
    }
    hasher.finalize().into()
}

/// Compiles the shared library `library`, whose `.hip_fatbin` holds
/// [`BIG_BUNDLES`] compressed bundles (CCOB v3, zstd) of 2 GiB of device
/// code in all, each with a wrapper; the file itself stays a few
/// megabytes. The bundles are made as streams, never whole in memory. A
/// constructor registers every wrapper with the HIP runtime in `standin`.
pub fn compile_big_library(library: &std::path::Path, standin: &std::path::Path) {
    use kpack_packer::bundle::build::ccob_streamed;
    use kpack_packer::bundle::{CcobMethod, OffloadBundleLayout};
    use std::fmt::Write;
    let dir = library.parent().expect("the library's directory");
    let triples: Vec<String> = BIG_TARGETS
        .iter()
        .map(|t| format!("hipv4-amdgcn-amd-amdhsa--{t}"))
        .collect();
    let mut assembly = String::from(".section .hip_fatbin,\"a\",@progbits\n");
    for bundle in 0..BIG_BUNDLES {
        let layout = OffloadBundleLayout::plan(
            "host-x86_64-unknown-linux-gnu",
            triples.iter().map(|t| (t.as_str(), BIG_CODE_LEN)),
            4096,
        );
        let ccob = ccob_streamed(3, CcobMethod::Zstd, layout.len(), |out| {
            layout.write(out, |target, write| {
                let block = big_block(bundle, target);
                for _ in 0..BIG_CODE_LEN / 4096 {
                    write(&block)?;
                }
                Ok::<(), std::io::Error>(())
            })
        });
        let path = dir.join(format!("bundle{bundle}.ccob"));
        fs_err::write(&path, ccob).expect("writing a bundle");
        let _ = write!(
            assembly,
            ".p2align 12\n.Lb{bundle}:\n.incbin \"{}\"\n",
            path.display()
        );
    }
    assembly.push_str(".section .hipFatBinSegment,\"aw\",@progbits\n.p2align 3\n");
    let mut register = String::new();
    for bundle in 0..BIG_BUNDLES {
        let _ = write!(
            assembly,
            ".globl big_wrapper{bundle}\n.hidden big_wrapper{bundle}\nbig_wrapper{bundle}:\n\
             .long 0x48495046\n.long 1\n.quad .Lb{bundle}\n.quad 0\n"
        );
        let _ = writeln!(
            register,
            "extern char big_wrapper{bundle}[]; __hipRegisterFatBinary(big_wrapper{bundle});"
        );
    }
    assembly.push_str(".section .note.GNU-stack,\"\",@progbits\n");
    let source = dir.join("big.s");
    fs_err::write(&source, assembly).expect("writing the assembly");
    let constructor = dir.join("register.c");
    fs_err::write(
        &constructor,
        format!(
            "void **__hipRegisterFatBinary(const void *);\n\
             __attribute__((constructor)) static void register_all(void) {{\n{register}}}\n"
        ),
    )
    .expect("writing the constructor");
    run(kpack_test_support::tool("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(library)
        .arg(&source)
        .arg(&constructor)
        .arg(format!("-L{}", standin.display()))
        .arg("-l:libamdhip64.so.5"));
    for bundle in 0..BIG_BUNDLES {
        fs_err::remove_file(dir.join(format!("bundle{bundle}.ccob"))).expect("removing a bundle");
    }
}

//! Shared libraries as ROCm packages ship them, for the flows that build
//! packages: fat ones, whose `.hip_fatbin` a HIP runtime registers, and
//! host-only ones.

use std::path::Path;

use kpack_packer::bundle::build::offload_bundle;
use kpack_test_support::{run, tool};

/// Builds `library` (soname `soname`): its `.hip_fatbin` holds one bundle
/// with each `(target, code object)` of `codes`, and one wrapper points at
/// it that its constructor registers with the HIP runtime, as a HIP
/// library does. It is linked against a stand-in `libamdhip64.so.5`.
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
    let bundle = offload_bundle(&entries);
    let bytes: Vec<String> = bundle.iter().map(u8::to_string).collect();
    let source = work.join(format!("{soname}.c"));
    fs_err::write(
        &source,
        format!(
            "#include <stdint.h>\n\
             struct w {{ uint32_t m; uint32_t v; const void* p; void* r; }};\n\
             __attribute__((section(\".hip_fatbin\"), used)) static const unsigned char b[] = {{{}}};\n\
             __attribute__((section(\".hipFatBinSegment\"), aligned(8), used)) static struct w wr = {{ 0x48495046u, 1u, b, 0 }};\n\
             void** __hipRegisterFatBinary(const void*);\n\
             __attribute__((constructor)) static void register_code(void) {{ __hipRegisterFatBinary(&wr); }}\n",
            bytes.join(",")
        ),
    )
    .unwrap();
    // Linked against a HIP runtime (`libamdhip64.so.5`, as Debian's
    // libraries are): the stand-in, which a test replaces when it loads
    // the library.
    let hip = work.join("hip");
    if !hip.join("libamdhip64.so.5").exists() {
        fs_err::create_dir_all(&hip).unwrap();
        let imports = ["__hipRegisterFatBinary", "__hipUnregisterFatBinary"]
            .into_iter()
            .map(|name| (name.to_owned(), None))
            .collect();
        kpack_test_support::hip::build_standin(&hip, &imports);
    }
    run(tool("cc")
        .args(["-shared", "-fPIC", &format!("-Wl,-soname,{soname}"), "-o"])
        .arg(library)
        .arg(&source)
        .arg(format!("-L{}", hip.display()))
        .arg("-l:libamdhip64.so.5"));
}

/// Builds `library` (soname `soname`) with host code only.
#[allow(dead_code)]
pub fn host_library(work: &Path, library: &Path, soname: &str) {
    let source = work.join(format!("{soname}.c"));
    fs_err::write(
        &source,
        format!(
            "int {}_version(void) {{ return 1; }}\n",
            soname.replace(['.', '-'], "_")
        ),
    )
    .unwrap();
    run(tool("cc")
        .args(["-shared", "-fPIC", &format!("-Wl,-soname,{soname}"), "-o"])
        .arg(library)
        .arg(&source));
}

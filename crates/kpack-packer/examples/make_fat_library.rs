//! Builds a large synthetic multi-TU fat library for benchmarks: `N`
//! bundles, each holding the real code objects of an existing fat binary
//! (rocRAND's seven), each copy made distinct so nothing deduplicates.
//!
//! ```text
//! cargo run --release -p kpack-packer --example make_fat_library -- SOURCE.so N OUT_DIR
//! ```
//! writes the bundles and `OUT_DIR/fat.c`, links `OUT_DIR/libfat.so` with
//! `cc` (`.incbin` keeps the compiler away from the bytes) and removes the
//! bundle files again.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use kpack_binary::bundle::build::offload_bundle;
use kpack_binary::elf::FatElf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [source, count, out] = &args[..] else {
        return Err("usage: make_fat_library SOURCE.so N OUT_DIR".into());
    };
    let count: usize = count.parse()?;
    let out = PathBuf::from(out);
    fs_err::create_dir_all(&out)?;
    let data = fs_err::read(source)?;
    let fat = FatElf::parse(&data)?.ok_or("the source has no device code")?;
    let mut code_objects: Vec<(String, Vec<u8>)> = Vec::new();
    for bundle in &fat.bundles {
        for code in bundle.code_objects()? {
            code_objects.push((code.triple, code.bytes.into_owned()));
        }
    }

    let mut asm = String::from(".section .hip_fatbin,\"a\",@progbits\n");
    let mut total = 0usize;
    for index in 0..count {
        let entries: Vec<(String, Vec<u8>)> = code_objects
            .iter()
            .map(|(triple, bytes)| {
                let mut bytes = bytes.clone();
                // Stamp the copy in its last bytes so copies differ.
                let len = bytes.len();
                bytes[len - 8..].copy_from_slice(&(index as u64).to_le_bytes());
                (triple.clone(), bytes)
            })
            .collect();
        let borrowed: Vec<(&str, &[u8])> = entries
            .iter()
            .map(|(t, b)| (t.as_str(), b.as_slice()))
            .collect();
        let bundle = offload_bundle(&borrowed);
        total += bundle.len();
        let path = out.join(format!("bundle{index}.bin"));
        fs_err::write(&path, &bundle)?;
        writeln!(
            asm,
            ".balign 4096\n.globl fat_bundle{index}\nfat_bundle{index}:\n.incbin \"{}\"",
            path.display()
        )?;
    }
    let mut c = String::from(
        "#include <stdint.h>\n\
         struct kpack_wrapper { uint32_t magic; uint32_t version; const void* binary; void* reserved; };\n",
    );
    writeln!(
        c,
        "__asm__(\"{}\");",
        asm.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    )?;
    for index in 0..count {
        writeln!(c, "extern const unsigned char fat_bundle{index}[];")?;
    }
    for index in 0..count {
        writeln!(
            c,
            "__attribute__((section(\".hipFatBinSegment\"), aligned(8), used)) struct kpack_wrapper fat_wrapper{index} = {{ 0x48495046u, 1u, fat_bundle{index}, 0 }};"
        )?;
    }
    let c_path = out.join("fat.c");
    fs_err::write(&c_path, c)?;
    let library = out.join("libfat.so");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&c_path)
        .status()?;
    if !status.success() {
        return Err("cc failed".into());
    }
    for index in 0..count {
        fs_err::remove_file(out.join(format!("bundle{index}.bin")))?;
    }
    println!(
        "{}: {count} bundles x {} code objects, {total} bytes of bundles",
        library.display(),
        code_objects.len()
    );
    Ok(())
}

//! Splits one fat ELF file: `cargo run -p kpack-packer --example split_elf -- IN OUT`.
#![allow(clippy::print_stdout)]

use kpack_binary::elf::{split_elf, FatElf};
use rocm_kpack::Marker;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = &args[..] else {
        return Err("usage: split_elf IN OUT".into());
    };
    let data = fs_err::read(input)?;
    let fat = FatElf::parse(&data)?.ok_or("no device code")?;
    let marker = Marker {
        search_paths: vec![".kpack/test_@GFXARCH@.kpack".into()],
        kernel_name: "lib/x.so".into(),
    };
    let (out, layout) = split_elf(&data, &fat, &marker.to_bytes())?;
    fs_err::write(output, &out)?;
    println!("{layout:?}: {} -> {} bytes", data.len(), out.len());
    Ok(())
}

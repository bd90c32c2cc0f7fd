//! Builds the synthetic PE image of the Windows split benchmark: a DLL
//! whose `.hip_fat` holds 1 GiB of device code in 8 uncompressed bundles
//! (four targets, 32 MiB code objects of a repeated 4 KiB block each, so
//! they compress as real code does not, but stream the same), one wrapper
//! per bundle.
//!
//! ```text
//! cargo run --release -p kpack-packer --features test-fixtures --example make_big_dll -- OUT_DIR
//! ```
//! writes `OUT_DIR/big.dll` and `OUT_DIR/hip_fat.bin` (the section's bytes,
//! for measuring `zstd` on them).
#![allow(clippy::print_stdout)]

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use kpack_binary::bundle::build::{big_block, BIG_CODE_LEN, BIG_TARGETS};
use kpack_binary::bundle::OffloadBundleLayout;
use kpack_binary::pe::build::SyntheticDll;

/// Bundles of four 32 MiB code objects: 1 GiB in all.
const BUNDLES: usize = 8;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out] = &args[..] else {
        return Err("usage: make_big_dll OUT_DIR".into());
    };
    let out = PathBuf::from(out);
    fs_err::create_dir_all(&out)?;
    let triples: Vec<String> = BIG_TARGETS
        .iter()
        .map(|t| format!("hipv4-amdgcn-amd-amdhsa--{t}"))
        .collect();
    let layout = OffloadBundleLayout::plan(
        "host-x86_64-unknown-linux-gnu-",
        triples.iter().map(|t| (t.as_str(), BIG_CODE_LEN)),
        4096,
    );
    let dll = SyntheticDll::new(vec![layout.len(); BUNDLES]);
    let write_bundle = |bundle: usize, out: &mut dyn Write| {
        layout.write(out, |target, write| {
            let block = big_block(bundle, target);
            for _ in 0..BIG_CODE_LEN / 4096 {
                write(&block)?;
            }
            std::io::Result::Ok(())
        })
    };
    let mut image = BufWriter::new(fs_err::File::create(out.join("big.dll"))?);
    dll.write(&mut image, |bundle, out| write_bundle(bundle, out))?;
    image.flush()?;
    let mut section = BufWriter::new(fs_err::File::create(out.join("hip_fat.bin"))?);
    for bundle in 0..BUNDLES {
        let len = layout.len();
        write_bundle(bundle, &mut section)?;
        let pad = len.next_multiple_of(4096) - len;
        section.write_all(&vec![0; pad as usize])?;
    }
    section.flush()?;
    println!("{}", out.join("big.dll").display());
    Ok(())
}

//! Builds the synthetic library of the bounded-memory tests for
//! benchmarks: 16 compressed bundles (CCOB v3, zstd) holding 2 GiB of
//! device code for four targets, a few megabytes on disk.
//!
//! ```text
//! cargo run --release -p kpack-packer --features test-fixtures --example make_big_library -- OUT_DIR
//! ```
//! writes `OUT_DIR/libbig.so` (linked with `cc`) and keeps the bundles
//! (`OUT_DIR/bundle<N>.ccob`) for measuring `zstd -d` on them.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::Command;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out] = &args[..] else {
        return Err("usage: make_big_library OUT_DIR".into());
    };
    let out = PathBuf::from(out);
    fs_err::create_dir_all(&out)?;
    let source = kpack_binary::bundle::build::big_library_assembly(&out)?;
    let library = out.join("libbig.so");
    let status = Command::new("cc")
        .args(["-shared", "-o"])
        .arg(&library)
        .arg(&source)
        .status()?;
    if !status.success() {
        return Err(format!("cc failed: {status}").into());
    }
    println!("{}", library.display());
    Ok(())
}

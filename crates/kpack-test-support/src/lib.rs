//! What the workspace's tests share.
//!
//! [`tool`] finds the programs tests run (compilers, binutils, `minisign`,
//! the Python tools of the project's test environment). A missing program
//! fails the test with a message naming it, its package and the set-up
//! command, never a bare "No such file or directory" and never a skip.
//!
//! [`windows`] builds and runs Windows binaries on Linux (mingw, wine).
// Test support: a failed step fails the test that called it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bomb_archive;
pub mod chain;
pub mod context;
mod downloads;
pub mod elf_checks;
pub mod fat;
pub mod hip;
pub mod hostile_toml;
pub mod measure;
pub mod offload_bundler;
pub mod real_hip;
pub mod s3;
pub mod server;
mod tools;
mod transcript;
pub mod venv;
pub mod wheels;
pub mod windows;

pub use bomb_archive::{zero_bomb_archive, GFX90A_VARIANTS};
pub use downloads::{download, download_dir};
pub use tools::{
    find_tool, provided_files, provided_programs, python_venv, tool, tool_path, MissingTool,
    Origin, SearchPath, SETUP_COMMAND,
};
pub use transcript::{error_chain, mask_run, mask_times, transcript};

/// A package shard whose version carries two components of device code,
/// as rocBLAS does: per-processor and family kpack archives (`kernels`)
/// and per-processor Tensile payloads (`tensile`), for choosing artifacts.
pub const COMPONENTS_SHARD: &str = include_str!("../data/rocm-blas-components.toml");

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (`crates/<this crate>/../..`).
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The target directory holding the running test (`<target>/debug/deps/`
/// or `<target>/debug/examples/`): where builds and set-ups shared by test
/// processes go.
pub(crate) fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_owned()
}

/// `../shared/fixtures` beside the checkout (or `$KPACK_FIXTURES`).
pub fn fixtures() -> PathBuf {
    std::env::var_os("KPACK_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../shared/fixtures"))
}

/// Runs a command, failing the test with its output if it fails.
pub fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Unpacks the Debian rocRAND package into `dir`; returns the library.
pub fn unpack_rocrand(dir: &Path) -> PathBuf {
    run(crate::tool("dpkg-deb")
        .arg("-x")
        .arg(crate::fixtures().join("debian/librocrand1_5.3.3-4_amd64.deb"))
        .arg(dir));
    dir.join("usr/lib/x86_64-linux-gnu/librocrand.so.1.1")
}

/// A zstd tar whose one file, `share/zeros`, holds `size` zeros: a few KiB
/// that unpack to far more (a decompression bomb when `size` is large).
/// Its tar stream is [`zero_bomb_tar_len`] bytes long.
pub fn zero_bomb(size: u64) -> Vec<u8> {
    use std::io::Read;
    let mut encoder = zstd::Encoder::new(Vec::new(), 3).unwrap();
    {
        let mut builder = tar::Builder::new(&mut encoder);
        let mut header = tar::Header::new_gnu();
        header.set_size(size);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, "share/zeros", std::io::repeat(0).take(size))
            .unwrap();
        builder.finish().unwrap();
    }
    encoder.finish().unwrap()
}

/// The length of [`zero_bomb`]'s tar stream: a header, the data padded to
/// 512 bytes, two zero blocks.
pub fn zero_bomb_tar_len(size: u64) -> u64 {
    512 + size.div_ceil(512) * 512 + 1024
}

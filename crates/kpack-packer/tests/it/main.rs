//! kpack-pack's integration tests, one binary: the CLI, splitting real
//! and synthetic fat binaries, trees and wheels, kernel databases, checks
//! against readelf and Debian's real HIP runtime, the program header rule
//! of old kernels, the archives split binaries need (`deps`), wheels'
//! large members deflated on every core, and output snapshots.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli;
mod common;
mod databases;
mod deps;
mod embedded;
mod fixtures;
mod golden_readelf;
mod hip_runtime;
mod materialize;
mod open_files;
mod program_headers;
mod pypi;
mod rocrand;
mod routing;
mod snapshots_cli;
mod synthetic;
mod tree;
mod wheel;
mod wheel_deflate;
mod wheel_record;
mod wheel_zip;
mod windows;

//! kpack-get's integration tests, one binary: installs against a loopback
//! repository, detection with fake GPUs, faults, trust, confinement, crashes,
//! HIP runtimes, pip integration and output snapshots.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bounded_expansion;
mod bounded_reads;
mod check;
mod common;
mod components;
mod confinement;
mod crash;
mod detect;
mod detect_explained;
mod encoded_mirrors;
mod environment_files;
mod errors;
mod faults;
mod first_hour;
mod gpu_names;
mod hip_runtime;
mod install;
mod mounts;
mod pip;
mod pip_download;
mod pip_layout;
mod pip_prune;
mod progress;
mod python_package;
mod readers_and_failures;
mod snapshots_cli;
mod transport;
mod trust;

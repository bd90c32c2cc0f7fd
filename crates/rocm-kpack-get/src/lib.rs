//! kpack-get's library: detect the machine's GPUs (`detect`), read the
//! configuration (`config`), fetch and check repository indexes (`repo`),
//! download pinned files into a shared cache (with
//! `kpack_repo_index::fetch`), plan, stage and atomically commit installs
//! into a prefix (`install`), decide a prefix's layout from the HIP
//! runtime its libraries would load (`layout`, the runtime's search in
//! `layout::hip_runtime`), pick the device extras and wheel variants
//! Python environments need (`pip`), and check that what a prefix or
//! Python environment holds serves every GPU (`check`); what they say for
//! people goes through [`output::Output`].
//!
//! The `kpack-get` binary (`src/bin/kpack-get/`: `main.rs`, `cli.rs`,
//! `commands/`) puts these together and owns all output.
#![deny(unreachable_pub)]

pub mod check;
pub mod config;
pub mod decode_budget;
pub mod detect;
pub mod install;
pub mod layout;
pub mod output;
pub mod pip;
pub mod repo;

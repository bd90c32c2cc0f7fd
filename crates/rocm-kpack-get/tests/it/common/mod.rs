//! What kpack-get's tests share: the test context, the chain's helpers
//! (kpack-test-support's `chain` and `server`), fake GPUs and HIP
//! runtimes, hostile packages, wheels, and rocm-rand versions for more
//! targets.

pub mod archives;
pub mod gpus;
pub mod hostile;
pub mod runtimes;
pub mod wheels;

/// The loopback HTTP server with faults.
pub mod server {
    pub use kpack_test_support::server::*;
}

pub use kpack_test_support::chain::*;

/// The targets of every code object in the fat library at `path`, sorted,
/// or `None` when it is not fat (a split library).
pub fn fat_targets(path: &std::path::Path) -> Option<Vec<String>> {
    let data = fs_err::read(path).unwrap();
    if kpack_binary::elf::SplitElf::parse(&data).unwrap().is_some() {
        return None;
    }
    let fat = kpack_binary::elf::FatElf::parse(&data).unwrap().unwrap();
    let mut targets: Vec<String> = fat
        .bundles
        .iter()
        .flat_map(|b| b.entries.iter().map(|c| c.target.to_string()))
        .collect();
    targets.sort();
    targets.dedup();
    Some(targets)
}

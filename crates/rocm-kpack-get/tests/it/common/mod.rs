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

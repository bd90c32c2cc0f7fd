//! What the end-to-end tests share: the chain's helpers (kpack-test-support's
//! `chain` and `server`), fake GPUs, and the stand-in HIP runtime.
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

pub mod gpus;
pub mod wheels;

/// The loopback HTTP server with faults.
pub mod server {
    pub use kpack_test_support::server::*;
}

/// The stand-in HIP runtime and the helpers it needs.
#[allow(unused_imports)]
pub mod hip {
    pub use kpack_test_support::hip::*;
    pub use kpack_test_support::{fixtures, run};
}

pub use kpack_test_support::chain::*;
pub use kpack_test_support::workspace;

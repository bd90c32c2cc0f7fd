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
pub mod hostile;
pub mod runtimes;
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

use std::process::Output;

/// Checks a failed run: exit `code`, an `error:` line, no panic or
/// backtrace; returns stderr.
pub fn failed(out: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(code),
        "exit code:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.lines().any(|l| l.starts_with("error: ")),
        "an error line:\n{stderr}"
    );
    for text in [
        "panicked",
        "RUST_BACKTRACE",
        "stack backtrace",
        "Os {",
        "Error {",
    ] {
        assert!(
            !stderr.contains(text) && !stdout.contains(text),
            "no {text:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
    }
    stderr
}

/// The `error:` line (with its `caused by:` lines).
pub fn error_text(stderr: &str) -> String {
    stderr
        .lines()
        .skip_while(|l| !l.starts_with("error: "))
        .take_while(|l| !l.starts_with("hint: "))
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn hint_text(stderr: &str) -> String {
    stderr
        .lines()
        .find(|l| l.starts_with("hint: "))
        .unwrap_or_else(|| panic!("a hint:\n{stderr}"))
        .to_owned()
}

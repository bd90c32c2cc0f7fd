//! What kpack-get's tests share: the test context, the chain's helpers
//! (kpack-test-support's `chain` and `server`), fake GPUs and HIP
//! runtimes, hostile packages, and wheels.

pub mod gpus;
pub mod hostile;
pub mod runtimes;
pub mod wheels;

/// The loopback HTTP server with faults.
pub mod server {
    pub use kpack_test_support::server::*;
}

pub use kpack_test_support::chain::*;

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

//! The test support's own tests, one binary: the loopback server, the
//! tools the tests run and the Windows harness.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod server;
mod tools;
mod windows;

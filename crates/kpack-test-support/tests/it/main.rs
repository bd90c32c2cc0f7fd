//! The test support's own tests, one binary: the loopback server and the
//! tools the tests run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod server;
mod tools;

//! kpack-binary's public behaviour on real and built binaries.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod many;
mod pe;

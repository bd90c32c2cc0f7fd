//! The runtime's integration tests, one binary: the C API, the loader,
//! concurrency, malformed archives, round trips, ROCm's reference
//! fixtures, and Windows (the DLL under wine).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod c_api;
mod common;
mod concurrency;
mod loader;
mod malformed;
mod reference_fixtures;
mod roundtrip;
mod windows;

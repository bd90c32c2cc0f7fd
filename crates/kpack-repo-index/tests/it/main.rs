//! The repository client's integration tests, one binary: resolution, the
//! schema and signatures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod resolve;
mod schema;
mod sign;

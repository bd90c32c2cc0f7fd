//! kpack-repo's integration tests, one binary: the CLI as an operator runs
//! it, publishing, resolution, the schema, signatures, S3 buckets and output
//! snapshots.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli;
mod common;
mod publish;
mod resolve;
mod s3;
mod schema;
mod sign;
mod snapshots_cli;

//! kpack-repo's integration tests, one binary: the CLI as an operator runs
//! it, publishing, S3 buckets and output snapshots.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli;
mod common;
mod publish;
mod s3;
mod snapshots_cli;

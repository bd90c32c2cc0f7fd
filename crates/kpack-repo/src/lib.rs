//! Publishing kpack repositories, the mirror operator's side: writing them
//! (`publish`, archives encoded for transport by `encode`) to directories and S3-compatible buckets (`store`), pruning
//! and collecting their garbage (`tidy`), checking them as a client would
//! (`verify`, how far trees unpack in `unpacked`), reading them from any
//! location (`source`) and copying them (`mirror`), and reading the control
//! data of the Debian packages manifests are built from (`debian`).
//! Package manifests (`manifest`) name Debian packages and how to lay them
//! out; `build` unpacks them, splits the tree with the packer and stages
//! the artifacts.
//!
//! The index model and everything a client reads with is in
//! `kpack-repo-index`.
#![forbid(unsafe_code)]

pub mod build;
pub mod debian;
pub mod encode;
pub mod manifest;
pub mod mirror;
pub mod publish;
pub mod source;
pub mod store;
pub mod tidy;
pub mod unpacked;
pub mod verify;

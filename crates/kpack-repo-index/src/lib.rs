//! kpack repositories: the signed root index and package shards
//! (`schema`), the values they carry (`types`), GPU families (`families`)
//! and choosing versions and artifacts for a machine's GPUs (`resolve`).
//!
//! Manifests built from Debian packages read their control data with
//! `debian`. Keys and signatures are in `sign`, writing repositories in `publish`,
//! pruning and collecting their garbage in `tidy`,
//! checking them in `verify` (how far trees unpack in `unpacked`), reading
//! them from directories or HTTP in `fetch` (within the bounds of
//! `limits`), and copying them in `mirror`. The `kpack-repo` binary
//! (feature `build`) also packs manifests with the packer; the library
//! does not.

pub mod address;
mod bytes;
pub mod debian;
pub mod families;
pub mod fetch;
pub mod freshness;
pub mod limits;
#[cfg(feature = "publish")]
pub mod mirror;
#[cfg(feature = "publish")]
pub mod publish;
pub mod resolve;
pub mod schema;
pub mod sign;
#[cfg(feature = "publish")]
pub mod store;
#[cfg(feature = "publish")]
pub mod tidy;
pub mod types;
#[cfg(feature = "publish")]
pub mod unpacked;
pub mod verify;

pub use bytes::ByteSize;
pub use families::Families;
pub use resolve::{
    resolve, select_artifacts, Explanation, Request, ResolveError, Resolved, Resolver, Selection,
};
pub use schema::{
    Artifact, ArtifactKind, PackageEntry, RepoInfo, RootIndex, SchemaError, Shard, VersionEntry,
    CLIENT_VERSION, OWNER_CLIENT,
};
pub use types::{
    Component, Dependency, HashingReader, HashingWriter, InvalidValue, Listed, PackageName,
    RelativePath, Sha256, Timestamp,
};

//! Reading kpack repositories, as a client does: the signed root index and
//! package shards (`schema`), the values they carry (`types`), GPU families
//! (`families`), choosing versions and artifacts for a machine's GPUs
//! (`resolve`), where a repository is (`address`), the root's signature
//! (`sign`, with the keys of `kpack-sign`), whether a root may be trusted
//! now (`freshness`), and fetching
//! from mirrors with retries, resume and failover into a cache (`fetch`),
//! decoding transport-encoded artifacts as they arrive (`transport`),
//! within the bounds of `limits`.
//!
//! Writing, checking and copying repositories is the publisher's
//! (`kpack-repo`); this crate never carries it.

pub mod address;
pub mod families;
pub mod fetch;
pub mod freshness;
pub mod limits;
pub mod resolve;
pub mod schema;
pub mod sign;
pub mod transport;
pub mod types;

pub use families::Families;
pub use resolve::{
    resolve, select_artifacts, Explanation, ResolveError, Resolved, Resolver, Selection,
};
pub use schema::{
    Artifact, ArtifactKind, PackageEntry, Pin, RepoInfo, RootIndex, SchemaError, Shard, Transport,
    VersionEntry, CLIENT_VERSION, ENCODING_CLIENT, OWNER_CLIENT,
};
pub use types::{
    Component, Dependency, Encoding, HashingReader, HashingWriter, InvalidValue, Listed,
    PackageName, RelativePath, Sha256, Timestamp,
};

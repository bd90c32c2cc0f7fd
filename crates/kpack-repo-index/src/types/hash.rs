//! SHA-256 digests and the hashing reader and writer, from `kpack-hash`
//! (the packer and kpack-get share them).

pub use kpack_hash::{HashingReader, HashingWriter, InvalidSha256, Sha256};

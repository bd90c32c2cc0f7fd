//! Relative paths inside a repository or a prefix: `kpack-fs`'s one rule,
//! and where a package's shard usually lives.

pub use kpack_fs::{InvalidPath, RelativePath};

use super::{InvalidValue, PackageName, Sha256};

/// `packages/<name>/<sha256>.toml`, where a package's shard lives unless
/// the root says otherwise.
#[allow(clippy::expect_used)]
pub fn usual_shard(name: &PackageName, sha256: &Sha256) -> RelativePath {
    let file = format!("{sha256}.toml");
    // A package name starts with [a-z0-9] and holds no `/` or control
    // character, a digest is hex: the parts always make a path.
    RelativePath::from_parts(["packages", name.as_str(), &file])
        .expect("a package name and a digest make a relative path")
}

impl From<InvalidPath> for InvalidValue {
    fn from(error: InvalidPath) -> InvalidValue {
        InvalidValue {
            value: error.value,
            reason: error.reason,
        }
    }
}

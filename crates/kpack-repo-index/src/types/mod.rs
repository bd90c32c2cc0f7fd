//! Values an index carries that are parsed, not trusted: package names,
//! relative paths, hashes, the targets device code is listed for, the
//! component it belongs to, dependency requirements, transport encodings,
//! timestamps.

/// Why a value from an index is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?}: {reason}")]
pub struct InvalidValue {
    pub value: String,
    pub reason: &'static str,
}

fn invalid(value: &str, reason: &'static str) -> InvalidValue {
    InvalidValue {
        value: value.to_owned(),
        reason,
    }
}

/// Implements serde through `FromStr` and `Display`.
macro_rules! string_serde {
    ($type:ty) => {
        impl serde::Serialize for $type {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $type {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = <String as serde::Deserialize>::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

mod component;
mod dependency;
mod encoding;
mod hash;
mod listed;
mod name;
mod path;
mod timestamp;

pub use component::Component;
pub use dependency::Dependency;
pub use encoding::Encoding;
pub use hash::{HashingReader, HashingWriter, InvalidSha256, Sha256};
pub use listed::Listed;
pub use name::PackageName;
pub use path::{usual_shard, InvalidPath, RelativePath};
pub use timestamp::Timestamp;

#[cfg(test)]
mod tests;

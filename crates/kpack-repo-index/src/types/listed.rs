//! What device code is listed for: a GPU target or a family name.

use std::fmt;
use std::str::FromStr;

use super::{invalid, InvalidValue};

/// What an artifact's device code is listed for: a GPU target
/// (`gfx90a:sramecc+:xnack-`, `gfx1100`, a generic `gfx11-generic`) or a
/// family name (`gfx110X-dgpu`, or a repository's own), told apart once,
/// when the index is read. A target is written back in canonical form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Listed {
    Target(kpack_gpu::Target),
    Family(String),
}

impl Listed {
    /// Whether `processor` is spelt as a GPU processor (`gfx` and hex
    /// digits, or a name of the GPU table such as `gfx1250-strict`) or a
    /// generic target (`gfx10-3-generic`), not a family.
    fn is_processor(processor: &str) -> bool {
        // The table's own names, such as `gfx1250-strict`.
        if kpack_gpu::gpus::processor(processor).is_some() {
            return true;
        }
        let Some(rest) = processor.strip_prefix("gfx") else {
            return false;
        };
        match rest.strip_suffix("-generic") {
            Some(version) => {
                !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit() || b == b'-')
            }
            None => {
                !rest.is_empty() && rest.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            }
        }
    }
}

impl FromStr for Listed {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match kpack_gpu::Target::parse(s) {
            Ok(target) if Listed::is_processor(target.processor()) => Ok(Listed::Target(target)),
            Ok(target) if target.features().is_empty() => Ok(Listed::Family(s.to_owned())),
            _ => Err(invalid(
                s,
                "a GPU target (gfx90a:xnack-), a generic target or a family name",
            )),
        }
    }
}

impl fmt::Display for Listed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listed::Target(target) => target.fmt(f),
            Listed::Family(name) => f.write_str(name),
        }
    }
}

string_serde!(Listed);

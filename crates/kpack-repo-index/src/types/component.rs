//! Components of device code (`kernels`, `tensile`).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use super::name::is_name;
use super::{invalid, InvalidValue};

/// The kind of device code an artifact carries for its targets
/// (04-repo-index.md): `kernels`, the kpack archive of a fat library (the
/// default), or a library's own per-target files such as `tensile`
/// (rocBLAS's kernel database). A GPU takes one artifact of each component
/// of a package version. Spelt like a name: `[a-z0-9][a-z0-9._-]*`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Component(Cow<'static, str>);

impl Component {
    /// `kernels`: what a device artifact that names no component carries.
    pub const KERNELS: Component = Component(Cow::Borrowed("kernels"));

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this is the default component, which an index leaves
    /// unsaid.
    pub fn is_default(&self) -> bool {
        *self == Component::KERNELS
    }
}

impl FromStr for Component {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if is_name(s) {
            Ok(Component(Cow::Owned(s.to_owned())))
        } else {
            Err(invalid(s, "a component is [a-z0-9][a-z0-9._-]*"))
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_serde!(Component);

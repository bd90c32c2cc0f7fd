//! Debian binary packages as the source of a manifest's version and
//! dependencies: control data (`control`), versions and their semver
//! mapping (`version`), relationship fields (`relation`), and what a
//! package's dependencies become in the repository (`mapping`), and
//! running `dpkg-deb` on a package (`dpkg`).

mod control;
mod dpkg;
mod mapping;
mod relation;
mod version;

pub use control::{Control, ControlError};
pub use dpkg::{dpkg_deb, DpkgError};
pub use mapping::{MappedDepends, NameTable};
pub use relation::{parse_relations, Alternatives, Operator, Relation, RelationError};
pub use version::{DebianVersion, VersionError};

#[cfg(test)]
mod tests;

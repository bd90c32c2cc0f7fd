//! A manifest set's table of Debian package names and what a package's
//! Debian dependencies become in the repository.

use std::collections::BTreeMap;

use super::relation::{Alternatives, RelationError};
use kpack_repo_index::types::{Dependency, PackageName};

/// Debian package name -> repository package name, for the packages a
/// manifest set publishes. A virtual package is mapped like any other,
/// to the repository package that provides it; a name the table does not
/// hold is the system's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameTable(pub BTreeMap<String, PackageName>);

/// A package's Debian dependencies, in the repository's terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MappedDepends {
    /// Dependencies on packages of the repository, in the control data's
    /// order.
    pub depends: Vec<Dependency>,
    /// Groups that name no package of the repository, as Debian states
    /// them (`libc6 (>= 2.38)`).
    pub system: Vec<String>,
}

impl NameTable {
    /// Maps each group: its first alternative that the table holds
    /// becomes a dependency (Debian's resolvers also try alternatives in
    /// order); a group with none is a system requirement.
    pub fn map(&self, groups: &[Alternatives]) -> Result<MappedDepends, RelationError> {
        let mut mapped = MappedDepends::default();
        for group in groups {
            let ours = group
                .0
                .iter()
                .find_map(|relation| Some((relation, self.0.get(&relation.package)?)));
            match ours {
                Some((relation, name)) => {
                    let dependency = Dependency {
                        name: name.clone(),
                        requirement: relation.requirement()?,
                    };
                    if !mapped.depends.contains(&dependency) {
                        mapped.depends.push(dependency);
                    }
                }
                None => mapped.system.push(group.to_string()),
            }
        }
        Ok(mapped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debian::{parse_relations, Control};

    fn table(pairs: &[(&str, &str)]) -> NameTable {
        NameTable(
            pairs
                .iter()
                .map(|(debian, ours)| (debian.to_string(), ours.parse().unwrap()))
                .collect(),
        )
    }

    #[test]
    fn rocsolver_depends_on_blas_and_the_runtime_and_needs_the_system_rest() {
        let text = fs_err::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/testdata/debian-13/librocsolver0.control"
        ))
        .unwrap();
        let control = Control::parse(&text).unwrap();
        let table = table(&[
            ("librocblas0", "rocm-blas"),
            ("libamdhip64-5", "hip-runtime"),
        ]);
        let mapped = table.map(&control.depends().unwrap()).unwrap();
        let depends: Vec<String> = mapped
            .depends
            .iter()
            .map(|d| format!("{} {}", d.name, d.requirement))
            .collect();
        assert_eq!(depends, ["hip-runtime >=4.5.2", "rocm-blas >=5.5.1"]);
        assert_eq!(
            mapped.system,
            [
                "libc6 (>= 2.38)",
                "libfmt10 (>= 10.1.1+ds1)",
                "libgcc-s1 (>= 3.0)",
                "libstdc++6 (>= 13.1)"
            ]
        );
    }

    #[test]
    fn alternatives_take_the_first_the_table_holds_and_virtual_names_map_like_any() {
        let groups =
            parse_relations("libblas3 | libblas.so.3, hip-runtime-virtual (>= 6.1)").unwrap();
        let table = table(&[
            ("libblas.so.3", "rocm-blas"),
            ("hip-runtime-virtual", "hip-runtime"),
        ]);
        let mapped = table.map(&groups).unwrap();
        let names: Vec<&str> = mapped.depends.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["rocm-blas", "hip-runtime"]);
        assert!(mapped.system.is_empty());
        let mapped = NameTable::default().map(&groups).unwrap();
        assert_eq!(
            mapped.system,
            ["libblas3 | libblas.so.3", "hip-runtime-virtual (>= 6.1)"]
        );
    }
}

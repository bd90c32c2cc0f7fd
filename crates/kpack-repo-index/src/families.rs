//! GPU families: TheRock's built-in table (from `kpack-gpu`), the
//! older names indexes still use, and a repository's own `[families]`.

use std::collections::BTreeMap;

use kpack_gpu::family;
use kpack_gpu::Target;

use crate::types::Listed;

/// Older family names accepted as aliases (07-gpu-targets.md).
const ALIASES: &[(&str, &[&str])] = &[
    ("gfx90X-all", &["gfx906", "gfx908", "gfx90a"]),
    ("gfx90X-dgpu", &["gfx906"]),
    ("gfx90X-dcgpu", &["gfx908", "gfx90a"]),
];

/// Short lowercase keys for generation families.
const SHORT_KEYS: &[(&str, &str)] = &[
    ("gfx94x", "gfx94X-all"),
    ("gfx110x", "gfx110X-all"),
    ("gfx120x", "gfx120X-all"),
    ("gfx101x", "gfx101X-all"),
    ("gfx103x", "gfx103X-all"),
    ("gfx125x", "gfx125X-all"),
];

/// Family name -> member processors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Families {
    members: BTreeMap<String, Vec<String>>,
}

impl Default for Families {
    fn default() -> Self {
        Families::builtin()
    }
}

impl Families {
    /// The built-in table with its aliases.
    pub fn builtin() -> Families {
        let mut members: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for processor in family::processors() {
            for name in family::families_of(processor) {
                members
                    .entry((*name).to_owned())
                    .or_default()
                    .push((*processor).to_owned());
            }
        }
        for (alias, processors) in ALIASES {
            members.insert(
                (*alias).to_owned(),
                processors.iter().map(|p| (*p).to_owned()).collect(),
            );
        }
        for (short, long) in SHORT_KEYS {
            if let Some(list) = members.get(*long).cloned() {
                members.insert((*short).to_owned(), list);
            }
        }
        Families { members }
    }

    /// This table with a repository's `[families]` added, replacing
    /// built-in entries of the same name.
    pub fn with_overrides(mut self, overrides: &BTreeMap<String, Vec<String>>) -> Families {
        for (name, processors) in overrides {
            self.members.insert(name.clone(), processors.clone());
        }
        self
    }

    /// The member processors of a family, if it is one.
    pub fn members(&self, name: &str) -> Option<&[String]> {
        self.members.get(name).map(Vec::as_slice)
    }

    /// Whether code listed as `listed` (a target or a family) is code
    /// for `target`: the same target, or a family holding its processor.
    pub fn covers(&self, listed: &Listed, target: &Target) -> bool {
        match listed {
            Listed::Target(listed) => listed == target,
            Listed::Family(name) => self
                .members(name)
                .is_some_and(|members| members.iter().any(|m| m == target.processor())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Target {
        Target::parse(s).unwrap()
    }

    fn l(s: &str) -> Listed {
        s.parse().unwrap()
    }

    #[test]
    fn knows_therock_families_and_aliases() {
        let families = Families::builtin();
        assert_eq!(
            families.members("gfx110X-dgpu").unwrap(),
            ["gfx1100", "gfx1101", "gfx1102"]
        );
        assert_eq!(families.members("gfx110x"), families.members("gfx110X-all"));
        assert_eq!(
            families.members("gfx90X-all").unwrap(),
            ["gfx906", "gfx908", "gfx90a"]
        );
        assert!(families
            .members("dcgpu-all")
            .unwrap()
            .contains(&"gfx942".to_owned()));
        assert!(families.members("gfx1100").is_none());
    }

    #[test]
    fn an_index_overrides_and_extends() {
        let overrides = BTreeMap::from([
            ("gfx110X-all".to_owned(), vec!["gfx1100".to_owned()]),
            (
                "lab-gpus".to_owned(),
                vec!["gfx90a".to_owned(), "gfx1030".to_owned()],
            ),
        ]);
        let families = Families::builtin().with_overrides(&overrides);
        assert_eq!(families.members("gfx110X-all").unwrap(), ["gfx1100"]);
        assert!(families.covers(&l("lab-gpus"), &t("gfx1030")));
    }

    #[test]
    fn covers_targets_and_family_members() {
        let families = Families::builtin();
        assert!(families.covers(&l("gfx90a:xnack-"), &t("gfx90a:xnack-")));
        assert!(!families.covers(&l("gfx90a:xnack+"), &t("gfx90a:xnack-")));
        assert!(families.covers(&l("gfx90a-dcgpu"), &t("gfx90a:xnack-")));
        assert!(families.covers(&l("gfx11-generic"), &t("gfx11-generic")));
        assert!(!families.covers(&l("gfx110X-all"), &t("gfx1030")));
    }
}

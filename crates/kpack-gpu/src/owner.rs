//! Packaging levels (07-gpu-targets.md, "Packaging levels"): ROCm's Python
//! packaging (rocm-bootstrap) and kernel databases group device code by
//! target (`gfx1151`), sub-family (`gfx115x`) or family (`gfx11`). A payload
//! or a device package is owned by one of them, and a machine needs it when
//! any of its GPUs belongs to the owner.

use std::fmt;
use std::str::FromStr;

use crate::gpus::{self, PROCESSORS};
use crate::target::Target;

/// How wide an owner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// One processor's package (its feature variants and, for `gfx1250`,
    /// `gfx1250-strict` with it).
    Target,
    /// A sub-family such as `gfx12_0`.
    SubFamily,
    /// A family such as `gfx12`.
    Family,
}

/// Who owns a payload or device package: a processor, a sub-family or a
/// family, by its canonical key (`gfx1201`, `gfx12_0`, `gfx12`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner {
    level: Level,
    key: Box<str>,
}

/// Why a string names no owner.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a GPU target, sub-family (gfx12_0) or family (gfx12)")]
pub struct ParseOwnerError {
    input: String,
}

impl Owner {
    /// Parses an owner key as indexes and directory names write it, or as
    /// package names spell it (`gfx12-0` for `gfx12_0`): a processor (or a
    /// target, whose features are dropped), a sub-family or its alias
    /// (`gfx11_0`), or a family. A processor packaged with another
    /// (`gfx1250-strict`) names that one's package.
    pub fn parse(input: &str) -> Result<Owner, ParseOwnerError> {
        let error = || ParseOwnerError {
            input: input.to_owned(),
        };
        let underscored = input.replace('-', "_");
        if let Some(subfamily) = gpus::subfamily(&underscored) {
            return Ok(Owner::new(Level::SubFamily, subfamily.key));
        }
        if gpus::is_family(input) {
            return Ok(Owner::new(Level::Family, input));
        }
        let target = Target::parse(input).map_err(|_| error())?;
        if !is_processor_name(target.processor()) {
            return Err(error());
        }
        Ok(Owner::of(&target))
    }

    fn new(level: Level, key: &str) -> Owner {
        Owner {
            level,
            key: key.into(),
        }
    }

    /// The target-level owner of `target`: its processor, or the processor
    /// it is packaged with.
    pub fn of(target: &Target) -> Owner {
        let processor = target.processor();
        let key = gpus::processor(processor)
            .and_then(|p| p.packaged_with)
            .unwrap_or(processor);
        Owner::new(Level::Target, key)
    }

    /// The owners whose packages serve `target`, narrowest first: its
    /// processor's, its sub-family, its family (those the table knows).
    pub fn chain(target: &Target) -> Vec<Owner> {
        let mut chain = vec![Owner::of(target)];
        if let Some(subfamily) = gpus::processor(target.processor())
            .and_then(|p| p.subfamily)
            .and_then(gpus::subfamily)
        {
            chain.push(Owner::new(Level::SubFamily, subfamily.key));
            chain.push(Owner::new(Level::Family, subfamily.family));
        }
        chain
    }

    /// How wide it is.
    pub fn level(&self) -> Level {
        self.level
    }

    /// The canonical key: `gfx1201`, `gfx12_0`, `gfx12`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The key as package names spell it (`gfx12-0`): rocm-bootstrap's
    /// device distributions are `<prefix>-device-<this>`.
    pub fn dist_key(&self) -> String {
        self.key.replace('_', "-")
    }

    /// Whether a GPU whose live target is `gpu` belongs to this owner.
    pub fn contains(&self, gpu: &Target) -> bool {
        Owner::chain(gpu).contains(self)
    }

    /// The processors of the table this owner holds, in table order.
    pub fn members(&self) -> Vec<&'static str> {
        PROCESSORS
            .iter()
            .filter(|p| Target::bare(p.name).is_ok_and(|target| self.contains(&target)))
            .map(|p| p.name)
            .collect()
    }
}

/// Whether `processor` is spelt as a GPU processor (`gfx` and three or
/// more hex digits, or a processor of the table such as `gfx1250-strict`),
/// not a generic target or a family (`gfx13` would be one).
fn is_processor_name(processor: &str) -> bool {
    gpus::processor(processor).is_some()
        || processor
            .strip_prefix("gfx")
            .is_some_and(|rest| rest.len() >= 3 && rest.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

impl FromStr for Owner {
    type Err = ParseOwnerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Owner::parse(s)
    }
}

/// An owner is written as its canonical key.
#[cfg(feature = "serde")]
impl serde::Serialize for Owner {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Owner {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Owner, D::Error> {
        let text = String::deserialize(deserializer)?;
        Owner::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Target {
        Target::parse(s).unwrap()
    }

    fn keys(owners: &[Owner]) -> Vec<&str> {
        owners.iter().map(Owner::key).collect()
    }

    #[test]
    fn chains_run_from_target_to_family_as_rocm_bootstrap_packages_them() {
        for (target, chain) in [
            ("gfx1151", ["gfx1151", "gfx115x", "gfx11"]),
            ("gfx1100", ["gfx1100", "gfx110x", "gfx11"]),
            ("gfx942:sramecc+:xnack-", ["gfx942", "gfx9_4", "gfx9"]),
            ("gfx950", ["gfx950", "gfx9_5", "gfx9"]),
            ("gfx90a:xnack+", ["gfx90a", "gfx9_0", "gfx9"]),
            ("gfx908", ["gfx908", "gfx9_0", "gfx9"]),
            ("gfx1201", ["gfx1201", "gfx12_0", "gfx12"]),
            ("gfx1250", ["gfx1250", "gfx12_5", "gfx12"]),
            ("gfx1250-strict", ["gfx1250", "gfx12_5", "gfx12"]),
            ("gfx1030", ["gfx1030", "gfx10_3", "gfx10"]),
            ("gfx1010", ["gfx1010", "gfx10_1", "gfx10"]),
        ] {
            assert_eq!(keys(&Owner::chain(&t(target))), chain, "{target}");
        }
        assert_eq!(keys(&Owner::chain(&t("gfx803"))), ["gfx803"]);
    }

    #[test]
    fn keys_parse_at_every_level_with_aliases_and_package_spellings() {
        for (input, level, key) in [
            ("gfx1201", Level::Target, "gfx1201"),
            ("gfx90a:xnack-", Level::Target, "gfx90a"),
            ("gfx1250-strict", Level::Target, "gfx1250"),
            ("gfx803", Level::Target, "gfx803"),
            ("gfx12_0", Level::SubFamily, "gfx12_0"),
            ("gfx12-0", Level::SubFamily, "gfx12_0"),
            ("gfx9-4", Level::SubFamily, "gfx9_4"),
            ("gfx110x", Level::SubFamily, "gfx110x"),
            ("gfx11_0", Level::SubFamily, "gfx110x"),
            ("gfx11_5", Level::SubFamily, "gfx115x"),
            ("gfx12", Level::Family, "gfx12"),
            ("gfx9", Level::Family, "gfx9"),
        ] {
            let owner = Owner::parse(input).unwrap();
            assert_eq!((owner.level(), owner.key()), (level, key), "{input}");
        }
        for bad in [
            "gfx11-generic",
            "gfx110X-all",
            "gfx13",
            "nvidia",
            "",
            "gfx11xx",
        ] {
            assert!(Owner::parse(bad).is_err(), "{bad:?} parsed");
        }
        assert_eq!(Owner::parse("gfx12_0").unwrap().dist_key(), "gfx12-0");
    }

    #[test]
    fn members_are_the_processors_each_level_holds() {
        let members = |key: &str| Owner::parse(key).unwrap().members();
        assert_eq!(members("gfx12_0"), ["gfx1200", "gfx1201"]);
        assert_eq!(members("gfx12_5"), ["gfx1250", "gfx1250-strict", "gfx1251"]);
        assert_eq!(
            members("gfx9_0"),
            ["gfx900", "gfx902", "gfx904", "gfx906", "gfx908", "gfx909", "gfx90a", "gfx90c"]
        );
        assert_eq!(members("gfx11").len(), 8);
        assert_eq!(members("gfx1250"), ["gfx1250", "gfx1250-strict"]);
        assert!(Owner::parse("gfx11").unwrap().contains(&t("gfx1151")));
        assert!(!Owner::parse("gfx11").unwrap().contains(&t("gfx1201")));
    }
}

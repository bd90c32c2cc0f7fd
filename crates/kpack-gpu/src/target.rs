//! GPU targets: a processor plus feature settings (`gfx942:sramecc+:xnack-`).
//!
//! Code built without a feature runs with either setting of it; code built
//! with a setting only runs on a GPU reporting that setting. So the targets
//! whose code a GPU can run are its own target with every subset of its
//! features, most specific first ([`Target::compatible`]).

use std::fmt;
use std::str::FromStr;

use crate::machine;

/// The prefix HSA and clang put in front of ISA names.
const AMDHSA_PREFIX: &str = "amdgcn-amd-amdhsa--";

/// A GPU target id: processor and feature settings, kept in canonical
/// (name-sorted) order so that equal targets compare and print equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    processor: Box<str>,
    features: Vec<Feature>,
}

/// One feature setting of a target, such as `xnack-`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Feature {
    name: Box<str>,
    enabled: bool,
}

impl Feature {
    /// The feature's name (`xnack`, `sramecc`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the target requires the feature on (`+`) or off (`-`).
    pub fn enabled(&self) -> bool {
        self.enabled
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.name, if self.enabled { '+' } else { '-' })
    }
}

/// Why a string is not a target id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid GPU target {input:?}: {reason}")]
pub struct ParseTargetError {
    input: String,
    reason: &'static str,
}

impl ParseTargetError {
    fn new(input: &str, reason: &'static str) -> Self {
        ParseTargetError {
            input: input.to_owned(),
            reason,
        }
    }
}

impl Target {
    /// The target a code object of version 4 or later is for, from its
    /// `e_flags`: the processor, with `xnack+`/`xnack-` and
    /// `sramecc+`/`sramecc-` when the code requires a setting ("any" and
    /// "unsupported" add none). `None` for a machine value no table knows.
    pub fn of_flags(e_flags: u32) -> Option<Target> {
        let processor = machine::processor_of_machine((e_flags & machine::EF_AMDGPU_MACH) as u8)?;
        let mut id = processor.to_owned();
        // Canonical order is by feature name: sramecc before xnack.
        match e_flags & machine::EF_AMDGPU_FEATURE_SRAMECC_V4 {
            0x800 => id.push_str(":sramecc-"),
            0xc00 => id.push_str(":sramecc+"),
            _ => {}
        }
        match e_flags & machine::EF_AMDGPU_FEATURE_XNACK_V4 {
            0x200 => id.push_str(":xnack-"),
            0x300 => id.push_str(":xnack+"),
            _ => {}
        }
        Target::parse(&id).ok()
    }

    /// Parses a target id, accepting the `amdgcn-amd-amdhsa--` prefix and
    /// features in any order.
    pub fn parse(input: &str) -> Result<Target, ParseTargetError> {
        let id = input.strip_prefix(AMDHSA_PREFIX).unwrap_or(input);
        let mut parts = id.split(':');
        let processor = parts.next().unwrap_or_default();
        if processor.is_empty() {
            return Err(ParseTargetError::new(input, "empty processor name"));
        }
        if !processor
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return Err(ParseTargetError::new(
                input,
                "processor name has characters other than letters, digits, '-', '_' and '.'",
            ));
        }
        let mut features = Vec::new();
        for part in parts {
            let (name, enabled) = if let Some(name) = part.strip_suffix('+') {
                (name, true)
            } else if let Some(name) = part.strip_suffix('-') {
                (name, false)
            } else {
                return Err(ParseTargetError::new(
                    input,
                    "a feature must end with '+' or '-'",
                ));
            };
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(ParseTargetError::new(input, "invalid feature name"));
            }
            features.push(Feature {
                name: name.into(),
                enabled,
            });
        }
        features.sort();
        if features.windows(2).any(|w| w[0].name == w[1].name) {
            return Err(ParseTargetError::new(input, "a feature is given twice"));
        }
        Ok(Target {
            processor: processor.into(),
            features,
        })
    }

    /// Parses a target a person gave (a flag, a variable), as ROCm spells
    /// them: case folded (`GFX90A` is `gfx90a`), the processor one the
    /// GPU facts know, a generic target, or `gfx` and its hex number (a
    /// processor newer than the table), and only features the processor
    /// has. Refuses what names no AMD GPU (`sm_80`, `90a`), so a typo is a
    /// usage error where it is typed rather than "no device code" later.
    pub fn parse_given(input: &str) -> Result<Target, ParseTargetError> {
        let folded = input.trim().to_ascii_lowercase();
        let target = Target::parse(&folded).map_err(|e| ParseTargetError {
            input: input.to_owned(),
            reason: e.reason,
        })?;
        let error = |reason| Err(ParseTargetError::new(input, reason));
        let facts = crate::gpus::processor(&target.processor);
        let known = facts.is_some()
            || machine::MACHINES
                .iter()
                .any(|(_, name)| *name == &*target.processor)
            || target.processor.strip_prefix("gfx").is_some_and(|n| {
                (3..=4).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_hexdigit())
            });
        if !known {
            return error("not an AMD GPU target: one is gfx and the processor's number, as ROCm and rocm_agent_enumerator spell it (gfx90a, gfx1100)");
        }
        for feature in &target.features {
            let has = match &*feature.name {
                "xnack" => facts.is_none_or(|p| p.xnack),
                "sramecc" => facts.is_none_or(|p| p.sramecc),
                _ => false,
            };
            if !has {
                return error(
                    "a feature this processor does not have (xnack or sramecc, where it has them)",
                );
            }
        }
        Ok(target)
    }

    /// Parses the target out of an offload bundle triple such as
    /// `hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+` (the text after the last `--`).
    pub fn from_bundle_triple(triple: &str) -> Result<Target, ParseTargetError> {
        match triple.rfind("--") {
            Some(at) => Target::parse(&triple[at + 2..]),
            None => Err(ParseTargetError::new(triple, "no '--' before the target")),
        }
    }

    /// A target with no feature settings.
    pub fn bare(processor: &str) -> Result<Target, ParseTargetError> {
        let target = Target::parse(processor)?;
        if target.features.is_empty() {
            Ok(target)
        } else {
            Err(ParseTargetError::new(
                processor,
                "expected a bare processor",
            ))
        }
    }

    /// The processor name (`gfx90a`).
    pub fn processor(&self) -> &str {
        &self.processor
    }

    /// Feature settings in canonical order.
    pub fn features(&self) -> &[Feature] {
        &self.features
    }

    /// The setting of one feature, if the target specifies it.
    pub fn feature(&self, name: &str) -> Option<bool> {
        self.features
            .iter()
            .find(|f| &*f.name == name)
            .map(|f| f.enabled)
    }

    /// This target without any feature settings.
    pub fn without_features(&self) -> Target {
        Target {
            processor: self.processor.clone(),
            features: Vec::new(),
        }
    }

    /// Whether code built for `self` runs on a GPU whose live target is `gpu`.
    pub fn runs_on(&self, gpu: &Target) -> bool {
        self.processor == gpu.processor
            && self
                .features
                .iter()
                .all(|f| gpu.feature(&f.name) == Some(f.enabled))
    }

    /// Every target whose code runs on this one, most specific first: all
    /// subsets of the features, in the order of a bitmask counting down from
    /// all bits set (the first feature is the most significant bit), which
    /// is the order ROCm's reference runtime searches in.
    pub fn compatible(&self) -> Vec<Target> {
        let n = self.features.len().min(16);
        let all: u32 = (1u32 << n) - 1;
        (0..=all)
            .rev()
            .map(|mask| Target {
                processor: self.processor.clone(),
                features: self.features[..n]
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << (n - 1 - i)) != 0)
                    .map(|(_, f)| f.clone())
                    .collect(),
            })
            .collect()
    }

    /// The generic target (code object v6) whose code runs on this
    /// processor, with the same feature settings, if there is one.
    pub fn generic(&self) -> Option<Target> {
        generic_processor(&self.processor).map(|generic| Target {
            processor: generic.into(),
            features: self.features.clone(),
        })
    }

    /// Whether this is a generic target such as `gfx11-generic`.
    pub fn is_generic(&self) -> bool {
        self.processor.ends_with("-generic")
    }

    /// The targets this one stands for when it leaves features unsaid that
    /// its processor has (the GPU table says which): a GPU in either mode
    /// of each (07-gpu-targets.md, "Features": `--target gfx90a` is the
    /// processor in whichever mode it will run). One for each setting of
    /// the unsaid features, `+` before `-`; just this target when it says
    /// them all (a GPU whose live modes are known).
    pub fn mode_variants(&self) -> Vec<Target> {
        let facts = crate::gpus::processor(&self.processor);
        let unsaid: Vec<&str> = [
            ("sramecc", facts.is_some_and(|p| p.sramecc)),
            ("xnack", facts.is_some_and(|p| p.xnack)),
        ]
        .into_iter()
        .filter(|(name, has)| *has && self.feature(name).is_none())
        .map(|(name, _)| name)
        .collect();
        let mut variants = vec![self.clone()];
        for name in unsaid {
            variants = variants
                .into_iter()
                .flat_map(|target| {
                    [true, false].map(|enabled| {
                        let mut features = target.features.clone();
                        features.push(Feature {
                            name: name.into(),
                            enabled,
                        });
                        features.sort();
                        Target {
                            processor: target.processor.clone(),
                            features,
                        }
                    })
                })
                .collect();
        }
        variants
    }

    /// The order in which code for this GPU is chosen: the full target, its
    /// feature-dropping variants, then the generic target with the same
    /// features and the bare generic target.
    pub fn selection_order(&self) -> Vec<Target> {
        let mut order = self.compatible();
        if let Some(generic) = self.generic() {
            let bare = generic.without_features();
            if bare != generic {
                order.push(generic);
            }
            order.push(bare);
        }
        order
    }
}

/// Formats targets as `a, b, c`, for messages.
pub fn join_targets(targets: &[Target]) -> String {
    targets
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The generic processor a processor belongs to.
pub fn generic_processor(processor: &str) -> Option<&'static str> {
    crate::gpus::processor(processor).and_then(|p| p.generic)
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.processor)?;
        for feature in &self.features {
            write!(f, ":{feature}")?;
        }
        Ok(())
    }
}

impl FromStr for Target {
    type Err = ParseTargetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Target::parse(s)
    }
}

/// A target is written as its canonical text (`gfx90a:sramecc+:xnack-`).
#[cfg(feature = "serde")]
impl serde::Serialize for Target {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Target {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Target, D::Error> {
        let text = String::deserialize(deserializer)?;
        Target::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_give_the_processor_and_the_settings_the_code_requires() {
        let t = |flags| Target::of_flags(flags).map(|t| t.to_string());
        assert_eq!(t(0x4c).as_deref(), Some("gfx942"));
        assert_eq!(t(0x4c | 0x100 | 0x400).as_deref(), Some("gfx942"));
        assert_eq!(
            t(0x3f | 0x300 | 0x800).as_deref(),
            Some("gfx90a:sramecc-:xnack+")
        );
        assert_eq!(t(0x3f | 0x200).as_deref(), Some("gfx90a:xnack-"));
        assert_eq!(t(0x5d).as_deref(), Some("gfx1170"));
        assert_eq!(t(0x62).as_deref(), Some("gfx11-7-generic"));
        assert_eq!(t(0xeb).as_deref(), Some("gfx1250-strict"));
        // The generic version (bits 31:24) does not change the target.
        assert_eq!(t(0x0100_0054).as_deref(), Some("gfx11-generic"));
        assert_eq!(t(0x00), None);
        assert_eq!(t(0x01), None);
    }

    fn t(s: &str) -> Target {
        Target::parse(s).unwrap()
    }

    fn names(targets: &[Target]) -> Vec<String> {
        targets.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn parses_prefixed_target_into_canonical_form() {
        let target = t("amdgcn-amd-amdhsa--gfx942:xnack-:sramecc+");
        assert_eq!(target.processor(), "gfx942");
        assert_eq!(target.feature("sramecc"), Some(true));
        assert_eq!(target.feature("xnack"), Some(false));
        assert_eq!(target.to_string(), "gfx942:sramecc+:xnack-");
        assert_eq!(target, t("gfx942:sramecc+:xnack-"));
    }

    #[test]
    fn parses_bundle_triples() {
        let target = Target::from_bundle_triple("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+").unwrap();
        assert_eq!(target.to_string(), "gfx90a:xnack+");
        assert!(Target::from_bundle_triple("host-x86_64").is_err());
    }

    #[test]
    fn rejects_malformed_targets() {
        for bad in [
            "",
            ":xnack+",
            "gfx90a:xnack",
            "gfx90a:+",
            "gfx90a:xnack+:xnack-",
            "gfx 90a",
            "gfx90a::xnack+",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn compatible_targets_are_most_specific_first() {
        assert_eq!(
            names(&t("gfx942:sramecc+:xnack-").compatible()),
            [
                "gfx942:sramecc+:xnack-",
                "gfx942:sramecc+",
                "gfx942:xnack-",
                "gfx942"
            ]
        );
        assert_eq!(names(&t("gfx1100").compatible()), ["gfx1100"]);
        assert_eq!(
            names(&t("gfx90a:xnack-").compatible()),
            ["gfx90a:xnack-", "gfx90a"]
        );
    }

    #[test]
    fn xnack_plus_code_never_runs_on_xnack_minus() {
        let gpu = t("gfx90a:xnack-");
        assert!(t("gfx90a").runs_on(&gpu));
        assert!(t("gfx90a:xnack-").runs_on(&gpu));
        assert!(!t("gfx90a:xnack+").runs_on(&gpu));
        assert!(!t("gfx908").runs_on(&gpu));
        assert!(!gpu.compatible().iter().any(|c| c == &t("gfx90a:xnack+")));
    }

    #[test]
    fn selection_order_ends_with_generic_targets() {
        assert_eq!(
            names(&t("gfx1151").selection_order()),
            ["gfx1151", "gfx11-generic"]
        );
        assert_eq!(
            names(&t("gfx942:sramecc+").selection_order()),
            [
                "gfx942:sramecc+",
                "gfx942",
                "gfx9-4-generic:sramecc+",
                "gfx9-4-generic"
            ]
        );
        assert_eq!(names(&t("gfx803").selection_order()), ["gfx803"]);
        assert!(t("gfx11-generic").is_generic());
    }

    #[test]
    fn given_targets_fold_case_and_name_an_amd_gpu() {
        let given = |s| Target::parse_given(s).map(|t| t.to_string());
        assert_eq!(given("GFX90A").unwrap(), "gfx90a");
        assert_eq!(given(" gfx90a:XNACK-").unwrap(), "gfx90a:xnack-");
        assert_eq!(given("gfx1100").unwrap(), "gfx1100");
        assert_eq!(given("gfx11-generic").unwrap(), "gfx11-generic");
        assert_eq!(given("gfx1250-strict").unwrap(), "gfx1250-strict");
        assert_eq!(given("gfx1310").unwrap(), "gfx1310");
        assert_eq!(
            given("amdgcn-amd-amdhsa--gfx942:sramecc+").unwrap(),
            "gfx942:sramecc+"
        );
        assert_eq!(given("gfx2000").unwrap(), "gfx2000");
        for bad in [
            "sm_80",
            "90a",
            "gfx",
            "gfx90",
            "gfx1100:xnack+",
            "gfx90a:foo+",
            "cuda",
            "gfx12345",
            "",
        ] {
            let error = Target::parse_given(bad).unwrap_err().to_string();
            assert!(error.contains(&format!("{bad:?}")), "{error}");
        }
    }

    #[test]
    fn a_target_leaving_features_unsaid_stands_for_either_mode_of_each() {
        assert_eq!(
            names(&t("gfx90a").mode_variants()),
            [
                "gfx90a:sramecc+:xnack+",
                "gfx90a:sramecc+:xnack-",
                "gfx90a:sramecc-:xnack+",
                "gfx90a:sramecc-:xnack-"
            ]
        );
        assert_eq!(
            names(&t("gfx90a:sramecc+").mode_variants()),
            ["gfx90a:sramecc+:xnack+", "gfx90a:sramecc+:xnack-"]
        );
        assert_eq!(
            names(&t("gfx900").mode_variants()),
            ["gfx900:xnack+", "gfx900:xnack-"]
        );
        assert_eq!(names(&t("gfx1100").mode_variants()), ["gfx1100"]);
        assert_eq!(
            names(&t("gfx942:sramecc+:xnack-").mode_variants()),
            ["gfx942:sramecc+:xnack-"]
        );
        assert_eq!(names(&t("gfx9999").mode_variants()), ["gfx9999"]);
    }

    #[test]
    fn strict_targets_are_their_own_identity() {
        let strict = t("amdgcn-amd-amdhsa--gfx1250-strict");
        assert_eq!(strict.processor(), "gfx1250-strict");
        assert_eq!(strict.to_string(), "gfx1250-strict");
        assert_eq!(
            t("gfx1250-strict:xnack-").to_string(),
            "gfx1250-strict:xnack-"
        );
        assert_eq!(
            Target::from_bundle_triple("hipv4-amdgcn-amd-amdhsa--gfx1250-strict").unwrap(),
            strict
        );
        let plain = t("gfx1250");
        assert!(!plain.runs_on(&strict));
        assert!(!strict.runs_on(&plain));
        assert!(!strict.selection_order().contains(&plain));
        assert!(!plain.selection_order().contains(&strict));
        // gfx12-5-generic holds gfx1250 and gfx1251, not the strict mode.
        assert_eq!(names(&strict.selection_order()), ["gfx1250-strict"]);
        assert_eq!(
            crate::Owner::of(&strict).to_string(),
            crate::Owner::of(&plain).to_string()
        );
    }
}

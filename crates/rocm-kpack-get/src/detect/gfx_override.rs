//! `HSA_OVERRIDE_GFX_VERSION`: many Radeon owners run ROCm with it, so the
//! runtime treats their chip as a target ROCm builds for (an RX 6700 XT,
//! gfx1031, as gfx1030 with `10.3.0`). The HSA runtime applies it itself;
//! GPUs read from sysfs get it here, as ROCm's libhsakmt does when it reads
//! the same topology: the per-node `HSA_OVERRIDE_GFX_VERSION_<node>` first,
//! else `HSA_OVERRIDE_GFX_VERSION`, the value `major.minor.stepping` in
//! decimal, the target `gfx` + decimal major + hex minor + hex stepping.
//! Since rocm-systems#5686 (ROCm 7) the runtime takes a variable set empty
//! as unset, and refuses a value that changes the chip's major version
//! (10.3.0 on a gfx1100): such a value is not used here either.

use std::collections::BTreeMap;

use kpack_gpu::Target;

use super::sysfs::processor_for_gfx_target_version;

/// The variable that applies to every GPU.
pub(crate) const VARIABLE: &str = kpack_env::EnvVars::HSA_OVERRIDE_GFX_VERSION;

/// Why a variable's value was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    #[error("{variable}={value:?} is not major.minor.stepping in decimal (like 10.3.0)")]
    Malformed { variable: String, value: String },
    #[error("{variable}={value} names no GPU target")]
    NoTarget { variable: String, value: String },
    #[error(
        "{variable}={value} would change the major version ({chip_major} to {major}), \
         which the HSA runtime refuses (rocm-systems#5686)"
    )]
    OtherMajor {
        variable: String,
        value: String,
        chip_major: u64,
        major: u64,
    },
}

/// The override variables set in this process's environment, by name.
pub(crate) fn from_environment() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value)))
        .filter(|(name, _)| is_override_variable(name))
        .map(|(name, value)| (name, value.to_string_lossy().into_owned()))
        .collect()
}

/// `HSA_OVERRIDE_GFX_VERSION` or `HSA_OVERRIDE_GFX_VERSION_<decimal>`.
fn is_override_variable(name: &str) -> bool {
    match name.strip_prefix(VARIABLE) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix('_')
            .is_some_and(|node| !node.is_empty() && node.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// Whether a variable's value is empty, which the runtime takes as unset.
pub(crate) fn is_unset(value: &str) -> bool {
    value.trim().is_empty()
}

/// The variable that applies to kfd node `node` and its value: the
/// per-node one wins over the one for every GPU, as in libhsakmt; one set
/// empty is unset.
pub(crate) fn for_node(variables: &BTreeMap<String, String>, node: u32) -> Option<(&str, &str)> {
    let per_node = format!("{VARIABLE}_{node}");
    let set = |name: &str| {
        variables
            .get_key_value(name)
            .filter(|(_, value)| !is_unset(value))
    };
    set(&per_node)
        .or_else(|| set(VARIABLE))
        .map(|(name, value)| (name.as_str(), value.as_str()))
}

/// The processor `value` makes the runtime run a chip of
/// `gfx_target_version` `chip` as (`10.3.0` is gfx1030, `9.0.10` gfx90a).
/// Accepts what libhsakmt accepts (three decimal numbers, major up to 63,
/// minor and stepping up to 255) with the chip's major version, and of
/// that what names a target.
pub fn processor(variable: &str, value: &str, chip: u64) -> Result<String, OverrideError> {
    let malformed = || OverrideError::Malformed {
        variable: variable.to_owned(),
        value: value.to_owned(),
    };
    let numbers: Vec<u64> = value
        .trim()
        .split('.')
        .map(|part| {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            part.parse().ok()
        })
        .collect::<Option<_>>()
        .ok_or_else(malformed)?;
    let [major, minor, stepping] = numbers[..] else {
        return Err(malformed());
    };
    if major > 63 || minor > 255 || stepping > 255 {
        return Err(malformed());
    }
    let chip_major = chip / 10_000;
    if major != chip_major {
        return Err(OverrideError::OtherMajor {
            variable: variable.to_owned(),
            value: value.trim().to_owned(),
            chip_major,
            major,
        });
    }
    processor_for_gfx_target_version(major * 10_000 + minor * 100 + stepping).ok_or_else(|| {
        OverrideError::NoTarget {
            variable: variable.to_owned(),
            value: value.trim().to_owned(),
        }
    })
}

/// The value that makes the runtime run a chip as `processor`
/// (`gfx1030` is `10.3.0`, `gfx90a` `9.0.10`); `None` for a name that is
/// not `gfx` and a decimal major with hex minor and stepping.
pub(crate) fn value_for(processor: &str) -> Option<String> {
    let number = processor.strip_prefix("gfx")?;
    if !(3..=4).contains(&number.len()) || !number.is_ascii() {
        return None;
    }
    let (major, rest) = number.split_at(number.len() - 2);
    let major: u32 = major.parse().ok()?;
    let minor = u32::from_str_radix(&rest[..1], 16).ok()?;
    let stepping = u32::from_str_radix(&rest[1..], 16).ok()?;
    Some(format!("{major}.{minor}.{stepping}"))
}

/// A GPU the variable for every GPU applies to: its node, its chip's
/// processor and `gfx_target_version`.
pub(crate) type Chip<'a> = (u32, &'a str, u64);

/// The warning for an `HSA_OVERRIDE_GFX_VERSION` that applies to GPUs of
/// different processors (`chips`, in node order) and retargets some of
/// them: the per-node variables that retarget only those. `None` when all
/// the GPUs it applies to are one processor, or it retargets none (a value
/// the runtime refuses is warned of per GPU).
pub(crate) fn global_warning(
    variables: &BTreeMap<String, String>,
    chips: &[Chip<'_>],
) -> Option<String> {
    let value = variables.get(VARIABLE).filter(|value| !is_unset(value))?;
    let applies: Vec<&Chip<'_>> = chips
        .iter()
        .filter(|(node, _, _)| for_node(variables, *node).is_some_and(|(name, _)| name == VARIABLE))
        .collect();
    let first = applies.first()?;
    if applies
        .iter()
        .all(|(_, processor, _)| processor == &first.1)
    {
        return None;
    }
    let meant: Vec<&Chip<'_>> = applies
        .iter()
        .copied()
        .filter(|(_, processor, version)| {
            self::processor(VARIABLE, value, *version).is_ok_and(|target| target != *processor)
        })
        .collect();
    if meant.is_empty() {
        return None;
    }
    let value = value.trim();
    let listed = |chips: &[&Chip<'_>]| -> Vec<String> {
        chips
            .iter()
            .map(|(node, processor, _)| format!("{processor} (node {node})"))
            .collect()
    };
    let per_node: Vec<String> = meant
        .iter()
        .map(|(node, _, _)| format!("{VARIABLE}_{node}={value}"))
        .collect();
    Some(format!(
        "{VARIABLE}={value} applies to every GPU, and this machine's are different processors: {}; \
         to retarget only the {}, set {} instead and unset {VARIABLE}",
        listed(&applies).join(", "),
        listed(&meant).join(" and "),
        per_node.join(" and "),
    ))
}

/// How ROCm users run a GPU whose own processor has no code in a package
/// that has code for a sibling: the per-node override (the variable for
/// every GPU when the node is unknown) naming the first processor of
/// `offered` that shares the GPU's generic target, which keeps the major
/// version the runtime insists on. `None` when none does.
pub fn suggestion(gpu: &Target, node: Option<u32>, offered: &[Target]) -> Option<String> {
    let generic = gpu.generic()?.without_features();
    let sibling = offered.iter().find(|target| {
        target.processor() != gpu.processor()
            && target.generic().map(|g| g.without_features()).as_ref() == Some(&generic)
    })?;
    let value = value_for(sibling.processor())?;
    let variable = match node {
        Some(node) => format!("{VARIABLE}_{node}"),
        None => VARIABLE.to_owned(),
    };
    Some(format!(
        "ROCm users run a {} with {}'s code: set {variable}={value} (this GPU only) for the programs that use it and for kpack-get, which then installs that code",
        gpu.processor(),
        sibling.processor()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_processors_as_the_runtime_reads_them() {
        for (processor, value) in [
            ("gfx1030", "10.3.0"),
            ("gfx90a", "9.0.10"),
            ("gfx1151", "11.5.1"),
            ("gfx900", "9.0.0"),
        ] {
            assert_eq!(value_for(processor).as_deref(), Some(value), "{processor}");
        }
        assert_eq!(value_for("gfx11-generic"), None);
        assert_eq!(value_for("sm_80"), None);
    }

    #[test]
    fn a_sibling_with_code_is_suggested_per_node() {
        let t = |s: &str| Target::parse(s).unwrap();
        let offered = [t("gfx1030"), t("gfx90a:xnack-"), t("gfx1100")];
        let suggestion = suggestion(&t("gfx1036"), Some(2), &offered).unwrap();
        assert!(
            suggestion.contains("HSA_OVERRIDE_GFX_VERSION_2=10.3.0"),
            "{suggestion}"
        );
        assert!(suggestion.contains("gfx1030's code"), "{suggestion}");
        let global = super::suggestion(&t("gfx1103"), None, &offered).unwrap();
        assert!(
            global.contains("HSA_OVERRIDE_GFX_VERSION=11.0.0"),
            "{global}"
        );
        assert_eq!(super::suggestion(&t("gfx1201"), Some(1), &offered), None);
        assert_eq!(super::suggestion(&t("gfx908"), Some(1), &offered), None);
    }

    #[test]
    fn values_are_decimal_with_hex_rendered_minor_and_stepping() {
        for (value, chip, expected) in [
            ("10.3.0", 100301, "gfx1030"),
            ("11.0.0", 110003, "gfx1100"),
            ("9.0.10", 90008, "gfx90a"),
            (" 11.5.1\n", 110000, "gfx1151"),
        ] {
            assert_eq!(
                processor(VARIABLE, value, chip).as_deref(),
                Ok(expected),
                "{value}"
            );
        }
    }

    #[test]
    fn malformed_values_are_refused_naming_the_variable() {
        for value in [
            "", "10.3", "10.3.0.1", "gfx1030", "10.3.x", "10.-3.0", "64.0.0", "10.3.0x",
        ] {
            let error = processor("HSA_OVERRIDE_GFX_VERSION_1", value, 100301).unwrap_err();
            assert!(
                error.to_string().starts_with("HSA_OVERRIDE_GFX_VERSION_1="),
                "{value}: {error}"
            );
        }
        assert!(matches!(
            processor(VARIABLE, "10.16.0", 100301),
            Err(OverrideError::NoTarget { .. })
        ));
    }

    #[test]
    fn a_value_changing_the_major_version_is_refused_as_the_runtime_refuses_it() {
        let error = processor(VARIABLE, "10.3.0", 110000).unwrap_err();
        assert_eq!(
            error,
            OverrideError::OtherMajor {
                variable: VARIABLE.to_owned(),
                value: "10.3.0".to_owned(),
                chip_major: 11,
                major: 10,
            }
        );
        assert_eq!(
            error.to_string(),
            "HSA_OVERRIDE_GFX_VERSION=10.3.0 would change the major version (11 to 10), \
             which the HSA runtime refuses (rocm-systems#5686)"
        );
        assert!(matches!(
            processor(VARIABLE, "11.0.0", 100300),
            Err(OverrideError::OtherMajor { .. })
        ));
        assert!(matches!(
            processor(VARIABLE, "0.0.0", 100300),
            Err(OverrideError::OtherMajor { .. })
        ));
        // Within a major version, any target.
        assert_eq!(
            processor(VARIABLE, "12.5.0", 120001).as_deref(),
            Ok("gfx1250")
        );
    }

    #[test]
    fn a_global_value_over_different_processors_names_the_per_node_form() {
        let chips = [(1, "gfx1100", 110000), (2, "gfx1036", 100306)];
        let global = |value: &str| BTreeMap::from([(VARIABLE.to_owned(), value.to_owned())]);
        assert_eq!(
            global_warning(&global("10.3.0"), &chips).as_deref(),
            Some(
                "HSA_OVERRIDE_GFX_VERSION=10.3.0 applies to every GPU, and this machine's are \
                 different processors: gfx1100 (node 1), gfx1036 (node 2); to retarget only the \
                 gfx1036 (node 2), set HSA_OVERRIDE_GFX_VERSION_2=10.3.0 instead and unset \
                 HSA_OVERRIDE_GFX_VERSION"
            )
        );
        // One processor, or a per-node variable for the other: no surprise.
        let same = [(1, "gfx1031", 100301), (2, "gfx1031", 100301)];
        assert_eq!(global_warning(&global("10.3.0"), &same), None);
        let mut both = global("10.3.0");
        both.insert(format!("{VARIABLE}_1"), "11.0.0".to_owned());
        assert_eq!(global_warning(&both, &chips), None);
        // A value that retargets none of them.
        assert_eq!(global_warning(&global("10.3.6"), &chips), None);
        assert_eq!(global_warning(&global(""), &chips), None);
    }

    #[test]
    fn the_per_node_variable_wins() {
        let variables: BTreeMap<String, String> = [
            (VARIABLE.to_owned(), "10.3.0".to_owned()),
            (format!("{VARIABLE}_2"), "11.0.0".to_owned()),
        ]
        .into();
        assert_eq!(for_node(&variables, 1), Some((VARIABLE, "10.3.0")));
        assert_eq!(
            for_node(&variables, 2),
            Some(("HSA_OVERRIDE_GFX_VERSION_2", "11.0.0"))
        );
        assert_eq!(for_node(&BTreeMap::new(), 1), None);
        assert!(is_override_variable("HSA_OVERRIDE_GFX_VERSION_12"));
        assert!(!is_override_variable("HSA_OVERRIDE_GFX_VERSION_X"));
        assert!(!is_override_variable("HSA_OVERRIDE_GFX_VERSION_"));
    }

    #[test]
    fn a_variable_set_empty_is_unset() {
        let variables: BTreeMap<String, String> = [
            (VARIABLE.to_owned(), "11.0.0".to_owned()),
            (format!("{VARIABLE}_1"), String::new()),
            (format!("{VARIABLE}_2"), " ".to_owned()),
        ]
        .into();
        // The per-node ones are unset, so the one for every GPU applies.
        assert_eq!(for_node(&variables, 1), Some((VARIABLE, "11.0.0")));
        assert_eq!(for_node(&variables, 2), Some((VARIABLE, "11.0.0")));
        let empty: BTreeMap<String, String> = [(VARIABLE.to_owned(), String::new())].into();
        assert_eq!(for_node(&empty, 0), None);
    }
}

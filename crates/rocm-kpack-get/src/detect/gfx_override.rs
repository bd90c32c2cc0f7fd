//! `HSA_OVERRIDE_GFX_VERSION`: many Radeon owners run ROCm with it, so the
//! runtime treats their chip as a target ROCm builds for (an RX 6700 XT,
//! gfx1031, as gfx1030 with `10.3.0`). The HSA runtime applies it itself;
//! GPUs read from sysfs get it here, as ROCm's libhsakmt does when it reads
//! the same topology: the per-node `HSA_OVERRIDE_GFX_VERSION_<node>` first,
//! else `HSA_OVERRIDE_GFX_VERSION`, the value `major.minor.stepping` in
//! decimal, the target `gfx` + decimal major + hex minor + hex stepping.

use std::collections::BTreeMap;

use super::sysfs::processor_for_gfx_target_version;

/// The variable that applies to every GPU.
pub const VARIABLE: &str = kpack_env::EnvVars::HSA_OVERRIDE_GFX_VERSION;

/// Why a variable's value was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    #[error("{variable}={value:?} is not major.minor.stepping in decimal (like 10.3.0)")]
    Malformed { variable: String, value: String },
    #[error("{variable}={value} names no GPU target")]
    NoTarget { variable: String, value: String },
}

/// The override variables set in this process's environment, by name.
pub fn from_environment() -> BTreeMap<String, String> {
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

/// The variable that applies to kfd node `node` and its value: the
/// per-node one wins over the one for every GPU, as in libhsakmt.
pub fn for_node(variables: &BTreeMap<String, String>, node: u32) -> Option<(&str, &str)> {
    let per_node = format!("{VARIABLE}_{node}");
    variables
        .get_key_value(&per_node)
        .or_else(|| variables.get_key_value(VARIABLE))
        .map(|(name, value)| (name.as_str(), value.as_str()))
}

/// The processor `value` names (`10.3.0` is gfx1030, `9.0.10` gfx90a).
/// Accepts what libhsakmt accepts (three decimal numbers, major up to 63,
/// minor and stepping up to 255), and of that what names a target.
pub fn processor(variable: &str, value: &str) -> Result<String, OverrideError> {
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
    processor_for_gfx_target_version(major * 10_000 + minor * 100 + stepping).ok_or_else(|| {
        OverrideError::NoTarget {
            variable: variable.to_owned(),
            value: value.trim().to_owned(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_decimal_with_hex_rendered_minor_and_stepping() {
        for (value, expected) in [
            ("10.3.0", "gfx1030"),
            ("11.0.0", "gfx1100"),
            ("9.0.10", "gfx90a"),
            (" 11.5.1\n", "gfx1151"),
        ] {
            assert_eq!(
                processor(VARIABLE, value).as_deref(),
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
            let error = processor("HSA_OVERRIDE_GFX_VERSION_1", value).unwrap_err();
            assert!(
                error.to_string().starts_with("HSA_OVERRIDE_GFX_VERSION_1="),
                "{value}: {error}"
            );
        }
        assert!(matches!(
            processor(VARIABLE, "10.16.0"),
            Err(OverrideError::NoTarget { .. })
        ));
        assert!(matches!(
            processor(VARIABLE, "0.0.0"),
            Err(OverrideError::NoTarget { .. })
        ));
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
}

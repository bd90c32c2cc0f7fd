//! gfx1250 A0 silicon and `gfx1250-strict` (07-gpu-targets.md): A0
//! silicon needs the code of its own target, `gfx1250-strict`, though the
//! kernel driver gives it the same `gfx_target_version` (120500) as B0
//! and later. The ASIC revision in the kfd node's `capability` (bits
//! 25:22, 0 for A0; HSA's `HSA_AMD_AGENT_INFO_ASIC_REVISION`) tells them
//! apart. Which of the two names the HSA runtime reports for A0 depends on
//! `HSA_DISABLE_GFX12_STRICT` and has changed between releases: the rule is
//! [`runtime_reports_strict`], the one place that knows it.

use kpack_gpu::target::ParseTargetError;
use kpack_gpu::Target;

/// The variable that decides which name A0 silicon reports.
pub(crate) const VARIABLE: &str = kpack_env::EnvVars::HSA_DISABLE_GFX12_STRICT;

/// B0 and later silicon, and the name the runtime may report for A0.
pub(crate) const PLAIN: &str = "gfx1250";

/// A0 silicon's own target.
pub(crate) const STRICT: &str = "gfx1250-strict";

/// Where the ASIC revision is in a kfd node's `capability`
/// (`HSA_CAP_ASIC_REVISION_MASK`, bits 25:22).
const ASIC_REVISION_SHIFT: u32 = 22;
const ASIC_REVISION_MASK: u64 = 0xf;

/// The ASIC revision a kfd node's `capability` holds (0 is A0).
pub fn asic_revision(capability: u64) -> u8 {
    // Four bits: the cast keeps all of them.
    ((capability >> ASIC_REVISION_SHIFT) & ASIC_REVISION_MASK) as u8
}

/// The processor silicon of `processor` at ASIC revision `revision` runs
/// the code of: `gfx1250-strict` for gfx1250 A0, else `processor`.
pub(crate) fn silicon_processor(processor: &str, revision: u8) -> &str {
    if processor == PLAIN && revision == 0 {
        STRICT
    } else {
        processor
    }
}

/// Whether the HSA runtime reports A0 silicon as `gfx1250-strict`, with
/// `HSA_DISABLE_GFX12_STRICT` set to `value` (`None`: unset).
///
/// Since rocm-systems#11317 and #11442 A0 reports `gfx1250` unless the
/// variable is exactly `0`. rocm-systems#11575, if merged, turns this
/// around (`gfx1250-strict` unless it is exactly `1`): then this line
/// becomes `value != Some("1")`, and everything else follows.
pub(crate) fn runtime_reports_strict(value: Option<&str>) -> bool {
    value == Some("0")
}

/// The target the HSA runtime reports for a GPU whose silicon is
/// `silicon`, the variable set to `value`: A0 silicon's as the rule says,
/// any other's its own.
pub fn reported(silicon: &Target, value: Option<&str>) -> Result<Target, ParseTargetError> {
    if silicon.processor() == STRICT && !runtime_reports_strict(value) {
        with_processor(silicon, PLAIN)
    } else {
        Ok(silicon.clone())
    }
}

/// The other name of the same silicon, `gfx1250` for `gfx1250-strict` and
/// the reverse, with the same features; `None` for any other target.
pub(crate) fn other_name(target: &Target) -> Option<Target> {
    let other = match target.processor() {
        PLAIN => STRICT,
        STRICT => PLAIN,
        _ => return None,
    };
    with_processor(target, other).ok()
}

/// Whether processors `a` and `b` name the same chip: equal, or gfx1250
/// and gfx1250-strict.
pub(crate) fn same_chip(a: &str, b: &str) -> bool {
    chip(a) == chip(b)
}

/// The chip `processor` names: gfx1250 for either of its names.
fn chip(processor: &str) -> &str {
    if processor == STRICT {
        PLAIN
    } else {
        processor
    }
}

/// The variable's setting, for people: `HSA_DISABLE_GFX12_STRICT=0`, or
/// `HSA_DISABLE_GFX12_STRICT unset`.
pub fn describe(value: Option<&str>) -> String {
    match value {
        Some(value) => format!("{VARIABLE}={value}"),
        None => format!("{VARIABLE} unset"),
    }
}

/// What makes the runtime report A0 silicon as `gfx1250-strict`, for
/// people, read from the rule: `set HSA_DISABLE_GFX12_STRICT=0` today.
pub(crate) fn strict_setting() -> String {
    if runtime_reports_strict(None) {
        format!("unset {VARIABLE}")
    } else {
        format!("set {VARIABLE}=0")
    }
}

/// `target` with its processor replaced by `processor`, features kept.
fn with_processor(target: &Target, processor: &str) -> Result<Target, ParseTargetError> {
    let mut id = processor.to_owned();
    for feature in target.features() {
        id.push(':');
        id.push_str(&feature.to_string());
    }
    Target::parse(&id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(id: &str) -> Target {
        Target::parse(id).unwrap()
    }

    #[test]
    fn the_asic_revision_is_capability_bits_25_to_22() {
        assert_eq!(asic_revision(0), 0);
        assert_eq!(asic_revision(1 << 22), 1);
        assert_eq!(asic_revision(0xf << 22), 15);
        // SRAM ECC (bit 26) and bits below 22 are not the revision.
        assert_eq!(asic_revision(0x0400_0000 | 0x003f_ffff), 0);
        assert_eq!(asic_revision(0x0400_0000 | (2 << 22)), 2);
    }

    #[test]
    fn only_gfx1250_a0_silicon_is_strict() {
        assert_eq!(silicon_processor("gfx1250", 0), "gfx1250-strict");
        assert_eq!(silicon_processor("gfx1250", 1), "gfx1250");
        assert_eq!(silicon_processor("gfx1250", 15), "gfx1250");
        assert_eq!(silicon_processor("gfx1251", 0), "gfx1251");
        assert_eq!(silicon_processor("gfx1100", 0), "gfx1100");
    }

    #[test]
    fn a0_reports_gfx1250_unless_the_variable_is_exactly_0() {
        let a0 = target("gfx1250-strict");
        let a0_reports = |value| reported(&a0, value).unwrap().to_string();
        assert_eq!(a0_reports(None), "gfx1250");
        assert_eq!(a0_reports(Some("0")), "gfx1250-strict");
        assert_eq!(a0_reports(Some("1")), "gfx1250");
        assert_eq!(a0_reports(Some("")), "gfx1250");
        assert_eq!(a0_reports(Some(" 0")), "gfx1250");
        assert_eq!(a0_reports(Some("00")), "gfx1250");
        // B0 and other GPUs report what they are, whatever the variable.
        for id in ["gfx1250", "gfx1100", "gfx90a:sramecc+:xnack-"] {
            assert_eq!(reported(&target(id), Some("0")).unwrap(), target(id));
        }
        assert_eq!(strict_setting(), "set HSA_DISABLE_GFX12_STRICT=0");
    }

    #[test]
    fn the_two_names_of_the_chip_are_each_others_other() {
        assert_eq!(other_name(&target("gfx1250")), Some(target(STRICT)));
        assert_eq!(other_name(&target(STRICT)), Some(target(PLAIN)));
        assert_eq!(other_name(&target("gfx1251")), None);
        assert!(same_chip("gfx1250", "gfx1250-strict"));
        assert!(same_chip("gfx1250-strict", "gfx1250"));
        assert!(same_chip("gfx1100", "gfx1100"));
        assert!(!same_chip("gfx1250", "gfx1251"));
    }

    #[test]
    fn the_setting_is_described_as_set_or_unset() {
        assert_eq!(describe(None), "HSA_DISABLE_GFX12_STRICT unset");
        assert_eq!(describe(Some("0")), "HSA_DISABLE_GFX12_STRICT=0");
    }
}

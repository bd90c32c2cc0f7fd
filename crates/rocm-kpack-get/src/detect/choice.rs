//! Which GPU targets to install for: one decision, made from the settings
//! before any command looks for GPUs. Targets given on the command line
//! (or `KPACK_GET_TARGETS`) replace detection; for a Python environment,
//! rocm-bootstrap's variables come next; else the GPUs are detected; an
//! upgrade that detects none keeps the targets its packages were
//! installed for.

use std::fmt;

use kpack_gpu::target::ParseTargetError;
use kpack_gpu::Target;

use super::{detect, DetectOptions, Detection};

/// rocm-bootstrap's list of targets to use instead of detecting.
pub(crate) const FORCE_VARIABLE: &str = kpack_env::EnvVars::ROCM_BOOTSTRAP_FORCE_GFX_ARCH;
/// rocm-bootstrap's switch turning detection off.
pub const DISABLE_VARIABLE: &str = kpack_env::EnvVars::ROCM_BOOTSTRAP_DISABLE_DETECTION;

/// Where the targets come from, decided once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetChoice {
    /// `--target` or `KPACK_GET_TARGETS`, as given: parsed when the
    /// targets are chosen, so a command that needs none never refuses them.
    Flag(Vec<String>),
    /// `ROCM_BOOTSTRAP_FORCE_GFX_ARCH`, as set (Python environments).
    Forced(String),
    /// `ROCM_BOOTSTRAP_DISABLE_DETECTION` (Python environments): none.
    Disabled,
    /// Whatever detection finds.
    Detect,
}

/// Why the targets given cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TargetChoiceError {
    #[error(transparent)]
    Given(#[from] ParseTargetError),
    #[error("{FORCE_VARIABLE}={value}")]
    Forced {
        value: String,
        #[source]
        source: ParseTargetError,
    },
}

/// Where the chosen targets came from (`source` in JSON).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetSource {
    Flag,
    Forced,
    Disabled,
    Detected,
    /// Detection found none; the targets the installed packages were
    /// installed for.
    Recorded,
}

impl TargetSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetSource::Flag => "--target",
            TargetSource::Forced => FORCE_VARIABLE,
            TargetSource::Disabled => DISABLE_VARIABLE,
            TargetSource::Detected => "detection",
            TargetSource::Recorded => "recorded",
        }
    }
}

impl fmt::Display for TargetSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for TargetSource {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The targets chosen, where from, and the detection behind them (empty
/// when nothing was detected).
#[derive(Debug, Clone)]
pub struct ChosenTargets {
    /// The targets to install for: distinct, in the order their source
    /// lists them (both names of gfx1250 A0 silicon).
    pub targets: Vec<Target>,
    pub source: TargetSource,
    pub detection: Detection,
}

impl TargetChoice {
    /// For a prefix: the targets given, else detection.
    pub fn for_prefix(given: &[String]) -> TargetChoice {
        let given: Vec<String> = given
            .iter()
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        if given.is_empty() {
            TargetChoice::Detect
        } else {
            TargetChoice::Flag(given)
        }
    }

    /// For a Python environment: the targets given, else
    /// `ROCM_BOOTSTRAP_FORCE_GFX_ARCH`, else none when
    /// `ROCM_BOOTSTRAP_DISABLE_DETECTION` is set, else detection.
    pub fn for_python(given: &[String]) -> TargetChoice {
        let choice = TargetChoice::for_prefix(given);
        if choice != TargetChoice::Detect {
            return choice;
        }
        if let Some(forced) = std::env::var(FORCE_VARIABLE)
            .ok()
            .filter(|v| !v.trim().is_empty())
        {
            return TargetChoice::Forced(forced);
        }
        if std::env::var(DISABLE_VARIABLE).is_ok_and(|v| truthy(&v)) {
            return TargetChoice::Disabled;
        }
        TargetChoice::Detect
    }

    /// The targets given, when they were (`--target`'s texts).
    pub fn given(&self) -> &[String] {
        match self {
            TargetChoice::Flag(given) => given,
            _ => &[],
        }
    }

    /// Makes the choice: parses what was given, or detects with `options`.
    pub fn choose(&self, options: &DetectOptions) -> Result<ChosenTargets, TargetChoiceError> {
        let (overrides, source) = match self {
            TargetChoice::Flag(given) => {
                let targets = given
                    .iter()
                    .map(|t| Target::parse(t))
                    .collect::<Result<Vec<_>, _>>()?;
                (targets, TargetSource::Flag)
            }
            TargetChoice::Forced(value) => {
                let targets = value
                    .split([',', ';', ' '])
                    .filter(|t| !t.is_empty())
                    .map(|t| {
                        Target::parse(t).map_err(|source| TargetChoiceError::Forced {
                            value: value.clone(),
                            source,
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                return Ok(ChosenTargets::undetected(targets, TargetSource::Forced));
            }
            TargetChoice::Disabled => {
                return Ok(ChosenTargets::undetected(
                    Vec::new(),
                    TargetSource::Disabled,
                ))
            }
            TargetChoice::Detect => (Vec::new(), TargetSource::Detected),
        };
        let mut options = options.clone();
        options.overrides = overrides;
        let detection = detect(&options);
        Ok(ChosenTargets {
            targets: detection.targets(),
            source,
            detection,
        })
    }
}

impl ChosenTargets {
    /// The targets the runtime reports for the GPUs, which a check judges
    /// by: the detected GPUs' (one name for A0 silicon), else those chosen.
    pub fn reported(&self) -> Vec<Target> {
        if self.detection.gpus.is_empty() {
            self.targets.clone()
        } else {
            self.detection.reported_targets()
        }
    }

    fn undetected(targets: Vec<Target>, source: TargetSource) -> ChosenTargets {
        ChosenTargets {
            targets,
            source,
            detection: Detection::default(),
        }
    }

    /// For an upgrade: when none were found, `recorded`, the targets the
    /// installed packages were installed for (sorted, each once).
    pub fn or_recorded(mut self, recorded: Vec<Target>) -> ChosenTargets {
        if self.targets.is_empty() {
            let targets = recorded;
            if !targets.is_empty() {
                self.targets = targets;
                self.source = TargetSource::Recorded;
            }
        }
        self
    }
}

fn truthy(value: &str) -> bool {
    !matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "" | "0" | "false" | "no" | "off"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_targets_are_not_given() {
        assert_eq!(
            TargetChoice::for_prefix(&[" ".to_owned()]),
            TargetChoice::Detect
        );
        let given = TargetChoice::for_prefix(&["gfx1100".to_owned(), String::new()]);
        assert_eq!(given.given(), ["gfx1100"]);
    }

    #[test]
    fn forced_targets_are_split_and_a_bad_one_names_the_variable() {
        let options = DetectOptions::new("kpack-get".into());
        let forced = TargetChoice::Forced("gfx1100;gfx90a".to_owned());
        let chosen = forced.choose(&options).unwrap();
        assert_eq!(chosen.targets.len(), 2);
        assert_eq!(chosen.source.to_string(), FORCE_VARIABLE);
        let error = TargetChoice::Forced("gfx90a:xnack+:xnack-".to_owned())
            .choose(&options)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("{FORCE_VARIABLE}=gfx90a:xnack+:xnack-")
        );
    }
}

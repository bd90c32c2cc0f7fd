//! `pip ...`: device extras and wheel variants for Python environments
//! (06-python.md). What the subcommands share: the machine's GPUs (with
//! rocm-bootstrap's variables honoured), the environment, and failures.

pub mod check;
pub mod install;
pub mod layout;
pub mod resolve;
pub mod sync;

use std::path::Path;

use kpack_gpu::Target;
use kpack_wheel::variants::{amd, SupportedProperties};
use kpack_wheel::ExtraName;
use rocm_kpack_get::pip::environment::PythonEnvironment;
use rocm_kpack_get::pip::extras::discrete_first;
use rocm_kpack_get::pip::materialize::MaterializeError;
use rocm_kpack_get::pip::PipError;
use serde_json::json;

use super::{Context, Exit, Failure};

/// rocm-bootstrap's list of targets to use instead of detecting.
pub const FORCE_VARIABLE: &str = "ROCM_BOOTSTRAP_FORCE_GFX_ARCH";
/// rocm-bootstrap's switch turning detection off.
pub const DISABLE_VARIABLE: &str = "ROCM_BOOTSTRAP_DISABLE_DETECTION";

impl From<PipError> for Failure {
    fn from(error: PipError) -> Failure {
        let hint = match &error {
            PipError::NoInstaller { .. } => {
                Some("install pip into the environment, or put uv on PATH")
            }
            PipError::NoResolver { .. } => Some(
                "install pip into the environment, or install with `uv pip install REQ` and then run `kpack-get pip sync`",
            ),
            PipError::Spawn { .. } | PipError::Interpreter { .. } => {
                Some("--python names the environment's interpreter")
            }
            _ => None,
        };
        let code = match &error {
            PipError::Fetch { .. } | PipError::Gone { .. } => Exit::Network,
            _ => Exit::Failure,
        };
        let failure = Failure::new(code, error);
        match hint {
            Some(hint) => failure.hint(hint),
            None => failure,
        }
    }
}

impl From<MaterializeError> for Failure {
    fn from(error: MaterializeError) -> Failure {
        use std::io::ErrorKind;
        let (code, hint) = match error.io_kind() {
            Some(ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem) => (
                Exit::Local,
                "run as the environment's owner (--layout kpack leaves its binaries as installed)",
            ),
            Some(ErrorKind::StorageFull | ErrorKind::QuotaExceeded) => (
                Exit::Local,
                "free space and sync again: the next `kpack-get pip sync` finishes what was started",
            ),
            _ => (
                Exit::Failure,
                "the next `kpack-get pip sync` finishes what was started",
            ),
        };
        Failure::new(code, error).hint(hint)
    }
}

/// The GPUs to choose for, discrete first, and where they came from.
#[derive(Debug, Clone)]
pub struct Machine {
    pub targets: Vec<Target>,
    /// `--target`, `ROCM_BOOTSTRAP_FORCE_GFX_ARCH`, `detection`, or
    /// `ROCM_BOOTSTRAP_DISABLE_DETECTION`.
    pub source: &'static str,
}

impl Machine {
    /// The properties the machine supports, most preferred first.
    pub fn supported(&self) -> Result<SupportedProperties, Failure> {
        let properties =
            amd::supported(&self.targets).map_err(|e| Failure::new(Exit::Failure, e))?;
        Ok(SupportedProperties::new(properties))
    }

    /// Says, once, that there is no GPU and what follows.
    pub fn note_without_gpu(&self, context: &Context) {
        if self.targets.is_empty() {
            let why = match self.source {
                DISABLE_VARIABLE => format!("GPU detection is off ({DISABLE_VARIABLE})"),
                _ => "no GPU found".to_owned(),
            };
            context.printer.note(format!(
                "{why}: host parts only (--target names GPUs to install for)"
            ));
        }
    }

    pub fn json(&self) -> serde_json::Value {
        json!({
            "targets": self.targets.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "source": self.source,
        })
    }
}

fn truthy(value: &str) -> bool {
    !matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "" | "0" | "false" | "no" | "off"
    )
}

/// The machine's GPUs: `--target` (or `KPACK_GET_TARGETS`), else
/// `ROCM_BOOTSTRAP_FORCE_GFX_ARCH`, else none when
/// `ROCM_BOOTSTRAP_DISABLE_DETECTION` is set, else detection.
pub fn machine(context: &Context) -> Result<Machine, Failure> {
    let given = context.global.target.iter().any(|t| !t.trim().is_empty());
    if !given {
        if let Some(forced) = std::env::var(FORCE_VARIABLE)
            .ok()
            .filter(|v| !v.trim().is_empty())
        {
            let targets = forced
                .split([',', ';', ' '])
                .filter(|t| !t.is_empty())
                .map(|t| {
                    Target::parse(t).map_err(|e| {
                        Failure::new(
                            Exit::NothingFits,
                            anyhow::Error::new(e).context(format!("{FORCE_VARIABLE}={forced}")),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Machine {
                targets: discrete_first(targets),
                source: FORCE_VARIABLE,
            });
        }
        if std::env::var(DISABLE_VARIABLE).is_ok_and(|v| truthy(&v)) {
            return Ok(Machine {
                targets: Vec::new(),
                source: DISABLE_VARIABLE,
            });
        }
    }
    let (targets, _) = context.gpus()?;
    Ok(Machine {
        targets: discrete_first(targets),
        source: if given { "--target" } else { "detection" },
    })
}

/// The environment of `--python` (or the default interpreter).
pub fn environment(python: Option<&Path>) -> Result<PythonEnvironment, Failure> {
    let python = PythonEnvironment::default_python(python);
    Ok(PythonEnvironment::query(&python)?)
}

/// Joins extras for people: `device-gfx1100, device-all`.
pub fn join_extras(extras: &[ExtraName]) -> String {
    extras
        .iter()
        .map(ExtraName::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The warning for a distribution with no device code for a GPU.
pub fn unmatched_warning(dist: &str, target: &Target, offered: &[ExtraName]) -> String {
    format!(
        "{dist} has no device code for {target}: it offers {} (--all-targets takes device-all)",
        join_extras(offered)
    )
}

/// `pip variant-properties`: the supported properties, as JSON.
pub fn variant_properties(context: &Context) -> Result<(), Failure> {
    let machine = machine(context)?;
    let properties: Vec<String> = machine
        .supported()?
        .properties()
        .iter()
        .map(ToString::to_string)
        .collect();
    let document = json!({
        "properties": properties,
        "machine": machine.json(),
    });
    if context.printer.json {
        context.printer.json(&document);
    } else {
        context
            .printer
            .line(serde_json::to_string_pretty(&document).unwrap_or_default());
    }
    Ok(())
}

//! `pip ...`: device extras and wheel variants for Python environments
//! (06-python.md), one module per subcommand. What they share: the
//! machine's GPUs (with rocm-bootstrap's variables honoured), the
//! environment, and failures.

pub mod check;
pub mod download;
pub mod install;
pub mod resolve;
pub mod sync;
pub mod variant_properties;

use std::path::Path;

use kpack_gpu::Target;
use kpack_wheel::variants::{amd, SupportedProperties};
use rocm_kpack_get::detect::choice::{TargetSource, DISABLE_VARIABLE};
use rocm_kpack_get::pip::environment::PythonEnvironment;
use rocm_kpack_get::pip::extras::discrete_first;
use rocm_kpack_get::pip::layout::LayoutError;
use rocm_kpack_get::pip::materialize::MaterializeError;
use rocm_kpack_get::pip::PipError;
use serde::Serialize;

use super::{Context, Exit, Failure};

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
            PipError::Installer { .. } => Some(
                "the installer runs with the environment's configuration and the arguments after `--`: \
                 give it where the distributions come from (`-- --find-links DIR`, `-- --index-url URL`), \
                 and `-- --no-deps` if they were installed without their dependencies",
            ),
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

impl From<LayoutError> for Failure {
    fn from(error: LayoutError) -> Failure {
        match error {
            LayoutError::Pip(error) => error.into(),
            LayoutError::Materialize(error) => error.into(),
        }
    }
}

/// The GPUs to choose for, discrete first, and where they came from.
#[derive(Debug, Clone)]
pub struct Machine {
    /// The targets to install for.
    pub targets: Vec<Target>,
    /// The targets the runtime reports, which a check judges by.
    pub reported: Vec<Target>,
    /// For each GPU of gfx1250 A0 silicon the runtime reports by B0's
    /// name, a warning.
    pub strict_warnings: Vec<String>,
    pub source: TargetSource,
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
                TargetSource::Disabled => format!("GPU detection is off ({DISABLE_VARIABLE})"),
                _ => "no GPU found".to_owned(),
            };
            context.printer.note(format!(
                "{why}: host parts only (--target names GPUs to install for)"
            ));
        }
    }

    /// The machine in a report.
    pub fn report(&self) -> MachineReport {
        MachineReport {
            source: self.source,
            targets: self.targets.iter().map(ToString::to_string).collect(),
        }
    }
}

/// The machine's targets in a report, and where they came from.
#[derive(Debug, Clone, Serialize)]
pub struct MachineReport {
    pub source: TargetSource,
    pub targets: Vec<String>,
}

/// The machine's GPUs, discrete first, as the settings choose them for a
/// Python environment.
pub fn machine(context: &Context) -> Result<Machine, Failure> {
    let chosen = context.gpus()?;
    Ok(Machine {
        reported: discrete_first(chosen.reported()),
        strict_warnings: chosen.detection.strict_warnings(),
        targets: discrete_first(chosen.targets),
        source: chosen.source,
    })
}

/// The environment of `--python` (or the default interpreter).
pub fn environment(python: Option<&Path>) -> Result<PythonEnvironment, Failure> {
    let python = PythonEnvironment::default_python(python);
    Ok(PythonEnvironment::query(&python)?)
}

/// The requirements as given on the command line, parsed.
pub fn requirements(
    texts: &[String],
) -> Result<Vec<rocm_kpack_get::pip::requirement::Requirement>, Failure> {
    texts
        .iter()
        .map(|r| Ok(rocm_kpack_get::pip::requirement::Requirement::parse(r)?))
        .collect()
}

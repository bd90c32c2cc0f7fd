//! The environment's own installer: `python -m pip install`, or
//! `uv pip install --python PY` for environments made by uv, which have no
//! pip. And the resolver used to learn candidates' extras: pip, the
//! environment's or, run with `--python`, one from `python3` on `PATH`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::environment::PythonEnvironment;
use super::PipError;

/// The arguments passed on to the installer as given, and what kpack-get
/// itself reads from them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallerArgs {
    pub args: Vec<String>,
    /// `--no-deps`: the installer leaves out what an extra requires,
    /// device distributions included.
    pub no_deps: bool,
}

impl InstallerArgs {
    pub fn new(args: &[String]) -> InstallerArgs {
        InstallerArgs {
            args: args.to_vec(),
            no_deps: args.iter().any(|a| a == "--no-deps"),
        }
    }
}

/// How packages get installed into an environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installer {
    /// `python -m pip install`.
    Pip {
        /// The environment's interpreter.
        python: PathBuf,
    },
    /// `uv pip install --python PY`.
    Uv {
        /// The uv program.
        uv: PathBuf,
        /// The environment's interpreter.
        python: PathBuf,
    },
}

impl Installer {
    /// pip when the environment has it, else uv (`$UV`, beside the
    /// interpreter, or on `PATH`).
    pub fn for_environment(env: &PythonEnvironment) -> Result<Installer, PipError> {
        if env.has_pip {
            return Ok(Installer::Pip {
                python: env.python.clone(),
            });
        }
        find_uv(&env.prefix)
            .map(|uv| Installer::Uv {
                uv,
                python: env.python.clone(),
            })
            .ok_or_else(|| PipError::NoInstaller {
                python: env.python.clone(),
            })
    }

    /// The command for people (`python -m pip install`).
    pub fn describe(&self) -> String {
        match self {
            Installer::Pip { python } => format!("{} -m pip install", python.display()),
            Installer::Uv { uv, python } => {
                format!("{} pip install --python {}", uv.display(), python.display())
            }
        }
    }

    /// Installs requirements, installer arguments first; returns its
    /// output, or, `shown` on the terminal as it runs, nothing of it.
    pub fn install(
        &self,
        requirements: &[String],
        args: &[String],
        shown: bool,
    ) -> Result<Output, PipError> {
        let mut command = match self {
            Installer::Pip { python } => {
                let mut command = Command::new(python);
                command
                    .args(["-m", "pip", "install"])
                    .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
                command
            }
            Installer::Uv { uv, python } => {
                let mut command = Command::new(uv);
                command.args(["pip", "install", "--python"]).arg(python);
                command
            }
        };
        command.args(args).args(requirements);
        match shown {
            true => run_shown(&mut command),
            false => run(&mut command),
        }
    }
}

impl Installer {
    /// The uninstall command for people (`python -m pip uninstall`).
    pub fn describe_uninstall(&self) -> String {
        self.describe().replace(" pip install", " pip uninstall")
    }

    /// Uninstalls the distributions `names`, without asking.
    pub fn uninstall(&self, names: &[String]) -> Result<Output, PipError> {
        let mut command = match self {
            Installer::Pip { python } => {
                let mut command = Command::new(python);
                command
                    .args(["-m", "pip", "uninstall", "--yes"])
                    .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
                command
            }
            Installer::Uv { uv, python } => {
                let mut command = Command::new(uv);
                command.args(["pip", "uninstall", "--python"]).arg(python);
                command
            }
        };
        run(command.args(names))
    }
}

/// `uv` from `$UV` (uv sets it for what it runs), the environment's `bin/`,
/// or `PATH`.
fn find_uv(prefix: &Path) -> Option<PathBuf> {
    let from_env = std::env::var_os(kpack_env::EnvVars::UV).map(PathBuf::from);
    let path = std::env::var_os(kpack_env::EnvVars::PATH).unwrap_or_default();
    from_env
        .into_iter()
        .chain(std::iter::once(prefix.join("bin/uv")))
        .chain(std::env::split_paths(&path).map(|dir| dir.join("uv")))
        .find(|candidate| candidate.is_file())
}

/// A `pip` command able to resolve for the environment: its own pip, else
/// pip from a `python3` on `PATH` (not the environment's own) run on it
/// with `--python`.
pub fn resolver(env: &PythonEnvironment) -> Result<Command, PipError> {
    if env.has_pip {
        let mut command = Command::new(&env.python);
        command.args(["-m", "pip"]);
        return Ok(command);
    }
    let path = std::env::var_os(kpack_env::EnvVars::PATH).unwrap_or_default();
    let outer = std::env::split_paths(&path)
        .map(|dir| dir.join("python3"))
        .filter(|candidate| candidate.is_file())
        .take(8)
        .filter_map(|candidate| PythonEnvironment::query(&candidate).ok())
        .find(|outer| outer.has_pip && outer.prefix != env.prefix);
    match outer {
        Some(outer) => {
            let mut command = Command::new(outer.python);
            command.args(["-m", "pip", "--python"]).arg(&env.python);
            Ok(command)
        }
        None => Err(PipError::NoResolver {
            python: env.python.clone(),
        }),
    }
}

/// Runs a command to its end on the terminal, where its own progress
/// shows; a failure points at what it printed there.
fn run_shown(command: &mut Command) -> Result<Output, PipError> {
    let program = PathBuf::from(command.get_program());
    let status = command
        .stdin(std::process::Stdio::null())
        .status()
        .map_err(|source| PipError::Spawn { program, source })?;
    if status.success() {
        return Ok(Output {
            status,
            stdout: Vec::new(),
            stderr: Vec::new(),
        });
    }
    Err(PipError::Installer {
        command: words(command),
        status: status.to_string(),
        message: "what it printed is above".to_owned(),
    })
}

/// A command's words, for messages.
fn words(command: &Command) -> String {
    let words: Vec<String> = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    words.join(" ")
}

/// Runs a command to its end; a failure carries what it printed.
pub fn run(command: &mut Command) -> Result<Output, PipError> {
    let program = PathBuf::from(command.get_program());
    let output = command
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| PipError::Spawn { program, source })?;
    if output.status.success() {
        return Ok(output);
    }
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    let message = if stderr.is_empty() {
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    } else {
        stderr
    };
    Err(PipError::Installer {
        command: words(command),
        status: output.status.to_string(),
        message,
    })
}

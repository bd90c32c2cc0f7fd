//! A Python environment: its interpreter, where its distributions are
//! installed (asked of the interpreter: `sysconfig`'s purelib and platlib),
//! whether it has pip, and what is installed there, read from each
//! `*.dist-info/METADATA` (no pip needed).

use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_wheel::{DistName, Metadata, MetadataError};

use super::dist_file::{read_dist_info_file, DistFileError};
use super::PipError;

/// What the interpreter is asked: its site directories and whether pip imports.
const QUERY: &str = "import importlib.util, json, platform, sys, sysconfig\n\
paths = sysconfig.get_paths()\n\
print(json.dumps({'purelib': paths['purelib'], 'platlib': paths['platlib'], \
'pip': importlib.util.find_spec('pip') is not None, 'prefix': sys.prefix, \
'version': list(sys.version_info[:2]), 'implementation': sys.implementation.name, \
'machine': platform.machine()}))";

/// An interpreter and what it told about itself.
#[derive(Debug, Clone)]
pub struct PythonEnvironment {
    /// The interpreter.
    pub python: PathBuf,
    /// `sys.prefix`: the environment's root.
    pub prefix: PathBuf,
    /// Where distributions are installed (purelib, then platlib if different).
    pub site_dirs: Vec<PathBuf>,
    /// Whether `python -m pip` works there.
    pub has_pip: bool,
    /// Python's major and minor version.
    pub version: (u32, u32),
    /// `cpython`, `pypy`.
    pub implementation: String,
    /// The machine (`x86_64`, `aarch64`).
    pub machine: String,
}

/// One installed distribution.
#[derive(Debug, Clone)]
pub struct InstalledDist {
    /// Its METADATA.
    pub metadata: Metadata,
    /// Its `.dist-info` directory.
    pub dist_info: PathBuf,
}

#[derive(serde::Deserialize)]
struct Answer {
    purelib: PathBuf,
    platlib: PathBuf,
    pip: bool,
    prefix: PathBuf,
    version: (u32, u32),
    implementation: String,
    machine: String,
}

impl PythonEnvironment {
    /// The interpreter to use: the one given, else the active virtual
    /// environment's (`$VIRTUAL_ENV/bin/python`), else `python3` on `PATH`.
    pub fn default_python(given: Option<&Path>) -> PathBuf {
        if let Some(python) = given {
            return python.to_owned();
        }
        match std::env::var_os(kpack_env::EnvVars::VIRTUAL_ENV) {
            Some(venv) if !venv.is_empty() => PathBuf::from(venv).join("bin/python"),
            _ => PathBuf::from("python3"),
        }
    }

    /// Asks `python` about itself.
    pub fn query(python: &Path) -> Result<PythonEnvironment, PipError> {
        let output = Command::new(python)
            .args(["-I", "-c", QUERY])
            .output()
            .map_err(|source| PipError::Spawn {
                program: python.to_owned(),
                source,
            })?;
        if !output.status.success() {
            return Err(PipError::Interpreter {
                python: python.to_owned(),
                message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        let answer: Answer = serde_json::from_slice(&output.stdout).map_err(|source| {
            PipError::InterpreterAnswer {
                python: python.to_owned(),
                source,
            }
        })?;
        let mut site_dirs = vec![answer.purelib];
        if !site_dirs.contains(&answer.platlib) {
            site_dirs.push(answer.platlib);
        }
        Ok(PythonEnvironment {
            python: python.to_owned(),
            prefix: answer.prefix,
            site_dirs,
            has_pip: answer.pip,
            version: answer.version,
            implementation: answer.implementation,
            machine: answer.machine,
        })
    }

    /// Every distribution installed in the site directories, by name
    /// order, and those skipped because their METADATA cannot be read as
    /// such a file may be ([`read_dist_info_file`]).
    pub fn installed(&self) -> Result<Installed, PipError> {
        let mut out = Installed::default();
        for dir in &self.site_dirs {
            let entries = match fs_err::read_dir(dir) {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(PipError::Io(source)),
            };
            for entry in entries {
                let path = entry.map_err(PipError::Io)?.path();
                let is_dist_info = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(".dist-info"));
                if !(is_dist_info && path.is_dir()) {
                    continue;
                }
                match read_dist_info(&path)? {
                    Ok(dist) => out.dists.push(dist),
                    Err(error) => out
                        .skipped
                        .push(format!("skipped {}: {error}", path.display())),
                }
            }
        }
        out.dists
            .sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(out)
    }
}

/// The distributions of an environment that can be read, and one line for
/// each that cannot (`skipped DIR: why`).
#[derive(Debug, Default)]
pub struct Installed {
    pub dists: Vec<InstalledDist>,
    pub skipped: Vec<String>,
}

impl PythonEnvironment {
    /// The site directories that lead out of the environment (a link on the
    /// way, as some images share one site-packages), each with where it
    /// leads: pip and uv install there through the link, and `pip sync`
    /// lays binaries out there as well, after saying so.
    pub(crate) fn site_dirs_outside(&self) -> Vec<(PathBuf, PathBuf)> {
        let Ok(prefix) = fs_err::canonicalize(&self.prefix) else {
            return Vec::new();
        };
        self.site_dirs
            .iter()
            .filter_map(|site| {
                let resolved = fs_err::canonicalize(site).ok()?;
                (!resolved.starts_with(&prefix)).then(|| (site.clone(), resolved))
            })
            .collect()
    }
}

/// The distribution whose `.dist-info` is `dir`; an inner error when its
/// METADATA is not a regular file within the cap, or cannot be read.
fn read_dist_info(dir: &Path) -> Result<Result<InstalledDist, DistFileError>, PipError> {
    let path = dir.join("METADATA");
    let text = match read_dist_info_file(&path) {
        Ok(text) => text,
        Err(error) => return Ok(Err(error)),
    };
    let metadata = Metadata::parse(&text).map_err(|source: MetadataError| PipError::Metadata {
        path: path.clone(),
        source,
    })?;
    Ok(Ok(InstalledDist {
        metadata,
        dist_info: dir.to_owned(),
    }))
}

impl PythonEnvironment {
    /// Whether a wheel's tags can be installed here: a Python tag for this
    /// version (`py3`, `py312`, `cp312`, `cp3x` with `abi3` up to it), an ABI
    /// of `none`, `abi3` or this CPython's, and platform `any` or one for
    /// this machine. (The installer checks fully; this keeps a variant for
    /// another Python or machine from being picked.)
    pub(crate) fn accepts_tags(&self, python: &str, abi: &str, platform: &str) -> bool {
        let (major, minor) = self.version;
        let cpython = self.implementation == "cpython";
        let ours = format!("cp{major}{minor}");
        let python_ok = python.split('.').any(|tag| {
            tag == format!("py{major}")
                || tag == format!("py{major}{minor}")
                || (cpython && tag == ours)
                || (cpython && abi == "abi3" && cp_at_most(tag, major, minor))
        });
        let abi_ok = abi
            .split('.')
            .any(|a| a == "none" || (cpython && (a == "abi3" || a == ours)));
        let platform_ok = platform.split('.').any(|p| {
            p == "any"
                || ((p.starts_with("linux")
                    || p.starts_with("manylinux")
                    || p.starts_with("musllinux"))
                    && p.ends_with(&format!("_{}", self.machine)))
        });
        python_ok && abi_ok && platform_ok
    }
}

/// `cp3N` with N at most `minor`.
fn cp_at_most(tag: &str, major: u32, minor: u32) -> bool {
    tag.strip_prefix(&format!("cp{major}"))
        .and_then(|m| m.parse::<u32>().ok())
        .is_some_and(|m| m <= minor)
}

/// Whether a distribution of this name is installed, at `version` when
/// one is given.
pub(crate) fn is_installed(
    installed: &[InstalledDist],
    name: &DistName,
    version: Option<&str>,
) -> bool {
    installed
        .iter()
        .any(|d| &d.metadata.name == name && version.is_none_or(|v| d.metadata.version == v))
}

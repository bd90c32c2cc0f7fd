//! The programs tests run: where each comes from, and how it is found.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The command that installs every test prerequisite, then runs the tests.
pub const SETUP_COMMAND: &str = "./test.sh";

/// `command package` lines: what `./test.sh` installs with apt-get.
const DEBIAN_TOOLS: &str = include_str!("../tools.txt");
/// pip requirements, each ending in `# programs: NAME...`: what `./test.sh`
/// installs into the test virtual environment.
const PYTHON_TOOLS: &str = include_str!("../requirements.txt");

/// Where a program comes from, for the message when it is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Debian { package: String },
    Python { package: String },
    Unknown,
}

impl Origin {
    pub(crate) fn of(program: &str) -> Self {
        let debian = DEBIAN_TOOLS
            .lines()
            .filter(|line| !line.trim_start().starts_with('#'))
            .filter_map(|line| {
                let mut words = line.split_whitespace();
                Some((words.next()?, words.next()?))
            })
            .find(|(command, _)| *command == program);
        if let Some((_, package)) = debian {
            return Self::Debian {
                package: package.to_owned(),
            };
        }
        PYTHON_TOOLS
            .lines()
            .filter_map(|line| line.split_once("# programs:"))
            .find(|(_, programs)| programs.split_whitespace().any(|p| p == program))
            .map(|(requirement, _)| Self::Python {
                package: requirement.trim().to_owned(),
            })
            .unwrap_or(Self::Unknown)
    }
}

/// Every program the set-up installs: the Debian tools, then the Python ones.
pub fn provided_programs() -> Vec<&'static str> {
    let debian = DEBIAN_TOOLS
        .lines()
        .filter(|line| !line.trim_start().starts_with('#'))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|command| !command.starts_with('/'));
    let python = PYTHON_TOOLS
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once("# programs:"))
        .flat_map(|(_, programs)| programs.split_whitespace());
    debian.chain(python).collect()
}

/// Every file the set-up installs that is not a program (headers).
pub fn provided_files() -> Vec<&'static Path> {
    DEBIAN_TOOLS
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|entry| entry.starts_with('/'))
        .map(Path::new)
        .collect()
}

/// A program a test needs that is not installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingTool {
    pub program: String,
    pub origin: Origin,
    pub searched: Vec<PathBuf>,
}

impl fmt::Display for MissingTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let program = &self.program;
        match &self.origin {
            Origin::Debian { package } => write!(
                f,
                "this test needs `{program}` (Debian package `{package}`), which is not installed: \
                 run `{SETUP_COMMAND}`, which installs what the tests need and runs them"
            ),
            Origin::Python { package } => write!(
                f,
                "this test needs `{program}` (Python package `{package}`), which is not installed: \
                 run `{SETUP_COMMAND}`, which installs it into the project's test environment \
                 (target/test-venv) and runs the tests"
            ),
            Origin::Unknown => write!(
                f,
                "this test needs `{program}`, which is not installed and which no test set-up \
                 provides: add it to crates/kpack-test-support/tools.txt (Debian) or \
                 crates/kpack-test-support/requirements.txt (Python) so that `{SETUP_COMMAND}` installs it"
            ),
        }?;
        let searched = std::env::join_paths(&self.searched).unwrap_or_default();
        write!(f, " (searched {})", searched.to_string_lossy())
    }
}

impl std::error::Error for MissingTool {}

/// The directories searched for programs, in order.
#[derive(Debug, Clone)]
pub struct SearchPath {
    dirs: Vec<PathBuf>,
}

impl SearchPath {
    pub fn new(dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        Self {
            dirs: dirs.into_iter().collect(),
        }
    }

    /// The test virtual environment's `bin/`, then `$PATH`: the pinned
    /// Python tools win over whatever else is installed.
    pub fn from_env() -> Self {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let venv = test_venv().map(|venv| venv.join("bin"));
        Self {
            dirs: venv
                .into_iter()
                .chain(std::env::split_paths(&path))
                .collect(),
        }
    }
}

/// The virtual environment `./test.sh` makes (pip, uv, maturin, moto, ...),
/// which must be there: a test that needs it fails saying how to make it.
pub fn python_venv() -> PathBuf {
    match test_venv() {
        Some(venv) if venv.join("bin/python").is_file() => venv,
        _ => panic!(
            "no test virtual environment ($KPACK_TEST_VENV, or test-venv in the target \
             directory): run {SETUP_COMMAND}, which makes it"
        ),
    }
}

/// The virtual environment `./test.sh` makes: `$KPACK_TEST_VENV`, else
/// `test-venv` in the target directory holding the running test.
fn test_venv() -> Option<PathBuf> {
    if let Some(venv) = std::env::var_os("KPACK_TEST_VENV") {
        return Some(PathBuf::from(venv));
    }
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .map(|dir| dir.join("test-venv"))
        .find(|venv| venv.is_dir())
}

fn is_executable(path: &Path) -> bool {
    fs_err::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds `program` in `search`.
pub fn find_tool(program: &str, search: &SearchPath) -> Result<PathBuf, MissingTool> {
    search
        .dirs
        .iter()
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| MissingTool {
            program: program.to_owned(),
            origin: Origin::of(program),
            searched: search.dirs.clone(),
        })
}

/// The path of `program`; a missing program fails the test, naming it and
/// the set-up command.
pub fn tool_path(program: &str) -> PathBuf {
    find_tool(program, &SearchPath::from_env()).unwrap_or_else(|missing| panic!("{missing}"))
}

/// A [`Command`] running `program`, found as [`tool_path`] finds it.
pub fn tool(program: &str) -> Command {
    Command::new(tool_path(program))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fs_err as fs;

    #[test]
    fn debian_tools_name_their_package() {
        assert_eq!(
            Origin::of("aarch64-linux-gnu-gcc"),
            Origin::Debian {
                package: "gcc-aarch64-linux-gnu".into()
            }
        );
        assert_eq!(
            Origin::of("readelf"),
            Origin::Debian {
                package: "binutils".into()
            }
        );
    }

    #[test]
    fn python_tools_name_their_requirement() {
        let Origin::Python { package } = Origin::of("moto_server") else {
            panic!("moto_server is not a Python tool");
        };
        assert!(package.starts_with("moto["), "{package}");
        assert!(matches!(Origin::of("uv"), Origin::Python { .. }));
    }

    #[test]
    fn a_tool_in_an_earlier_directory_wins() {
        let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (first, second) = (first.path().to_owned(), second.path().to_owned());
        for dir in [&first, &second] {
            let program = dir.join("probe");
            fs::write(&program, "#!/bin/sh\n").unwrap();
            fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let search = SearchPath::new([first.clone(), second]);
        assert_eq!(find_tool("probe", &search).unwrap(), first.join("probe"));
    }

    #[test]
    fn a_file_that_is_not_executable_is_not_the_tool() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("probe"), "data").unwrap();
        let missing = find_tool("probe", &SearchPath::new([dir.path().to_owned()])).unwrap_err();
        assert_eq!(missing.origin, Origin::Unknown);
        assert!(missing
            .to_string()
            .contains("crates/kpack-test-support/tools.txt"));
    }
}

//! Python virtual environments of the test environment's Python, as users
//! make them: with `python -m venv` (pip inside) or with uv (no pip).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{python_venv, run};

/// A virtual environment with pip at `dir`; returns its python.
pub fn pip_venv(dir: &Path) -> PathBuf {
    run(Command::new(python_venv().join("bin/python"))
        .args(["-m", "venv"])
        .arg(dir));
    dir.join("bin/python")
}

/// A virtual environment made by uv at `dir`, caching in `cache`; it has
/// no pip (checked). Returns its python.
pub fn uv_venv(dir: &Path, cache: &Path) -> PathBuf {
    run(Command::new(python_venv().join("bin/uv"))
        .args(["venv", "--quiet", "--python"])
        .arg(python_venv().join("bin/python"))
        .arg(dir)
        .env("UV_CACHE_DIR", cache));
    let python = dir.join("bin/python");
    let has_pip = Command::new(&python)
        .args(["-c", "import pip"])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    assert!(
        !has_pip.status.success(),
        "a uv environment should have no pip"
    );
    python
}

/// `command` (a kpack-get run in a test environment whose home is `home`)
/// as a pip post-install hook runs: the test environment's uv and python
/// first on `PATH`, uv's cache in `home`, pip caching nothing, and no
/// active virtual environment or rocm-bootstrap variables unless a test
/// sets them.
pub fn with_python_tools<'a>(command: &'a mut Command, home: &Path) -> &'a mut Command {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![python_venv().join("bin")];
    dirs.extend(std::env::split_paths(&path));
    command
        .env("PATH", std::env::join_paths(dirs).expect("PATH entries"))
        .env("UV_CACHE_DIR", home.join("uv-cache"))
        .env("PIP_NO_CACHE_DIR", "1")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env_remove("VIRTUAL_ENV")
        .env_remove("ROCM_BOOTSTRAP_FORCE_GFX_ARCH")
        .env_remove("ROCM_BOOTSTRAP_DISABLE_DETECTION")
}

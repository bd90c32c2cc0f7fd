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

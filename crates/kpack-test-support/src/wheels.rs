//! The project's own wheels (`pip install kpack-get`, `kpack-pack`,
//! `kpack-repo`): built with maturin from a crate's `pyproject.toml` and
//! installed into a fresh virtual environment, as a user gets them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{python_venv, run, workspace};

/// Builds the wheel of the crate in `crates/<crate_dir>` into `out`; returns it. Linked by zig against glibc 2.28's
/// symbols, so the wheel carries the portable tag its `pyproject.toml`
/// asks for whatever this machine's glibc; maturin runs zig from the
/// ziglang package of the test environment.
///
/// Built in the dev profile: what the tests check (the wheel's name and
/// tag, the command it installs, what that command does) does not depend
/// on optimisation, and release builds of the three wheels took over five
/// minutes of a test run on two cores. The release build of the same
/// binaries is the demo's.
pub fn build_wheel(crate_dir: &str, out: &Path) -> PathBuf {
    let venv = python_venv();
    let path = std::env::join_paths(std::iter::once(venv.join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    // Its own target directory, shared by every crate's wheel: cargo test
    // holds the workspace's while tests run. Kept between runs, so only
    // the first build is slow.
    run(Command::new(venv.join("bin/maturin"))
        .args(["build", "--quiet", "--zig", "--profile", "dev", "--out"])
        .arg(out)
        .current_dir(workspace().join("crates").join(crate_dir))
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", workspace().join("target/python-wheel"))
        .env(
            "CARGO_BUILD_JOBS",
            std::env::var("CARGO_BUILD_JOBS").unwrap_or_else(|_| "1".into()),
        ));
    let wheels: Vec<PathBuf> = fs_err::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    wheels.into_iter().next().unwrap()
}

/// Installs `wheel` with uv into a new virtual environment `env`, with
/// nothing from an index; returns the environment's `bin` directory.
pub fn install_fresh(wheel: &Path, env: &Path) -> PathBuf {
    let venv = python_venv();
    let uv = venv.join("bin/uv");
    let cache = env.with_extension("uv-cache");
    run(Command::new(&uv)
        .args(["venv", "--quiet", "--python"])
        .arg(venv.join("bin/python"))
        .arg(env)
        .env("UV_CACHE_DIR", &cache));
    run(Command::new(&uv)
        .args(["pip", "install", "--quiet", "--no-index", "--python"])
        .arg(env.join("bin/python"))
        .arg(wheel)
        .env("UV_CACHE_DIR", &cache));
    env.join("bin")
}

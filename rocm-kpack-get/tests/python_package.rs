//! `pip install kpack-get`: the wheel maturin builds from
//! `rocm-kpack-get/pyproject.toml` installs a working `kpack-get` command
//! into a fresh virtual environment.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use kpack_test_support::python_venv;
use std::path::PathBuf;
use std::process::Command;

use common::success;

#[test]
fn the_maturin_wheel_installs_a_working_kpack_get() {
    let venv = python_venv();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("wheels");
    // Its own target directory: cargo test holds the workspace's while
    // tests run. Kept between runs, so only the first build is slow.
    let target = common::workspace().join("target/python-wheel");
    // Linked by zig against glibc 2.28's symbols, so the wheel carries the
    // portable tag pyproject.toml asks for (this machine's glibc is newer);
    // maturin runs zig from the ziglang package in the same environment.
    let path = std::env::join_paths(std::iter::once(venv.join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    success(
        Command::new(venv.join("bin/maturin"))
            .args(["build", "--quiet", "--zig", "--out"])
            .arg(&out)
            .current_dir(common::workspace().join("rocm-kpack-get"))
            .env("PATH", path)
            .env("CARGO_TARGET_DIR", &target)
            .env(
                "CARGO_BUILD_JOBS",
                std::env::var("CARGO_BUILD_JOBS").unwrap_or_else(|_| "1".into()),
            ),
    );
    let wheels: Vec<PathBuf> = fs_err::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    let name = wheels[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(
        name,
        format!(
            "kpack_get-0.1.0-py3-none-manylinux_2_28_{}.whl",
            std::env::consts::ARCH
        )
    );

    let env = work.path().join("venv");
    let uv = venv.join("bin/uv");
    let cache = work.path().join("uv-cache");
    success(
        Command::new(&uv)
            .args(["venv", "--quiet", "--python"])
            .arg(venv.join("bin/python"))
            .arg(&env)
            .env("UV_CACHE_DIR", &cache),
    );
    success(
        Command::new(&uv)
            .args(["pip", "install", "--quiet", "--no-index", "--python"])
            .arg(env.join("bin/python"))
            .arg(&wheels[0])
            .env("UV_CACHE_DIR", &cache),
    );
    let exe = env.join("bin/kpack-get");
    assert_eq!(
        success(Command::new(&exe).arg("--version")),
        "kpack-get 0.1.0\n"
    );
    let json =
        success(Command::new(&exe).args(["pip", "variant-properties", "--target", "gfx1100"]));
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        json["properties"],
        serde_json::json!(["amd :: gfx_arch :: gfx1100"])
    );
}

//! `pip install kpack-get`: the wheel maturin builds from
//! `crates/rocm-kpack-get/pyproject.toml` installs a working `kpack-get` command
//! into a fresh virtual environment.

use kpack_test_support::wheels::{build_wheel, install_fresh};
use std::process::Command;

use crate::common::success;

#[test]
fn the_maturin_wheel_installs_a_working_kpack_get() {
    let work = tempfile::tempdir().unwrap();
    let wheel = build_wheel("rocm-kpack-get", &work.path().join("wheels"));
    assert_eq!(
        wheel.file_name().unwrap().to_string_lossy(),
        format!(
            "kpack_get-{}-py3-none-manylinux_2_28_{}.whl",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::ARCH
        )
    );
    let exe = install_fresh(&wheel, &work.path().join("venv")).join("kpack-get");
    assert_eq!(
        success(Command::new(&exe).arg("--version")),
        format!("kpack-get {}\n", env!("CARGO_PKG_VERSION"))
    );
    let json =
        success(Command::new(&exe).args(["pip", "variant-properties", "--target", "gfx1100"]));
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        json["properties"],
        serde_json::json!(["amd :: gfx_arch :: gfx1100"])
    );
}

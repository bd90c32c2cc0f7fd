//! The Python side of the chain: the jax ROCm plugin wheel split by
//! `kpack-pack wheel split --variants`, then installed into uv-made virtual
//! environments (no pip) by `kpack-get pip`: `sync` after a host-only
//! install adds exactly the GPU's device wheel, and `install` picks the
//! GPU's variant wheel. Offline: a find-links directory, `--no-deps`.

use kpack_test_support::python_venv;
use kpack_test_support::venv::{pip_venv, uv_venv, with_python_tools};
use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_test_support::chain::{success, workspace_binary, Env};
use kpack_test_support::fixtures;

const JAX: &str = "jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl";

/// The archives in the installed plugin's `.kpack/` (none without it).
fn installed_archives(python: &Path) -> Vec<String> {
    let site = success(Command::new(python).args([
        "-c",
        "import sysconfig; print(sysconfig.get_paths()['platlib'])",
    ]));
    let dir = PathBuf::from(site.trim()).join("jax_rocm7_plugin/.kpack");
    if !dir.exists() {
        return Vec::new();
    }
    let mut names: Vec<String> = fs_err::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// kpack-get for `env`, with the test environment's uv (and its python3
/// with pip) on PATH.
fn kpack(env: &Env) -> Command {
    let mut command = env.command();
    with_python_tools(&mut command, env.home.path());
    command
}

#[test]
fn a_split_jax_wheel_gets_its_device_code_from_sync_and_its_variant_from_install() {
    let env = Env::new();
    let out = env.home.path().join("wheels");
    success(
        Command::new(workspace_binary("kpack-packer", "kpack-pack"))
            .args(["wheel", "split", "--variants", "-o"])
            .arg(&out)
            .arg(fixtures().join("pypi").join(JAX)),
    );
    let links = [
        "--no-index".to_owned(),
        "--find-links".to_owned(),
        out.display().to_string(),
        "--no-deps".to_owned(),
    ];
    let cache = env.home.path().join("uv-cache");

    // The host alone, as `uv pip install` leaves it; then sync for gfx1100.
    let python = uv_venv(&env.home.path().join("host"), &cache);
    success(
        Command::new(python_venv().join("bin/uv"))
            .args(["pip", "install", "--quiet", "--python"])
            .arg(&python)
            .args(&links)
            .arg("jax-rocm7-plugin")
            .env("UV_CACHE_DIR", &cache),
    );
    assert!(installed_archives(&python).is_empty());
    let mut sync = kpack(&env);
    sync.args(["--target", "gfx1100", "pip", "sync", "--python"])
        .arg(&python)
        .arg("--")
        .args(&links);
    let stdout = success(&mut sync);
    assert!(
        stdout.contains("installed jax-rocm7-plugin-device-gfx1100==0.10.2 with "),
        "{stdout}"
    );
    assert_eq!(installed_archives(&python), ["rocm_gfx1100.kpack"]);
    assert!(success(&mut sync).starts_with("nothing to install"));

    // The variant wheel for an MI210 in xnack- mode.
    let python = uv_venv(&env.home.path().join("variant"), &cache);
    let mut install = kpack(&env);
    install
        .args([
            "--target",
            "gfx90a:xnack-",
            "pip",
            "install",
            "jax-rocm7-plugin",
            "--python",
        ])
        .arg(&python)
        .arg("--")
        .args(&links);
    let stdout = success(&mut install);
    assert!(
        stdout.contains("jax-rocm7-plugin: variant gfx90a ("),
        "{stdout}"
    );
    assert_eq!(installed_archives(&python), ["rocm_gfx90a.kpack"]);
}

/// The device distributions of jax-rocm7-plugin that pip lists.
fn device_dists(python: &Path) -> Vec<String> {
    let listed = success(Command::new(python).args(["-m", "pip", "list", "--format=freeze"]));
    listed
        .lines()
        .filter(|line| line.starts_with("jax-rocm7-plugin-device-"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn with_pip_sync_installs_the_gpus_device_wheel_once_and_pip_uninstall_removes_it() {
    let env = Env::new();
    let out = env.home.path().join("wheels");
    success(
        Command::new(workspace_binary("kpack-packer", "kpack-pack"))
            .args(["wheel", "split", "-o"])
            .arg(&out)
            .arg(fixtures().join("pypi").join(JAX)),
    );
    let links = [
        "--no-index".to_owned(),
        "--find-links".to_owned(),
        out.display().to_string(),
    ];

    // `pip install X && kpack-get pip sync`.
    let python = pip_venv(&env.home.path().join("synced"));
    success(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "--no-deps"])
            .args(&links)
            .arg("jax-rocm7-plugin"),
    );
    assert!(installed_archives(&python).is_empty());
    let mut sync = kpack(&env);
    sync.args(["--target", "gfx1100", "pip", "sync", "--python"])
        .arg(&python)
        .arg("--")
        .args(&links)
        .arg("--no-deps");
    success(&mut sync);
    assert_eq!(
        device_dists(&python),
        ["jax-rocm7-plugin-device-gfx1100==0.10.2"]
    );
    assert_eq!(installed_archives(&python), ["rocm_gfx1100.kpack"]);
    assert!(success(&mut sync).starts_with("nothing to install"));
    success(Command::new(&python).args([
        "-m",
        "pip",
        "uninstall",
        "--yes",
        "--quiet",
        "jax-rocm7-plugin-device-gfx1100",
    ]));
    assert!(installed_archives(&python).is_empty());

    // `kpack-get pip install`: the host and the one device wheel the GPU needs.
    let python = pip_venv(&env.home.path().join("installed"));
    let mut install = kpack(&env);
    install
        .args([
            "--target",
            "gfx90a:xnack-",
            "pip",
            "install",
            "jax-rocm7-plugin",
        ])
        .args(["--python"])
        .arg(&python)
        .arg("--")
        .args(&links)
        .arg("--no-deps");
    success(&mut install);
    assert_eq!(
        device_dists(&python),
        ["jax-rocm7-plugin-device-gfx90a==0.10.2"]
    );
    assert_eq!(installed_archives(&python), ["rocm_gfx90a.kpack"]);
}

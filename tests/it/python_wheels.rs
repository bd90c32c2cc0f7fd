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

/// The `name-device-*` distributions pip lists in the environment.
fn devices_of(python: &Path, name: &str) -> Vec<String> {
    let listed = success(Command::new(python).args(["-m", "pip", "list", "--format=freeze"]));
    listed
        .lines()
        .filter(|line| line.starts_with(&format!("{name}-device-")))
        .map(str::to_owned)
        .collect()
}

/// `pip install --no-deps NAME` from `links`, then `kpack-get --target
/// TARGET pip sync`; the environment's Python.
fn install_and_sync(env: &Env, venv: &str, links: &Path, name: &str, target: &str) -> PathBuf {
    let links = [
        "--no-index".to_owned(),
        "--find-links".to_owned(),
        links.display().to_string(),
    ];
    let python = pip_venv(&env.home.path().join(venv));
    success(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--no-compile",
            ])
            .args(&links)
            .arg(name),
    );
    let mut sync = kpack(env);
    sync.args(["--target", target, "pip", "sync", "--python"])
        .arg(&python)
        .arg("--")
        .args(&links)
        .arg("--no-deps")
        .arg("--no-compile");
    success(&mut sync);
    python
}

/// `kpack-get --target TARGET pip check` of the environment.
fn pip_check(env: &Env, python: &Path, target: &str) -> std::process::Output {
    kpack(env)
        .args(["--target", target, "pip", "check", "--python"])
        .arg(python)
        .output()
        .unwrap()
}

/// amd-aiter from PyPI keeps its device code as loose code objects; split,
/// `pip install amd-aiter && kpack-get pip sync` for an MI300X brings back
/// every gfx942 file at its path, and no gfx950 one.
#[test]
fn aiter_s_loose_code_objects_come_back_for_the_gpu_through_pip_sync() {
    let env = Env::new();
    let out = env.home.path().join("wheels");
    let wheel = kpack_test_support::download("amd_aiter-0.1.7.post2.dev18-py3-none-any.whl");
    success(
        Command::new(workspace_binary("kpack-packer", "kpack-pack"))
            .args(["wheel", "split", "-o"])
            .arg(&out)
            .arg(&wheel),
    );
    let python = install_and_sync(&env, "aiter", &out, "amd-aiter", "gfx942");
    assert!(pip_check(&env, &python, "gfx942").status.success());
    assert_eq!(
        devices_of(&python, "amd-aiter"),
        ["amd-aiter-device-gfx942==0.1.7.post2.dev18"]
    );
    let site = PathBuf::from(
        success(Command::new(&python).args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ]))
        .trim(),
    );
    let hsa = site.join("aiter_meta/hsa");
    assert!(hsa.join("gfx942").is_dir());
    assert!(!hsa.join("gfx950").exists());
    let mut original = zip::ZipArchive::new(fs_err::File::open(&wheel).unwrap()).unwrap();
    let mut compared = 0;
    for index in 0..original.len() {
        let mut member = original.by_index(index).unwrap();
        let name = member.name().unwrap().into_owned();
        if !name.starts_with("aiter_meta/hsa/gfx942/") || member.is_dir() {
            continue;
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut member, &mut bytes).unwrap();
        assert_eq!(fs_err::read(site.join(&name)).unwrap(), bytes, "{name}");
        compared += 1;
    }
    assert!(compared > 1000, "{compared}");
}

/// A wheel whose AOTriton images serve every gfx11 GPU from one group
/// directory gets a `-device-gfx11` wheel; `kpack-get pip sync` for an RX
/// 7900 XTX installs it through the processor's extra, and nothing for a
/// gfx12 GPU.
#[test]
fn a_group_owned_device_wheel_is_synced_for_each_member_gpu() {
    let env = Env::new();
    let home = env.home.path();
    let wheel = home.join("pkg-1.0-py3-none-any.whl");
    let script = r#"
import base64, hashlib, sys, zipfile
files = {
    "pkg/__init__.py": b"",
    "pkg/lib/aotriton.images/amd-gfx11xx/flash/attn_fwd/k.aks2": b"rdna3 attention",
    "pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
    "pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def row(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"
with zipfile.ZipFile(sys.argv[1], "w") as wheel:
    for name, data in files.items():
        wheel.writestr(name, data)
    wheel.writestr("pkg-1.0.dist-info/RECORD", "\n".join([row(n, d) for n, d in files.items()] + ["pkg-1.0.dist-info/RECORD,,"]) + "\n")
"#;
    success(
        Command::new(python_venv().join("bin/python"))
            .args(["-c", script])
            .arg(&wheel),
    );
    let out = home.join("wheels");
    success(
        Command::new(workspace_binary("kpack-packer", "kpack-pack"))
            .args(["wheel", "split", "-o"])
            .arg(&out)
            .arg(&wheel),
    );
    let python = install_and_sync(&env, "rdna3", &out, "pkg", "gfx1100");
    assert_eq!(devices_of(&python, "pkg"), ["pkg-device-gfx11==1.0"]);
    assert!(pip_check(&env, &python, "gfx1100").status.success());
    // An RX 9070 is no member: nothing to install, and check says so.
    let python = install_and_sync(&env, "rdna4", &out, "pkg", "gfx1201");
    assert!(devices_of(&python, "pkg").is_empty());
    let checked = pip_check(&env, &python, "gfx1201");
    assert!(!checked.status.success());
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        stdout.contains("no device code published for this GPU"),
        "{stdout}"
    );
}

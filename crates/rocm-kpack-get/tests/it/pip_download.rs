//! `pip download` for a fleet: the host wheel and exactly the device
//! wheels the given targets need land in a directory, from which an
//! offline `kpack-get pip install --no-index --find-links` installs on a
//! machine of that fleet; an entry wheel that demands every GPU's device
//! code is refused, saying why.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::wheels::{demo_device, demo_host_demanding_all, demo_links, DEMO_DEVICES};
use crate::common::{output, Env};
use kpack_test_support::venv::{pip_venv, with_python_tools};

/// The file names in `dir`.
fn files(dir: &Path) -> BTreeSet<String> {
    fs_err::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn set(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `kpack-get --target TARGETS pip ARGS --python PY -- --no-index
/// --find-links LINKS`.
fn kpack_pip(env: &Env, python: &Path, targets: &str, args: &[&str], links: &Path) -> Command {
    let mut command = env.command();
    with_python_tools(&mut command, env.home.path());
    command
        .args(["--target", targets, "pip"])
        .args(args)
        .arg("--python")
        .arg(python)
        .args(["--", "--no-index", "--find-links"])
        .arg(links);
    command
}

#[test]
fn a_fleet_download_holds_exactly_its_device_wheels_and_installs_offline() {
    let env = Env::new();
    let home = env.home.path().to_owned();
    let links = home.join("links");
    demo_links(&links);
    let python = pip_venv(&home.join("venv"));
    let host = "demo-1.0-py3-none-any.whl";
    let device = |gpu: &str| format!("demo_device_{gpu}-1.0-py3-none-any.whl");

    let fleet = home.join("fleet");
    let dest = fleet.to_str().unwrap();
    let both = output(&mut kpack_pip(
        &env,
        &python,
        "gfx1100,gfx90a",
        &["download", "-d", dest, "demo"],
        &links,
    ));
    assert!(both.status.success(), "{}", text(&both));
    assert_eq!(
        files(&fleet),
        set(&[host, &device("gfx1100"), &device("gfx90a")])
    );

    let one = home.join("one");
    let dest = one.to_str().unwrap();
    let single = output(&mut kpack_pip(
        &env,
        &python,
        "gfx1100",
        &["download", "-d", dest, "demo", "--json"],
        &links,
    ));
    assert!(single.status.success(), "{}", text(&single));
    assert_eq!(files(&one), set(&[host, &device("gfx1100")]));
    let report: serde_json::Value = serde_json::from_slice(&single.stdout).unwrap();
    assert_eq!(
        report["requirements"],
        serde_json::json!(["demo[device-gfx1100]"])
    );

    // Offline, on a machine of the fleet: only what was downloaded.
    let fresh = pip_venv(&home.join("fresh"));
    let installed = output(&mut kpack_pip(
        &env,
        &fresh,
        "gfx1100",
        &["install", "demo"],
        &one,
    ));
    assert!(installed.status.success(), "{}", text(&installed));
    let listed = crate::common::success(Command::new(&fresh).args([
        "-c",
        "import importlib.metadata as m\nprint(sorted(d.metadata['Name'] for d in m.distributions() if d.metadata['Name'].startswith('demo')))",
    ]));
    assert_eq!(listed.trim(), "['demo', 'demo-device-gfx1100']");

    // Plain pip, the extra spelled out, from the same directory.
    let plain = pip_venv(&home.join("plain"));
    crate::common::success(
        Command::new(&plain)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-index",
                "--find-links",
            ])
            .arg(&one)
            .arg("demo[device-gfx1100]"),
    );
}

#[test]
fn an_entry_wheel_demanding_every_gpu_is_refused_saying_why() {
    let env = Env::new();
    let home = env.home.path().to_owned();
    let links: PathBuf = home.join("whl");
    fs_err::create_dir_all(&links).unwrap();
    demo_host_demanding_all(&links);
    for device in DEMO_DEVICES {
        demo_device(&links, device);
    }
    let python = pip_venv(&home.join("venv"));
    let dest = home.join("fleet");
    let refused = output(&mut kpack_pip(
        &env,
        &python,
        "gfx1100",
        &["download", "-d", dest.to_str().unwrap(), "demo"],
        &links,
    ));
    assert!(!refused.status.success(), "{}", text(&refused));
    let said = text(&refused);
    assert!(
        said.contains("demands every GPU's device code (`demo[device-all]`)"),
        "{said}"
    );
    assert!(said.contains("--extra-index-url"), "{said}");
    assert!(!dest.exists() || files(&dest).is_empty());
}

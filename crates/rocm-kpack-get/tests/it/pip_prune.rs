//! `pip sync --prune`: an environment installed from an every-GPU index
//! (RFC0012's `whl/`, the entry distribution demanding its own
//! `device-all`) shrunk to the machine's GPUs with real pip and real uv:
//! only the needed device distributions stay, `pip check` is clean, the
//! entry's RECORD verifies, a second run changes nothing, and a GPU added
//! later is served by the next sync. A broken environment is refused and
//! left as it was.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use sha2::Digest;

use crate::common::wheels::{demo_device, demo_host_demanding_all, DEMO_DEVICES};
use crate::common::{output, success, Env};
use kpack_test_support::python_venv;
use kpack_test_support::venv::{pip_venv, uv_venv, with_python_tools};

/// An every-GPU index as find-links: the demanding host and every device
/// wheel.
fn whl_links(dir: &Path) {
    fs_err::create_dir_all(dir).unwrap();
    demo_host_demanding_all(dir);
    for device in DEMO_DEVICES {
        demo_device(dir, device);
    }
}

/// The distributions installed in `python`'s environment.
fn installed(python: &Path) -> BTreeSet<String> {
    let out = success(Command::new(python).args([
        "-c",
        "import importlib.metadata as m\nfor d in m.distributions(): print(d.metadata['Name'])",
    ]));
    out.lines()
        .map(str::to_owned)
        .filter(|n| n != "pip" && n != "setuptools")
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// An environment installed from the every-GPU links, with pip or uv.
struct Whl {
    env: Env,
    links: PathBuf,
    python: PathBuf,
    uv: bool,
}

impl Whl {
    fn new(uv: bool) -> Whl {
        let env = Env::new();
        let home = env.home.path().to_owned();
        let links = home.join("links");
        whl_links(&links);
        let python = match uv {
            true => uv_venv(&home.join("venv"), &home.join("uv-cache")),
            false => pip_venv(&home.join("venv")),
        };
        let whl = Whl {
            env,
            links,
            python,
            uv,
        };
        success(
            whl.installer(&["install", "--no-index", "--find-links"])
                .arg(&whl.links)
                .arg("demo"),
        );
        whl
    }

    /// The environment's installer (`python -m pip ARGS` or `uv pip ARGS
    /// --python PY`).
    fn installer(&self, args: &[&str]) -> Command {
        let mut command = match self.uv {
            true => {
                let mut command = Command::new(python_venv().join("bin/uv"));
                command
                    .arg("pip")
                    .args(&args[..1])
                    .arg("--python")
                    .arg(&self.python)
                    .args(&args[1..])
                    .env("UV_CACHE_DIR", self.env.home.path().join("uv-cache"));
                command
            }
            false => {
                let mut command = Command::new(&self.python);
                command
                    .args(["-m", "pip"])
                    .args(args)
                    .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
                command
            }
        };
        command.env_remove("PYTHONPATH");
        command
    }

    /// `kpack-get --target TARGETS pip sync ARGS --python PY -- --find-links`.
    fn sync(&self, targets: &str, args: &[&str]) -> std::process::Output {
        output(&mut self.sync_command(targets, args))
    }

    /// As [`Whl::sync`], with `dir` mounted read-only for it (a mount
    /// namespace of its own: root writes through file modes).
    fn sync_read_only(&self, dir: &Path, targets: &str, args: &[&str]) -> std::process::Output {
        let sync = self.sync_command(targets, args);
        let mut command = kpack_test_support::tool("unshare");
        command
            .args(["--mount", "sh", "-c"])
            .arg(r#"mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && shift && exec "$@""#)
            .arg("sh")
            .arg(dir)
            .arg(sync.get_program())
            .args(sync.get_args());
        for (key, value) in sync.get_envs() {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        output(&mut command)
    }

    fn sync_command(&self, targets: &str, args: &[&str]) -> Command {
        let mut command = self.env.command();
        with_python_tools(&mut command, self.env.home.path());
        command
            .args(["--target", targets, "pip", "sync"])
            .args(args)
            .arg("--python")
            .arg(&self.python)
            .args(["--", "--no-index", "--find-links"])
            .arg(&self.links);
        command
    }

    /// `demo`'s `.dist-info`.
    fn dist_info(&self) -> PathBuf {
        let lib = self.python.parent().unwrap().parent().unwrap().join("lib");
        let python_dir = fs_err::read_dir(&lib)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        python_dir.join("site-packages/demo-1.0.dist-info")
    }
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every file `dist_info`'s RECORD lists with a hash has that hash and
/// size, and RECORD lists every file of the directory.
fn assert_record_verifies(dist_info: &Path) {
    let site = dist_info.parent().unwrap();
    let record = fs_err::read_to_string(dist_info.join("RECORD")).unwrap();
    let mut listed = BTreeSet::new();
    for line in record.lines() {
        let fields: Vec<&str> = line.split(',').collect();
        listed.insert(fields[0].to_owned());
        if fields[1].is_empty() {
            continue;
        }
        let bytes = fs_err::read(site.join(fields[0])).unwrap();
        let digest =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(&bytes));
        assert_eq!(fields[1], format!("sha256={digest}"), "{}", fields[0]);
        assert_eq!(fields[2], bytes.len().to_string(), "{}", fields[0]);
    }
    let name = dist_info.file_name().unwrap().to_str().unwrap();
    for entry in fs_err::read_dir(dist_info).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            listed.contains(&format!("{name}/{file}")),
            "{file} not in RECORD"
        );
    }
}

fn prunes_an_every_gpu_environment_to_its_gpus(uv: bool) {
    let whl = Whl::new(uv);
    let all = names(&["demo", "demo-device-gfx1100", "demo-device-gfx90a"]);
    assert_eq!(installed(&whl.python), all);

    let dry = whl.sync("gfx1100", &["--prune", "--dry-run"]);
    assert!(dry.status.success(), "{}", text(&dry));
    let said = text(&dry);
    assert!(
        said.contains("would remove demo-device-gfx90a; frees "),
        "{said}"
    );
    assert!(
        said.contains("demo: would drop `demo[device-all]`"),
        "{said}"
    );
    assert_eq!(installed(&whl.python), all);

    let pruned = whl.sync("gfx1100", &["--prune"]);
    assert!(pruned.status.success(), "{}", text(&pruned));
    assert!(
        text(&pruned).contains("removed demo-device-gfx90a with "),
        "{}",
        text(&pruned)
    );
    assert_eq!(
        installed(&whl.python),
        names(&["demo", "demo-device-gfx1100"])
    );
    success(&mut whl.installer(&["check"]));
    assert_record_verifies(&whl.dist_info());
    let metadata = fs_err::read_to_string(whl.dist_info().join("METADATA")).unwrap();
    assert!(
        !metadata.contains("Requires-Dist: demo[device-all]"),
        "{metadata}"
    );
    assert!(whl.dist_info().join("kpack-get-pruned.json").is_file());

    let mut check = whl.env.command();
    with_python_tools(&mut check, whl.env.home.path());
    check
        .args(["--target", "gfx1100", "pip", "check", "--python"])
        .arg(&whl.python);
    let checked = output(&mut check);
    assert!(checked.status.success(), "{}", text(&checked));

    let again = whl.sync("gfx1100", &["--prune"]);
    assert!(
        text(&again).contains("nothing to prune"),
        "{}",
        text(&again)
    );
    assert_eq!(
        installed(&whl.python),
        names(&["demo", "demo-device-gfx1100"])
    );

    let added = whl.sync("gfx1100,gfx90a", &[]);
    assert!(added.status.success(), "{}", text(&added));
    assert_eq!(installed(&whl.python), all);
    success(&mut whl.installer(&["check"]));
}

#[test]
fn sync_prune_shrinks_an_every_gpu_environment_with_pip() {
    prunes_an_every_gpu_environment_to_its_gpus(false);
}

#[test]
fn sync_prune_shrinks_an_every_gpu_environment_with_uv() {
    prunes_an_every_gpu_environment_to_its_gpus(true);
}

/// The environment's files, each with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in fs_err::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && !path.is_symlink() {
                stack.push(path);
            } else if path.is_file() {
                files.push((path.clone(), fs_err::read(&path).unwrap_or_default()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn a_broken_environment_is_refused_and_left_as_it_was() {
    let whl = Whl::new(false);
    let site = whl.dist_info().parent().unwrap().to_owned();
    // A device distribution whose RECORD is gone: no installer could
    // remove it.
    let device = site.join("demo_device_gfx90a-1.0.dist-info/RECORD");
    fs_err::remove_file(&device).unwrap();
    let before = snapshot(&site);
    let refused = whl.sync("gfx1100", &["--prune"]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("demo_device_gfx90a-1.0.dist-info/RECORD"),
        "{}",
        text(&refused)
    );
    assert_eq!(snapshot(&site), before);
}

#[test]
fn an_entry_whose_metadata_cannot_be_read_is_refused_and_left_as_it_was() {
    let whl = Whl::new(false);
    let metadata = whl.dist_info().join("METADATA");
    let good = fs_err::read_to_string(&metadata).unwrap();
    fs_err::write(
        &metadata,
        good.replacen("Version: 1.0\n", "Version 1.0\n", 1),
    )
    .unwrap();
    let site = whl.dist_info().parent().unwrap().to_owned();
    let before = snapshot(&site);
    let refused = whl.sync("gfx1100", &["--prune"]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("demo-1.0.dist-info/METADATA"),
        "{}",
        text(&refused)
    );
    assert_eq!(snapshot(&site), before);
}

#[test]
fn a_read_only_dist_info_is_refused_and_left_as_it_was() {
    let whl = Whl::new(false);
    let dist_info = whl.dist_info();
    let site = dist_info.parent().unwrap().to_owned();
    let before = snapshot(&site);
    let refused = whl.sync_read_only(&dist_info, "gfx1100", &["--prune"]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("cannot prune: cannot write"),
        "{}",
        text(&refused)
    );
    assert_eq!(snapshot(&site), before);
    assert_eq!(
        installed(&whl.python),
        names(&["demo", "demo-device-gfx1100", "demo-device-gfx90a"])
    );
}

//! `kpack-get pip ...` against real pip and uv in virtual environments the
//! tests make, installing small wheels from a find-links directory (no
//! network). GPUs come from `--target` and rocm-bootstrap's variables.

use kpack_test_support::python_venv;
use kpack_test_support::venv::{pip_venv, uv_venv, with_python_tools};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::server::TestServer;
use crate::common::wheels::{
    build_wheel, demo_device, demo_device_at, demo_host, demo_host_at, demo_links, demo_variants,
    WheelSpec,
};
use crate::common::{describe, output, success, Env};
use kpack_test_support::context::TestContext;

/// The distributions installed in an environment, as Python itself lists them.
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

/// `demo/variant.txt` of the installed demo: which build was installed.
fn installed_build(python: &Path) -> String {
    success(Command::new(python).args([
        "-c",
        "import importlib.resources as r; print(r.files('demo').joinpath('variant.txt').read_text())",
    ]))
    .trim()
    .to_owned()
}

/// kpack-get with no GPUs of the machine, the test tools on PATH, and no
/// rocm-bootstrap variables unless a test sets them.
fn kpack(env: &Env) -> Command {
    let mut command = env.command();
    with_python_tools(&mut command, env.home.path());
    command
}

fn links_args(dir: &Path) -> Vec<String> {
    vec![
        "--no-index".into(),
        "--find-links".into(),
        dir.display().to_string(),
    ]
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The transcript of a `kpack-get pip` run in `context`, with the test
/// tools' environment masked too.
fn pip_transcript(context: &TestContext, out: &Output) -> String {
    let tools = python_venv().display().to_string();
    context.transcript_masking(out, &[(&tools, "<TOOLS>")])
}

/// Runs kpack-get, which must succeed; returns (stdout, stderr).
fn kpack_ok(command: &mut Command) -> (String, String) {
    let out = output(command);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "{command:?} failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

/// A test context with the demo distributions in a find-links directory
/// (`links` in its home) and a new Python environment in `venv`.
struct Demo {
    context: TestContext,
    links: PathBuf,
    python: PathBuf,
}

impl Demo {
    /// With an environment made by `python -m venv` (pip inside).
    fn with_pip() -> Demo {
        Demo::new(|home| pip_venv(&home.join("venv")))
    }

    /// With an environment made by uv (no pip).
    fn with_uv() -> Demo {
        Demo::new(|home| uv_venv(&home.join("venv"), &home.join("uv-cache")))
    }

    fn new(venv: impl FnOnce(&Path) -> PathBuf) -> Demo {
        let context = TestContext::new();
        let home = context.env.home.path();
        let links = home.join("links");
        demo_links(&links);
        let python = venv(home);
        Demo {
            context,
            links,
            python,
        }
    }

    /// `kpack-get ARGS --python PY`; [`Demo::find_links`] adds the
    /// installer's arguments after whatever else the test adds.
    fn kpack(&self, args: &[&str]) -> Command {
        let mut command = kpack(&self.context.env);
        command.args(args).arg("--python").arg(&self.python);
        command
    }

    /// `command` with `-- --find-links LINKS`.
    fn find_links<'a>(&self, command: &'a mut Command) -> &'a mut Command {
        command.arg("--").args(links_args(&self.links))
    }

    /// `pip install --quiet --find-links LINKS ARGS` in the environment,
    /// as a user installs before kpack-get runs.
    fn pip_install(&self, args: &[&str]) {
        success(
            Command::new(&self.python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(links_args(&self.links))
                .args(args),
        );
    }

    /// `kpack-get ARGS --python PY -- --find-links LINKS`: its transcript.
    fn transcript(&self, args: &[&str]) -> String {
        let mut command = self.kpack(args);
        pip_transcript(&self.context, &output(self.find_links(&mut command)))
    }
}

#[test]
fn sync_installs_exactly_the_matching_device_wheel_and_a_second_sync_nothing() {
    let demo = Demo::with_pip();
    let (context, python) = (&demo.context, &demo.python);
    demo.pip_install(&["demo"]);
    assert_eq!(installed(python), names(&["demo"]));

    let sync = || demo.transcript(&["--target", "gfx1100", "pip", "sync"]);
    let mut dry_run = demo.kpack(&["--target", "gfx1100", "pip", "sync", "--dry-run"]);
    let plan = pip_transcript(context, &output(&mut dry_run));
    insta::assert_snapshot!("sync_dry_run", plan);
    assert_eq!(installed(python), names(&["demo"]));

    insta::assert_snapshot!("sync", sync());
    assert_eq!(installed(python), names(&["demo", "demo-device-gfx1100"]));

    insta::assert_snapshot!("sync_again", sync());
    assert_eq!(installed(python), names(&["demo", "demo-device-gfx1100"]));
}

#[test]
fn sync_in_a_uv_environment_without_pip_uses_uv() {
    let demo = Demo::with_uv();
    let (env, links, python) = (&demo.context.env, &demo.links, &demo.python);
    success(
        Command::new(python_venv().join("bin/uv"))
            .args(["pip", "install", "--quiet", "--python"])
            .arg(python)
            .args(links_args(links))
            .arg("demo")
            .env("UV_CACHE_DIR", env.home.path().join("uv-cache")),
    );
    let mut command = demo.kpack(&["pip", "sync", "--json"]);
    demo.find_links(&mut command)
        .env("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx90a:xnack-");
    let (stdout, _) = kpack_ok(&mut command);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        json["installed"],
        serde_json::json!(["demo-device-gfx90a==1.0"])
    );
    assert!(
        json["installer"]
            .as_str()
            .unwrap()
            .contains("uv pip install --python"),
        "{json}"
    );
    assert_eq!(json["machine"]["source"], "ROCM_BOOTSTRAP_FORCE_GFX_ARCH");
    assert_eq!(installed(python), names(&["demo", "demo-device-gfx90a"]));

    let (stdout, _) = kpack_ok(&mut command);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["installed"], serde_json::json!([]));
    assert_eq!(json["missing"], serde_json::json!([]));
    assert_eq!(installed(python), names(&["demo", "demo-device-gfx90a"]));
}

#[test]
fn sync_fails_with_the_installer_message_when_a_device_wheel_is_missing() {
    let env = Env::new();
    let links = env.home.path().join("links");
    fs_err::create_dir_all(&links).unwrap();
    demo_host(&links, None);
    demo_device(&links, "gfx90a");
    let python = pip_venv(&env.home.path().join("venv"));
    success(
        Command::new(&python)
            .args(["-m", "pip", "install", "--quiet"])
            .args(links_args(&links))
            .arg("demo"),
    );
    let mut command = kpack(&env);
    command
        .args(["--target", "gfx1100", "pip", "sync", "--python"])
        .arg(&python)
        .arg("--")
        .args(links_args(&links));
    let out = output(&mut command);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("demo-device-gfx1100"), "{stderr}");
    assert!(stderr.contains("No matching distribution"), "{stderr}");
    // What to try is said after the installer's own words.
    assert!(
        stderr.contains("hint: the installer runs with the environment's configuration")
            && stderr.contains("`-- --find-links DIR`"),
        "{stderr}"
    );
    assert_eq!(installed(&python), names(&["demo"]));
}

#[test]
fn check_names_device_distributions_whose_host_was_uninstalled() {
    let demo = Demo::with_pip();
    demo.pip_install(&["demo[device-gfx1100]"]);
    success(Command::new(&demo.python).args([
        "-m",
        "pip",
        "uninstall",
        "--yes",
        "--quiet",
        "demo",
    ]));
    let out = output(&mut demo.kpack(&["--target", "gfx1100", "pip", "check"]));
    let (stdout, stderr) = text(&out);
    let said = format!("{stdout}{stderr}");
    assert!(
        said.contains(
            "demo-device-gfx1100 1.0 is installed without demo, whose device code it holds: \
             `pip uninstall demo-device-gfx1100` removes it"
        ),
        "{said}"
    );
}

#[test]
fn install_for_gfx1100_installs_the_host_and_one_device_wheel() {
    let demo = Demo::with_pip();
    insta::assert_snapshot!(demo.transcript(&["pip", "install", "demo", "--target", "gfx1100"]));
    assert_eq!(
        installed(&demo.python),
        names(&["demo", "demo-device-gfx1100"])
    );
}

#[test]
fn install_without_a_gpu_installs_the_host_only_and_says_so() {
    let demo = Demo::with_uv();
    insta::assert_snapshot!(demo.transcript(&["pip", "install", "demo"]));
    assert_eq!(installed(&demo.python), names(&["demo"]));
}

#[test]
fn resolve_warns_naming_the_gpu_and_the_extras_offered() {
    let demo = Demo::with_pip();
    insta::assert_snapshot!(demo.transcript(&["--target", "gfx1030", "pip", "resolve", "demo"]));
    // Nothing was installed by resolving.
    assert_eq!(installed(&demo.python), names(&[]));
}

#[test]
fn resolve_adds_one_extra_per_gpu_and_device_all_only_when_asked() {
    let demo = Demo::with_uv();
    // An application depending on demo: demo's extras are added for it.
    build_wheel(
        &demo.links,
        &WheelSpec {
            name: "app".into(),
            version: "2.0".into(),
            headers: vec!["Requires-Dist: demo>=1.0".into()],
            files: vec![("app/__init__.py".into(), Vec::new())],
            ..WheelSpec::default()
        },
    );
    let resolve = |targets: &str, requirement: &str, extra: &[&str]| {
        let mut command = demo.kpack(&["--target", targets, "pip", "resolve", requirement]);
        command.args(extra);
        kpack_ok(demo.find_links(&mut command)).0
    };
    assert_eq!(
        resolve("gfx1100,gfx90a:xnack-", "demo>=1.0", &[]),
        "demo[device-gfx1100,device-gfx90a]>=1.0\n"
    );
    assert_eq!(
        resolve("gfx90a:xnack+,gfx90a:xnack-", "demo>=1.0", &[]),
        "demo[device-gfx90a]>=1.0\n"
    );
    assert_eq!(
        resolve("gfx1100", "demo>=1.0", &["--all-targets"]),
        "demo[device-all]>=1.0\n"
    );
    assert_eq!(
        resolve("gfx1100", "app", &[]),
        "app\ndemo[device-gfx1100]\n"
    );
}

#[test]
fn pip_alone_ignores_variant_wheels_in_find_links() {
    let demo = Demo::with_pip();
    demo_variants(&demo.links);
    demo.pip_install(&["demo"]);
    assert_eq!(installed_build(&demo.python), "plain");
}

/// Installs demo with kpack-get from a directory holding variant wheels,
/// GPUs set by `configure`; returns the build installed and the JSON.
fn install_variant(
    configure: impl FnOnce(&mut Command),
) -> (String, serde_json::Value, BTreeSet<String>) {
    let demo = Demo::with_pip();
    demo_variants(&demo.links);
    let mut command = demo.kpack(&["pip", "install", "demo", "--json"]);
    configure(&mut command);
    let (stdout, _) = kpack_ok(demo.find_links(&mut command));
    let json = serde_json::from_str(&stdout).unwrap();
    (installed_build(&demo.python), json, installed(&demo.python))
}

#[test]
fn install_picks_the_gfx1100_variant_for_gfx1100() {
    let (build, json, dists) = install_variant(|c| {
        c.args(["--target", "gfx1100"]);
    });
    assert_eq!(build, "gfx1100");
    assert_eq!(json["variants"][0]["label"], "gfx1100");
    assert_eq!(dists, names(&["demo", "demo-device-gfx1100"]));
}

#[test]
fn install_picks_the_gfx90a_variant_for_gfx90a_without_xnack() {
    let (build, json, _) = install_variant(|c| {
        c.env("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx90a:xnack-");
    });
    assert_eq!(build, "gfx90a");
    assert!(json["variants"][0]["file"]
        .as_str()
        .unwrap()
        .ends_with("demo-1.0-py3-none-any-gfx90a.whl"));
}

#[test]
fn install_picks_the_null_variant_without_a_gpu() {
    let (build, json, dists) = install_variant(|c| {
        c.env("ROCM_BOOTSTRAP_DISABLE_DETECTION", "1");
    });
    assert_eq!(build, "null");
    assert_eq!(
        json["machine"]["source"],
        "ROCM_BOOTSTRAP_DISABLE_DETECTION"
    );
    assert_eq!(dists, names(&["demo"]));
}

#[test]
fn variant_properties_lists_the_machine_in_preference_order() {
    let env = Env::new();
    let mut command = kpack(&env);
    command.args([
        "pip",
        "variant-properties",
        "--target",
        "gfx1151,gfx90a:xnack-,gfx1100",
    ]);
    let (stdout, _) = kpack_ok(&mut command);
    insta::assert_snapshot!(stdout);
    let mut command = kpack(&env);
    command
        .args(["pip", "variant-properties"])
        .env("ROCM_BOOTSTRAP_DISABLE_DETECTION", "1");
    let (stdout, _) = kpack_ok(&mut command);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["properties"], serde_json::json!([]));
}

/// Serves the demo wheels and variants over loopback: the files under
/// `files/`, a find-links page `files/links.html`, and a PEP 503 index
/// `simple/<project>/` linking to them.
fn serve_demo(root: &Path) -> TestServer {
    let files = root.join("files");
    demo_links(&files);
    demo_variants(&files);
    let mut names: Vec<String> = fs_err::read_dir(&files)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let page = |prefix: &str, href: &str| {
        let anchors: String = names
            .iter()
            .filter(|n| n.starts_with(prefix))
            .map(|n| format!("<a href=\"{href}{n}\">{n}</a><br/>\n"))
            .collect();
        format!("<!DOCTYPE html>\n<html><body>\n{anchors}</body></html>\n")
    };
    fs_err::write(files.join("links.html"), page("", "")).unwrap();
    for project in ["demo", "demo-device-gfx1100", "demo-device-gfx90a"] {
        let dir = root.join("simple").join(project);
        fs_err::create_dir_all(&dir).unwrap();
        let prefix = format!("{}-1.0", project.replace('-', "_"));
        fs_err::write(dir.join("index.html"), page(&prefix, "../../files/")).unwrap();
    }
    TestServer::start(root)
}

/// `kpack-get pip install demo --target gfx1100` into a new pip
/// environment, from `server`'s package index: the environment's python
/// and the transcript, the index masked as `<INDEX>`.
fn install_demo_from_index(context: &TestContext, server: &TestServer) -> (PathBuf, String) {
    let home = context.env.home.path();
    let python = pip_venv(&home.join("venv"));
    let mut command = kpack(&context.env);
    command
        .args(["pip", "install", "demo", "--target", "gfx1100", "--python"])
        .arg(&python)
        .args(["--", "--index-url", &format!("{}/simple/", server.url())]);
    let url = server.url();
    let text = context.transcript_masking(&output(&mut command), &[(&url, "<INDEX>")]);
    (python, text)
}

#[test]
fn install_picks_a_variant_from_a_package_index_over_http() {
    let context = TestContext::new();
    let env = &context.env;
    let server = serve_demo(&env.home.path().join("www"));
    let (python, text) = install_demo_from_index(&context, &server);
    insta::assert_snapshot!(text);
    assert_eq!(installed_build(&python), "gfx1100");
    assert_eq!(installed(&python), names(&["demo", "demo-device-gfx1100"]));
    let fetched: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert!(
        fetched.contains(&"files/demo-1.0-variants.json".to_owned()),
        "{fetched:?}"
    );
    assert!(
        fetched.contains(&"files/demo-1.0-py3-none-any-gfx1100.whl".to_owned()),
        "{fetched:?}"
    );
    assert!(
        !fetched.iter().any(|p| p.ends_with("-gfx90a.whl")),
        "{fetched:?}"
    );
}

/// A package index that fails the project page once and cuts the variant
/// wheel halfway: the install rides it out as every other download does,
/// saying so, and takes no byte of the wheel twice.
#[test]
fn install_retries_a_flaky_package_index_and_resumes_a_cut_wheel() {
    use crate::common::server::Fault;
    let context = TestContext::new();
    let env = &context.env;
    let server = serve_demo(&env.home.path().join("www"));
    let wheel = "files/demo-1.0-py3-none-any-gfx1100.whl";
    let size = fs_err::metadata(env.home.path().join("www").join(wheel))
        .unwrap()
        .len();
    server.fault("simple/demo/", Fault::Status500 { times: 1 });
    server.fault(
        wheel,
        Fault::ResetAfter {
            after: size / 2,
            times: 1,
        },
    );
    let (python, text) = install_demo_from_index(&context, &server);
    // Where the wheel was cut depends on how its writer deflates it.
    let text = text.replace(
        &format!("after {} bytes", size / 2),
        "after <HALF THE WHEEL> bytes",
    );
    insta::assert_snapshot!(text);
    assert_eq!(installed_build(&python), "gfx1100");
    let ranges: Vec<Option<String>> = server
        .requests()
        .iter()
        .filter(|r| r.path == wheel)
        .map(|r| r.range.clone())
        .collect();
    assert_eq!(ranges, [None, Some(format!("bytes={}-", size / 2))]);
    assert_eq!(server.bytes_sent(wheel), size);
}

#[test]
fn install_picks_the_null_variant_from_a_find_links_page_without_a_gpu() {
    let context = TestContext::new();
    let env = &context.env;
    let server = serve_demo(&env.home.path().join("www"));
    let python = uv_venv(
        &env.home.path().join("venv"),
        &env.home.path().join("uv-cache"),
    );
    let mut command = kpack(env);
    command
        .args(["pip", "install", "demo", "--python"])
        .arg(&python)
        .args([
            "--",
            "--no-index",
            "--find-links",
            &format!("{}/files/links.html", server.url()),
        ]);
    let url = server.url();
    let out = output(&mut command);
    let tools = python_venv().display().to_string();
    let text = context.transcript_masking(&out, &[(&url, "<INDEX>"), (&tools, "<TOOLS>")]);
    insta::assert_snapshot!(text);
    assert_eq!(installed_build(&python), "null");
    assert_eq!(installed(&python), names(&["demo"]));
}

/// The installed version of a distribution, as Python reports it.
fn version_of(python: &Path, dist: &str) -> String {
    success(Command::new(python).args([
        "-c",
        &format!("import importlib.metadata as m; print(m.version('{dist}'))"),
    ]))
    .trim()
    .to_owned()
}

#[test]
fn sync_after_a_host_upgrade_installs_the_matching_device_version() {
    let demo = Demo::with_pip();
    let (links, python) = (&demo.links, &demo.python);
    demo.pip_install(&["demo[device-gfx1100]==1.0"]);
    demo_host_at(links, "1.1", None);
    demo_device_at(links, "gfx1100", "1.1");
    // An upgrade of the host alone leaves the 1.0 device code behind.
    demo.pip_install(&["--no-deps", "--upgrade", "demo"]);
    assert_eq!(version_of(python, "demo-device-gfx1100"), "1.0");
    let sync = || demo.transcript(&["--target", "gfx1100", "pip", "sync"]);
    insta::assert_snapshot!("sync_after_host_upgrade", sync());
    assert_eq!(version_of(python, "demo"), "1.1");
    assert_eq!(version_of(python, "demo-device-gfx1100"), "1.1");
    insta::assert_snapshot!("sync_after_host_upgrade_again", sync());
}

#[test]
fn without_any_pip_install_installs_then_adds_device_extras_and_resolve_says_why_not() {
    let context = TestContext::new();
    let env = &context.env;
    let links = env.home.path().join("links");
    demo_links(&links);
    let python = uv_venv(
        &env.home.path().join("venv"),
        &env.home.path().join("uv-cache"),
    );
    // A PATH with uv and no python3 at all.
    let bin = env.home.path().join("only-uv");
    fs_err::create_dir_all(&bin).unwrap();
    fs_err::os::unix::fs::symlink(python_venv().join("bin/uv"), bin.join("uv")).unwrap();

    let mut command = kpack(env);
    command
        .args(["--target", "gfx1100", "pip", "install", "demo", "--python"])
        .arg(&python)
        .arg("--")
        .args(links_args(&links))
        .env("PATH", &bin);
    let install = pip_transcript(&context, &output(&mut command));
    insta::assert_snapshot!("without_pip_install", install);
    assert_eq!(installed(&python), names(&["demo", "demo-device-gfx1100"]));

    let mut command = kpack(env);
    command
        .args(["--target", "gfx1100", "pip", "resolve", "demo", "--python"])
        .arg(&python)
        .env("PATH", &bin);
    let resolve = pip_transcript(&context, &output(&mut command));
    insta::assert_snapshot!("without_pip_resolve", resolve);
}

/// Writes into `links` a host `amd-torch` 2.9 packaged as rocm-bootstrap
/// packages: a target-level extra requiring the device distributions of
/// its whole chain (`device-gfx1201`: gfx1201, gfx12-0, gfx12), and extras
/// named at the sub-family (`device-gfx9-4`) and family (`device-gfx11`)
/// levels; and every device distribution they name.
fn rocm_bootstrap_links(links: &Path) {
    let extras: [(&str, &[&str]); 3] = [
        ("gfx1201", &["gfx1201", "gfx12-0", "gfx12"]),
        ("gfx9-4", &["gfx9-4"]),
        ("gfx11", &["gfx11"]),
    ];
    let mut headers = Vec::new();
    for (extra, devices) in extras {
        headers.push(format!("Provides-Extra: device-{extra}"));
        for device in devices {
            headers.push(format!(
                "Requires-Dist: amd-torch-device-{device}==2.9; extra == \"device-{extra}\""
            ));
        }
    }
    fs_err::create_dir_all(links).unwrap();
    build_wheel(
        links,
        &WheelSpec {
            name: "amd-torch".into(),
            version: "2.9".into(),
            headers,
            files: vec![("amd_torch/__init__.py".into(), Vec::new())],
            ..WheelSpec::default()
        },
    );
    for device in ["gfx1201", "gfx12-0", "gfx12", "gfx9-4", "gfx11"] {
        build_wheel(
            links,
            &WheelSpec {
                name: format!("amd-torch-device-{device}"),
                version: "2.9".into(),
                headers: vec!["Requires-Dist: amd-torch==2.9".into()],
                files: vec![(
                    format!("amd_torch_device_{}/code.kpack", device.replace('-', "_")),
                    device.as_bytes().to_vec(),
                )],
                ..WheelSpec::default()
            },
        );
    }
}

#[test]
fn device_extras_named_at_every_packaging_level_serve_each_gpu_and_the_union_is_installed() {
    let demo = Demo::with_pip();
    rocm_bootstrap_links(&demo.links);
    demo.pip_install(&["amd-torch"]);
    let targets = ["--target", "gfx1201,gfx1151,gfx942:sramecc+:xnack-"];
    let mut resolve = demo.kpack(&[targets[0], targets[1], "pip", "resolve", "amd-torch"]);
    assert_eq!(
        kpack_ok(demo.find_links(&mut resolve)).0,
        "amd-torch[device-gfx1201,device-gfx9-4,device-gfx11]\n"
    );
    insta::assert_snapshot!(demo.transcript(&[targets[0], targets[1], "pip", "sync"]));
    assert_eq!(
        installed(&demo.python),
        names(&[
            "amd-torch",
            "amd-torch-device-gfx1201",
            "amd-torch-device-gfx12-0",
            "amd-torch-device-gfx12",
            "amd-torch-device-gfx9-4",
            "amd-torch-device-gfx11",
        ])
    );
}

const MIB: u64 = 1 << 20;

/// `kpack-get pip install demo --target gfx1100 --dry-run` from `server`'s
/// package index under watch (killed past 60 s or 1 GiB), its temporary
/// files in `tmp`, with `env_vars` set.
fn watched_dry_run(
    context: &TestContext,
    server: &TestServer,
    python: &Path,
    tmp: &Path,
    env_vars: &[(&str, &str)],
) -> kpack_test_support::measure::Measured {
    fs_err::create_dir_all(tmp).unwrap();
    let mut command = kpack(&context.env);
    command
        .args(["pip", "install", "demo", "--target", "gfx1100", "--dry-run"])
        .arg("--python")
        .arg(python)
        .args(["--", "--index-url", &format!("{}/simple/", server.url())])
        .env("TMPDIR", tmp)
        .env("KPACK_GET_ATTEMPTS", "1")
        .envs(env_vars.iter().copied());
    kpack_test_support::measure::run_watched(
        &mut command,
        std::time::Duration::from_secs(60),
        1024 * MIB,
    )
}

/// The bytes of the files under `dir`.
fn disk_use(dir: &Path) -> u64 {
    fs_err::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                disk_use(&entry.path())
            } else {
                meta.len()
            }
        })
        .sum()
}

/// A package index answering `variants.json` or the chosen variant wheel
/// without end: `pip install --dry-run` stops the document at the index
/// cap and the wheel at the wheel cap (`--max-wheel-size`), each refusal
/// naming the URL and the cap, under 64 MiB of memory and of temporary
/// files above a good run, leaving no temporary file behind.
#[test]
fn pip_install_stops_an_endless_variants_document_and_wheel_at_their_caps() {
    use crate::common::server::Fault;
    let context = TestContext::new();
    let home = context.env.home.path();
    let server = serve_demo(&home.join("www"));
    let python = pip_venv(&home.join("venv"));
    let wheel_cap = (4 * MIB).to_string();
    let cap = [("KPACK_GET_MAX_WHEEL_SIZE", wheel_cap.as_str())];
    let good = watched_dry_run(&context, &server, &python, &home.join("tmp-good"), &cap);
    assert!(good.output.status.success(), "{}", describe(&good.output));
    let cases = [
        (
            "files/demo-1.0-variants.json",
            (16 * MIB).to_string(),
            "max-index-size",
        ),
        (
            "files/demo-1.0-py3-none-any-gfx1100.whl",
            wheel_cap.clone(),
            "max-wheel-size",
        ),
    ];
    for (path, bound, setting) in cases {
        server.clear_faults();
        server.fault(path, Fault::Endless);
        let tmp = home.join("tmp").join(setting);
        let run = watched_dry_run(&context, &server, &python, &tmp, &cap);
        let text = String::from_utf8_lossy(&run.output.stderr).into_owned();
        assert_eq!(run.killed, None, "{path}: {text}");
        let growth = run.peak_rss.saturating_sub(good.peak_rss);
        let taken = server.bytes_sent(path);
        eprintln!(
            "{path}: refused in {:?}, peak RSS {} MiB ({} MiB over a good run), {taken} bytes taken",
            run.elapsed,
            run.peak_rss / MIB,
            growth / MIB
        );
        assert!(!run.output.status.success(), "{path}: {text}");
        assert!(growth < 64 * MIB, "{path}: grew {growth} bytes");
        assert!(taken < 64 * MIB, "{path}: {taken} bytes taken");
        let url = format!("{}/{path}", server.url());
        for mention in [url.as_str(), bound.as_str(), setting] {
            assert!(text.contains(mention), "{path}: no {mention:?} in {text}");
        }
        assert!(!text.contains("panicked"), "{path}: {text}");
        assert_eq!(disk_use(&tmp), 0, "{path}: left in {}", tmp.display());
    }
}

/// A package index whose page gives the variant wheel another digest
/// (`#sha256=`) than the file has: refused, naming the URL and both
/// digests; with the right digest it installs.
#[test]
fn pip_install_checks_a_wheel_against_the_digest_its_page_gives() {
    let context = TestContext::new();
    let home = context.env.home.path();
    let www = home.join("www");
    let server = serve_demo(&www);
    let python = pip_venv(&home.join("venv"));
    let wheel = "demo-1.0-py3-none-any-gfx1100.whl";
    let actual =
        kpack_repo_index::Sha256::of(&fs_err::read(www.join("files").join(wheel)).unwrap());
    let page = www.join("simple/demo/index.html");
    let original = fs_err::read_to_string(&page).unwrap();
    let wrong = kpack_repo_index::Sha256::of(b"another wheel");
    for (digest, good) in [(wrong, false), (actual, true)] {
        let href = format!("../../files/{wheel}");
        let text = original.replace(
            &format!("\"{href}\""),
            &format!("\"{href}#sha256={digest}\""),
        );
        assert_ne!(text, original);
        fs_err::write(&page, text).unwrap();
        let run = watched_dry_run(&context, &server, &python, &home.join("tmp"), &[]);
        let stderr = String::from_utf8_lossy(&run.output.stderr).into_owned();
        assert_eq!(run.output.status.success(), good, "{digest}: {stderr}");
        if !good {
            let url = format!("{}/files/{wheel}", server.url());
            for mention in [url, wrong.to_string(), actual.to_string()] {
                assert!(stderr.contains(&mention), "no {mention:?} in {stderr}");
            }
        }
    }
}

/// A package index serving JSON pages (PEP 691) with each file's size
/// (PEP 700) and digest: the variant wheel is read no further than the
/// size its page gives (an endless answer is refused there, naming it),
/// and with the page as it is the install goes through.
#[test]
fn pip_install_reads_a_wheel_no_further_than_its_json_page_gives() {
    use crate::common::server::Fault;
    let context = TestContext::new();
    let home = context.env.home.path();
    let www = home.join("www");
    let server = serve_demo(&www);
    let python = pip_venv(&home.join("venv"));
    let files: Vec<String> = fs_err::read_dir(www.join("files"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.file_name().unwrap().to_string_lossy().starts_with("demo-1.0"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = fs_err::read(&path).unwrap();
            let sha256 = kpack_repo_index::Sha256::of(&bytes);
            format!(
                r#"{{"filename": "{name}", "url": "../../files/{name}", "hashes": {{"sha256": "{sha256}"}}, "size": {}}}"#,
                bytes.len()
            )
        })
        .collect();
    let page = format!(
        r#"{{"meta": {{"api-version": "1.1"}}, "name": "demo", "files": [{}]}}"#,
        files.join(", ")
    );
    fs_err::write(www.join("simple/demo/index.json"), page).unwrap();
    // A bound the wheel's own size is far below, so that only the page's
    // size can stop it early.
    let cap = [("KPACK_GET_MAX_WHEEL_SIZE", "1073741824")];
    let good = watched_dry_run(&context, &server, &python, &home.join("tmp-good"), &cap);
    assert!(good.output.status.success(), "{}", describe(&good.output));

    let wheel = "files/demo-1.0-py3-none-any-gfx1100.whl";
    let size = fs_err::metadata(www.join(wheel)).unwrap().len();
    server.fault(wheel, Fault::Endless);
    let tmp = home.join("tmp");
    let run = watched_dry_run(&context, &server, &python, &tmp, &cap);
    let text = String::from_utf8_lossy(&run.output.stderr).into_owned();
    assert_eq!(run.killed, None, "{text}");
    assert!(!run.output.status.success(), "{text}");
    let taken = server.bytes_sent(wheel);
    assert!(taken < 64 * MIB, "{taken} bytes taken");
    let listed = format!("the {size} bytes the package index gives");
    let url = format!("{}/{wheel}", server.url());
    for mention in [url.as_str(), listed.as_str()] {
        assert!(text.contains(mention), "no {mention:?} in {text}");
    }
    assert_eq!(disk_use(&tmp), 0, "left in {}", tmp.display());
}

#[test]
fn pip_install_fetches_each_wheel_once_from_a_find_links_page() {
    let context = TestContext::new();
    let home = context.env.home.path();
    let root = home.join("www");
    let files = root.join("files");
    demo_links(&files);
    let anchors: String = fs_err::read_dir(&files)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .map(|name| format!("<a href=\"{name}\">{name}</a><br/>\n"))
        .collect();
    fs_err::write(
        files.join("links.html"),
        format!("<!DOCTYPE html>\n<html><body>\n{anchors}</body></html>\n"),
    )
    .unwrap();
    let server = TestServer::start(&root);
    let python = pip_venv(&home.join("venv"));
    let mut command = kpack(&context.env);
    command
        .args(["pip", "install", "demo", "--target", "gfx1100", "--python"])
        .arg(&python)
        // pip's own cache would hide a second download.
        .env("PIP_NO_CACHE_DIR", "1")
        .args([
            "--",
            "--no-index",
            "--find-links",
            &format!("{}/files/links.html", server.url()),
        ]);
    let out = output(&mut command);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(installed(&python), names(&["demo", "demo-device-gfx1100"]));
    let mut fetched: BTreeMap<String, usize> = BTreeMap::new();
    for request in server.requests() {
        if request.method == "GET" && request.path.ends_with(".whl") {
            *fetched.entry(request.path).or_default() += 1;
        }
    }
    assert_eq!(
        fetched,
        BTreeMap::from([
            ("files/demo-1.0-py3-none-any.whl".to_owned(), 1),
            (
                "files/demo_device_gfx1100-1.0-py3-none-any.whl".to_owned(),
                1
            ),
        ])
    );
}

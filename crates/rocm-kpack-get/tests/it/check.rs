//! `kpack-get check` and `kpack-get pip check`: a prefix and a Python
//! environment made wrong on purpose in each way a GPU can end up without
//! its code (an archive deleted, a package or device distribution for
//! another GPU, a fat library made for another GPU, a database payload
//! missing, a host distribution without its device distribution), each
//! reported as such, then fixed by running exactly the command the report
//! gives (read from its `--json`), after which the check passes.

use std::path::Path;
use std::process::Command;

use crate::common::archives::publish_rocrand_for;
use crate::common::gpus::{fake_sysfs, FakeNode, CAPABILITY_SRAMECC};
use crate::common::{describe, fat_targets, output, success};
use kpack_test_support::context::TestContext;
use kpack_test_support::python_venv;
use kpack_test_support::venv::with_python_tools;
use rocm_kpack_get::install::record::InstalledRecord;

const GFX90A: &str = "gfx90a:sramecc+:xnack-";
const LIBRARY: &str = "lib/librocrand.so.1.1";

/// The report of `command` (which must add `--json`), and its exit code.
fn report(command: &mut Command) -> (serde_json::Value, i32) {
    let out = output(command);
    let report =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)));
    (report, out.status.code().unwrap_or(-1))
}

/// The fix command of a report, as a process runs it.
fn fix_argv(report: &serde_json::Value) -> Vec<String> {
    let argv: Vec<String> = report["fix"]["argv"]
        .as_array()
        .unwrap_or_else(|| panic!("no fix in {report:#}"))
        .iter()
        .map(|arg| arg.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(argv[0], "kpack-get", "{argv:?}");
    argv
}

/// Runs the fix command of `report` exactly, in `command`'s environment
/// (kpack-get with the test's home, nothing else added).
fn run_fix(mut command: Command, report: &serde_json::Value) -> String {
    let argv = fix_argv(report);
    success(command.args(&argv[1..]))
}

/// The machine's GPU is an MI210 (gfx90a with SRAM ECC), known from the
/// kfd topology.
fn with_an_mi210(context: &TestContext) {
    fake_sysfs(
        &context.env.sysfs,
        &[
            FakeNode::cpu(),
            FakeNode::gpu(90010, CAPABILITY_SRAMECC, "AMD Instinct MI210"),
        ],
    );
}

#[test]
fn everything_installed_for_the_gpu_is_served() {
    let context = TestContext::new();
    context.install_for(GFX90A);
    let checked = context.run(&mut context.kpack_get(&["--target", GFX90A, "check"]));
    insta::assert_snapshot!("served", checked);
    let (report, code) = report(&mut context.kpack_get(&["--target", GFX90A, "--json", "check"]));
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["schema"], 1);
    assert_eq!(report["served"], true);
    assert_eq!(report["checked"]["split_binaries"], 1);
    assert_eq!(report["fix"], serde_json::Value::Null);
}

#[test]
fn without_a_gpu_there_is_nothing_to_serve() {
    let context = TestContext::new();
    context.install_for(GFX90A);
    let checked = context.run(&mut context.kpack_get(&["check"]));
    insta::assert_snapshot!("no_gpu", checked);
}

#[test]
fn a_deleted_archive_is_missing_and_a_reinstall_brings_it_back() {
    let context = TestContext::new();
    context.install_for(GFX90A);
    let archive = context.env.prefix.join(".kpack/rocrand_gfx90a.kpack");
    fs_err::remove_file(&archive).unwrap();
    let args = ["--target", GFX90A, "check"];
    insta::assert_snapshot!(
        "archive_deleted",
        context.run(&mut context.kpack_get(&args))
    );
    let (found, code) = report(&mut context.kpack_get(&["--target", GFX90A, "--json", "check"]));
    assert_eq!(code, 9);
    let reasons: Vec<(&str, &str)> = found["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        reasons,
        [
            (".kpack/rocrand_gfx90a.kpack", "archive-missing"),
            (LIBRARY, "archive-missing")
        ]
    );
    run_fix(context.env.command(), &found);
    assert!(archive.is_file());
    success(&mut context.kpack_get(&args));
}

/// A recorded binary replaced by a link (to a good copy of itself, even)
/// or a FIFO is reported by path, not skipped as a file that is no binary:
/// check cannot vouch for code it does not read.
#[test]
fn a_recorded_binary_that_is_no_longer_a_regular_file_is_reported() {
    let context = TestContext::new();
    context.install_for(GFX90A);
    let library = context.env.prefix.join(LIBRARY);
    let copy = context.home().join("librocrand-copy.so");
    fs_err::copy(&library, &copy).unwrap();
    let fifo = |path: &Path| {
        success(kpack_test_support::tool("mkfifo").arg(path));
    };
    let link = |path: &Path| fs_err::os::unix::fs::symlink(&copy, path).unwrap();
    for (kind, make) in [
        ("a symbolic link", &link as &dyn Fn(&Path)),
        ("a FIFO", &fifo),
    ] {
        fs_err::remove_file(&library).unwrap();
        make(&library);
        let (found, code) =
            report(&mut context.kpack_get(&["--target", GFX90A, "--json", "check"]));
        assert_eq!(code, 9, "{kind}: {found:#}");
        assert_eq!(found["served"], false, "{kind}: {found:#}");
        let findings = found["findings"].as_array().unwrap();
        assert!(
            findings.iter().any(|f| f["path"] == LIBRARY
                && f["reason"] == "unreadable"
                && f["detail"].as_str().unwrap().contains(kind)),
            "{kind}: {found:#}"
        );
    }
}

#[test]
fn a_package_installed_for_another_gpu_is_the_wrong_device_package() {
    let context = TestContext::new();
    with_an_mi210(&context);
    context.install_for("gfx1030");
    let checked = context.run(&mut context.kpack_get(&["check"]));
    insta::assert_snapshot!("installed_for_another_gpu", checked);
    let (found, code) = report(&mut context.kpack_get(&["--json", "check"]));
    assert_eq!(code, 9);
    assert_eq!(found["gpus"][0]["target"], GFX90A);
    run_fix(context.env.command(), &found);
    let after = context.run(&mut context.kpack_get(&["check"]));
    assert!(after.starts_with("exit: 0\n"), "{after}");
    assert!(!context
        .env
        .prefix
        .join(".kpack/rocrand_gfx1030.kpack")
        .exists());
}

/// kpack-get in the fat layout, as on a machine whose HIP runtime does not
/// follow kpack markers.
fn fat(mut command: Command) -> Command {
    command.env("KPACK_GET_LAYOUT", "fat");
    command
}

#[test]
fn a_fat_library_made_for_another_gpu_that_nothing_published_serves_has_no_fix() {
    let context = TestContext::new();
    success(&mut fat(context.kpack_get(&[
        "--target",
        "gfx1030",
        "install",
        "rocm-rand",
    ])));
    let mut check = fat(context.kpack_get(&["--target", "gfx1100", "check"]));
    insta::assert_snapshot!("fat_for_another_gpu_unpublished", context.run(&mut check));
    let (found, code) = report(&mut fat(
        context.kpack_get(&["--target", "gfx1100", "--json", "check"])
    ));
    assert_eq!(code, 9);
    assert_eq!(found["fix"], serde_json::Value::Null, "{found:#}");
}

/// Publishes rocm-rand 5.3.4 into the context's own repository with an
/// archive for gfx1100 beside 5.3.3's, so that a gfx1100 machine has code
/// to install.
fn publish_with_gfx1100(context: &TestContext) {
    publish_rocrand_for(context, "5.3.4", &["gfx1100"]);
}

#[test]
fn a_fat_library_made_for_another_gpu_is_made_again_for_this_one() {
    let context = TestContext::private();
    publish_with_gfx1100(&context);
    success(&mut fat(context.kpack_get(&[
        "--target",
        "gfx1030",
        "install",
        "rocm-rand",
    ])));
    let library = context.env.prefix.join(LIBRARY);
    assert_eq!(fat_targets(&library).unwrap(), ["gfx1030"]);
    let mut check = fat(context.kpack_get(&["--target", "gfx1100", "check"]));
    insta::assert_snapshot!("fat_for_another_gpu", context.run(&mut check));
    let (found, code) = report(&mut fat(
        context.kpack_get(&["--target", "gfx1100", "--json", "check"])
    ));
    assert_eq!(code, 9);
    let reasons: Vec<&str> = found["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, ["wrong-device-package", "fat-for-other-gpus"]);
    run_fix(fat(context.env.command()), &found);
    assert_eq!(fat_targets(&library).unwrap(), ["gfx1100"]);
    success(&mut fat(
        context.kpack_get(&["--target", "gfx1100", "check"])
    ));
}

/// The findings of a report as (reason, path) pairs.
fn reasons(report: &serde_json::Value) -> Vec<(String, Option<String>)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["reason"].as_str().unwrap().to_owned(),
                f["path"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn a_deleted_tensile_payload_is_missing_and_a_reinstall_brings_it_back() {
    let context = crate::components::blas_context();
    let args = |more: &[&'static str]| {
        let mut all = vec!["--target", "gfx1030"];
        all.extend_from_slice(more);
        all
    };
    success(&mut context.kpack_get(&args(&["install", "rocm-blas"])));
    let tensile = context
        .env
        .prefix
        .join(crate::components::tensile_file("gfx1030"));
    fs_err::remove_file(&tensile).unwrap();
    let checked = context.run(&mut context.kpack_get(&args(&["check"])));
    insta::assert_snapshot!("tensile_payload_deleted", checked);
    let (found, code) = report(&mut context.kpack_get(&args(&["--json", "check"])));
    assert_eq!(code, 9);
    assert_eq!(
        reasons(&found),
        [(
            "payload-missing".to_owned(),
            Some(crate::components::tensile_file("gfx1030"))
        )]
    );
    run_fix(context.env.command(), &found);
    assert!(tensile.is_file());
    success(&mut context.kpack_get(&args(&["check"])));
}

/// A package installed without the payload its GPU's sub-family or family
/// owns (by a kpack-get that did not know owners): its record lacks the
/// artifact, and the repository's index, kept from the install, says an
/// install for the GPU would choose it.
#[test]
fn a_payload_the_family_owns_missing_from_the_record_is_installed_by_install() {
    let context = crate::components::torch_context();
    let args = |more: &[&'static str]| {
        let mut all = vec!["--target", "gfx1100"];
        all.extend_from_slice(more);
        all
    };
    success(&mut context.kpack_get(&args(&["install", "torch"])));
    let prefix = &context.env.prefix;
    let record_path = prefix.join(".kpack/installed.toml");
    let mut record = InstalledRecord::load(&record_path).unwrap();
    let torch = record.packages.get_mut(&"torch".parse().unwrap()).unwrap();
    torch.artifacts.retain(|a| a.owner.is_none());
    torch
        .files
        .retain(|f| !f.path.as_str().starts_with("lib/aotriton.images/"));
    fs_err::write(&record_path, record.to_toml().unwrap()).unwrap();
    fs_err::remove_dir_all(prefix.join("lib/aotriton.images")).unwrap();

    let checked = context.run(&mut context.kpack_get(&args(&["check"])));
    insta::assert_snapshot!("owned_payload_not_installed", checked);
    let (found, code) = report(&mut context.kpack_get(&args(&["--json", "check"])));
    assert_eq!(code, 9);
    assert_eq!(reasons(&found), [("payload-missing".to_owned(), None)]);
    let argv = fix_argv(&found);
    assert!(!argv.contains(&"--reinstall".to_owned()), "{argv:?}");
    run_fix(context.env.command(), &found);
    assert!(prefix
        .join("lib/aotriton.images/amd-gfx11xx/flash/attn_fwd/kernel.aks2")
        .is_file());
    success(&mut context.kpack_get(&args(&["check"])));
}

/// kpack-get for `pip` commands in `env`: the test's Python tools, and
/// pip finding the split jax plugin's wheels in `links` (as a user's
/// `pip.conf` or `PIP_FIND_LINKS` would have it), so the fix a report
/// gives runs as it is; the layout is `kpack` unless `auto` is asked for.
fn pip_kpack(context: &TestContext, links: &Path, auto: bool) -> Command {
    let mut command = if auto {
        crate::pip_layout::kpack(&context.env)
    } else {
        let mut command = context.env.command();
        with_python_tools(&mut command, context.home());
        command
    };
    command
        .env("PIP_NO_INDEX", "1")
        .env("PIP_FIND_LINKS", links);
    command
}

/// `kpack-get --target GPU [--json] pip check --python PY`.
fn pip_check(mut command: Command, gpu: &str, json: bool, python: &Path) -> Command {
    command.args(["--target", gpu]);
    if json {
        command.arg("--json");
    }
    command.args(["pip", "check", "--python"]).arg(python);
    command
}

/// The transcript of a pip check, the test tools masked too.
fn pip_transcript(context: &TestContext, command: &mut Command) -> String {
    let tools = python_venv().display().to_string();
    context.transcript_masking(&output(command), &[(&tools, "<TOOLS>")])
}

#[test]
fn pip_a_host_without_its_device_distribution_is_synced() {
    let (context, jax, python, site) = crate::pip_layout::host_installed();
    let links = &jax.links;
    let mut check = pip_check(pip_kpack(&context, links, false), "gfx1100", false, &python);
    insta::assert_snapshot!(
        "pip_device_distribution_missing",
        pip_transcript(&context, &mut check)
    );
    let json = pip_check(pip_kpack(&context, links, false), "gfx1100", true, &python);
    let (found, code) = report(&mut { json });
    assert_eq!(code, 9);
    let first = &found["findings"][0];
    assert_eq!(first["reason"], "device-package-missing", "{found:#}");
    assert_eq!(first["package"], "jax-rocm7-plugin");
    run_fix(pip_kpack(&context, links, false), &found);
    assert!(site
        .join("jax_rocm7_plugin/.kpack/rocm_gfx1100.kpack")
        .is_file());
    let mut again = pip_check(pip_kpack(&context, links, false), "gfx1100", false, &python);
    let served = pip_transcript(&context, &mut again);
    insta::assert_snapshot!("pip_served", served);
}

#[test]
fn pip_a_device_distribution_for_another_gpu_only_is_the_wrong_one() {
    let (context, jax, python, site) = crate::pip_layout::host_installed();
    let links = &jax.links;
    crate::pip_layout::sync(&context.env, &python, &jax, &["--target", "gfx90a:xnack-"]);
    crate::pip_layout::assert_fat_for(&site, "gfx90a");
    let mut check = pip_check(pip_kpack(&context, links, true), "gfx1100", false, &python);
    insta::assert_snapshot!(
        "pip_wrong_device_distribution",
        pip_transcript(&context, &mut check)
    );
    let json = pip_check(pip_kpack(&context, links, true), "gfx1100", true, &python);
    let (found, code) = report(&mut { json });
    assert_eq!(code, 9);
    let mut reasons: Vec<String> = reasons(&found).into_iter().map(|(r, _)| r).collect();
    reasons.dedup();
    assert_eq!(reasons, ["wrong-device-package", "fat-for-other-gpus"]);
    run_fix(pip_kpack(&context, links, true), &found);
    crate::pip_layout::assert_fat_for(&site, "gfx1100");
    success(&mut pip_check(
        pip_kpack(&context, links, true),
        "gfx1100",
        false,
        &python,
    ));
}

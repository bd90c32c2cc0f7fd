//! The first hour, as users of apt, pip and ROCm live it: targets spelt as
//! ROCm's docs, `PYTORCH_ROCM_ARCH` and `rocm_agent_enumerator` spell them
//! (`gfx90a`, any case), and a GPU a package has no code for said once,
//! the same way, with the plan shown and the per-node override ROCm users
//! apply to an RDNA2 iGPU. Debian's rocm-rand 5.3.3 has code for gfx803,
//! gfx900, gfx906, gfx908, gfx90a (both xnack modes) and gfx1030.

use std::process::Command;

use crate::common::gpus::{fake_sysfs, FakeNode};
use crate::common::{output, success};
use kpack_test_support::context::TestContext;

/// kpack-get without HSA, whatever the machine's GPUs.
fn kpack_get(context: &TestContext, args: &[&str]) -> Command {
    let mut command = context.kpack_get(&["--no-hsa", "--no-progress"]);
    command.args(args);
    command
}

/// The pool files a dry run's JSON plan of `install rocm-rand` lists.
fn planned(context: &TestContext, target: &str) -> Vec<String> {
    let mut command = kpack_get(
        context,
        &[
            "--json",
            "--target",
            target,
            "install",
            "rocm-rand",
            "--dry-run",
        ],
    );
    let plan: serde_json::Value = serde_json::from_str(&success(&mut command)).unwrap();
    plan["packages"][0]["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            a["path"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn a_target_without_features_gets_the_code_of_each_mode() {
    let context = TestContext::new();
    for target in ["gfx90a", "GFX90A", "gfx90a:sramecc+"] {
        let files = planned(&context, target);
        assert!(
            files.iter().any(|f| f.starts_with("rocrand_gfx90a.kpack")),
            "{target}: {files:?}"
        );
    }
    let out = success(&mut kpack_get(
        &context,
        &["--target", "gfx90a", "install", "rocm-rand"],
    ));
    assert!(out.contains("rocm-rand 5.3.3"), "{out}");
    let listed = success(&mut kpack_get(&context, &["--json", "list"]));
    assert!(listed.contains("gfx90a"), "{listed}");
}

#[test]
fn targets_that_name_no_amd_gpu_are_usage_errors() {
    let context = TestContext::new();
    // Empty items name nothing: an empty variable (detection, which
    // finds no GPU here), a trailing comma.
    let dry_run = |variable: &str| {
        success(
            kpack_get(&context, &["install", "rocm-rand", "--dry-run"])
                .env("KPACK_GET_TARGETS", variable),
        )
    };
    assert!(!dry_run("").contains("kernels for gfx"));
    assert!(dry_run("gfx1030,").contains("kernels for gfx1030"));
    for target in ["sm_80", "90a", "gfx1100:xnack+"] {
        let out = output(&mut kpack_get(
            &context,
            &["--target", target, "install", "rocm-rand", "--dry-run"],
        ));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{target}: {stderr}");
        assert!(stderr.contains(&format!("{target:?}")), "{stderr}");
    }
}

#[test]
fn package_names_fold_case_and_pip_requirements_are_read() {
    let context = TestContext::new();
    let out = success(&mut kpack_get(
        &context,
        &[
            "--target",
            "gfx1030",
            "install",
            "ROCm-Rand==5.3.3",
            "--dry-run",
        ],
    ));
    assert!(out.contains("rocm-rand 5.3.3"), "{out}");
    success(&mut kpack_get(
        &context,
        &["--target", "gfx1030", "install", "rocm-rand"],
    ));
    let out = success(&mut kpack_get(&context, &["uninstall", "ROCm-Rand"]));
    assert!(out.contains("rocm-rand"), "{out}");
    let out = output(&mut kpack_get(&context, &["install", "rocm-rand!=5.3.3"]));
    assert_eq!(out.status.code(), Some(2));
    let shown = success(&mut kpack_get(
        &context,
        &["--target", "gfx1030", "show", "rocm-rand"],
    ));
    assert!(shown.contains("5.3.3"), "{shown}");
}

/// An RX 7900 XTX (node 1) and a Raphael iGPU (node 2): rocm-rand 5.3.3 has
/// code for neither, but for the iGPU's sibling gfx1030.
fn two_gpu_machine() -> TestContext {
    let context = TestContext::private();
    fake_sysfs(
        &context.env.sysfs,
        &[
            FakeNode::cpu(),
            FakeNode::gpu(110000, 0, "Radeon RX 7900 XTX"),
            FakeNode::gpu(100306, 0, "Raphael"),
        ],
    );
    context
}

#[test]
fn no_code_for_the_gpus_shows_the_plan_then_says_why_and_the_per_node_override() {
    let context = two_gpu_machine();
    for dry_run in [true, false] {
        let mut args = vec!["install", "rocm-rand"];
        if dry_run {
            args.push("--dry-run");
        }
        let out = output(&mut kpack_get(&context, &args));
        let name = if dry_run { "dry_run" } else { "install" };
        insta::assert_snapshot!(
            format!("no_code_for_two_gpus_{name}"),
            context.transcript(&out)
        );
        assert_eq!(out.status.code(), Some(6));
    }
    assert!(context.pool_gets().is_empty(), "{:?}", context.pool_gets());

    // detect says it the same way, with the same hint.
    let detected = success(&mut kpack_get(&context, &["detect"]));
    insta::assert_snapshot!("no_code_for_two_gpus_detect", context.filter(&detected));
    assert!(
        detected.contains("rocm/rocm-rand 5.3.3 has no device code for gfx1100, gfx1036; "),
        "{detected}"
    );
    assert!(
        detected.contains("  hint: ROCm users run a gfx1036 with gfx1030's code: set HSA_OVERRIDE_GFX_VERSION_2=10.3.0"),
        "{detected}"
    );
}

#[test]
fn a_typo_or_a_debian_name_gets_did_you_mean() {
    let context = TestContext::new();
    for (typed, command) in [
        ("rocm-rnad", "install"),
        ("rocrand", "install"),
        ("librocrand1", "install"),
        ("librocrand1", "info"),
    ] {
        let out = output(&mut kpack_get(
            &context,
            &["--target", "gfx1030", command, typed],
        ));
        assert_eq!(out.status.code(), Some(6), "{typed}");
        insta::assert_snapshot!(
            format!("did_you_mean_{command}_{typed}"),
            context.transcript(&out)
        );
    }
    // Nothing near: no suggestion, the usual hint.
    let out = output(&mut kpack_get(&context, &["install", "pytorch-triton"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("did you mean"), "{stderr}");
}

#[test]
fn the_plan_compares_the_download_with_the_debian_package_it_was_built_from() {
    let context = TestContext::new();
    let out = output(&mut kpack_get(
        &context,
        &[
            "--target",
            "gfx1030",
            "install",
            "rocm-rand",
            "--dry-run",
            "-v",
        ],
    ));
    insta::assert_snapshot!(context.transcript(&out));
    let deb = fs_err::read_dir(kpack_test_support::fixtures().join("debian"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("librocrand1_"))
        })
        .unwrap();
    let size = kpack_cli::ByteSize(fs_err::metadata(&deb).unwrap().len()).to_string();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("; the Debian package: {size}")),
        "{stdout}"
    );
    assert!(!stdout.contains("saved"), "{stdout}");
}

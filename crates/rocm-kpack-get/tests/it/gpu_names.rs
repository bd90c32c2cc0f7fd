//! The names GPUs are known by, from the kfd topology through `detect`, an
//! install, the fat layout and `check`: gfx1154 and gfx1170, gfx1250 A0
//! silicon (`gfx1250-strict`, reported by the name
//! `HSA_DISABLE_GFX12_STRICT` gives the runtime) and B0, and
//! `HSA_OVERRIDE_GFX_VERSION` values the runtime uses, refuses or takes as
//! unset. rocm-rand 5.3.4 has archives for gfx1100, gfx1170, gfx1250 and
//! gfx1250-strict beside 5.3.3's.

use std::process::Command;

use crate::common::archives::publish_rocrand_for;
use crate::common::gpus::{capability_asic_revision, fake_sysfs, FakeNode};
use crate::common::{fat_targets, output, success};
use kpack_test_support::context::TestContext;

const LIBRARY: &str = "lib/librocrand.so.1.1";

/// A repository of its own with rocm-rand 5.3.4, and the machine's GPUs
/// `nodes` (after a CPU node) in its kfd topology.
fn machine(nodes: &[FakeNode]) -> TestContext {
    let context = TestContext::private();
    publish_rocrand_for(
        &context,
        "5.3.4",
        &["gfx1100", "gfx1170", "gfx1250", "gfx1250-strict"],
    );
    let mut all = vec![FakeNode::cpu()];
    all.extend_from_slice(nodes);
    fake_sysfs(&context.env.sysfs, &all);
    context
}

fn a0() -> FakeNode {
    FakeNode::gpu(120500, capability_asic_revision(0), "MI450 A0")
}

fn b0() -> FakeNode {
    FakeNode::gpu(120500, capability_asic_revision(1), "MI450 B0")
}

/// kpack-get without HSA, `HSA_DISABLE_GFX12_STRICT` set to `strict`
/// when given.
fn kpack_get(context: &TestContext, strict: Option<&str>, args: &[&str]) -> Command {
    let mut command = context.kpack_get(&["--no-hsa"]);
    command.args(args);
    if let Some(value) = strict {
        command.env("HSA_DISABLE_GFX12_STRICT", value);
    }
    command
}

/// The file names of pool paths, sorted, archives without a transport
/// encoding's `.zst`.
fn files<'a>(paths: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut names: Vec<String> = paths
        .into_iter()
        .map(|path| {
            let name = path.rsplit('/').next().unwrap();
            name.strip_suffix(".kpack.zst")
                .map_or_else(|| name.to_owned(), |stem| format!("{stem}.kpack"))
        })
        .collect();
    names.sort();
    names
}

/// The archives and trees a dry run of `install rocm-rand` would fetch,
/// with the environment variables `env` set.
fn planned(context: &TestContext, env: &[(&str, &str)]) -> Vec<String> {
    let mut command = kpack_get(
        context,
        None,
        &["--json", "install", "rocm-rand", "--dry-run"],
    );
    command.envs(env.iter().copied());
    let plan: serde_json::Value = serde_json::from_str(&success(&mut command)).unwrap();
    let artifacts = plan["packages"][0]["artifacts"].as_array().unwrap();
    files(artifacts.iter().map(|a| a["path"].as_str().unwrap()))
}

/// The files fetched from the pool so far.
fn fetched(context: &TestContext) -> Vec<String> {
    let gets = context.pool_gets();
    files(gets.iter().map(String::as_str))
}

#[test]
fn detect_shows_what_a0_silicon_is_and_the_name_the_runtime_reports() {
    let context = machine(&[
        FakeNode::gpu(110700, 0, "gfx1170 iGPU"),
        FakeNode::gpu(110504, 0, "gfx1154"),
        a0(),
        b0(),
    ]);
    for (strict, name) in [(None, "unset"), (Some("0"), "0"), (Some("1"), "1")] {
        let detected = context.run(&mut kpack_get(&context, strict, &["detect"]));
        insta::assert_snapshot!(format!("detect_strict_{name}"), detected);
    }
    let stdout = success(&mut kpack_get(&context, None, &["--json", "detect"]));
    insta::assert_snapshot!("detect_strict_unset_json", context.filter(&stdout));

    let stdout = success(&mut kpack_get(&context, Some("0"), &["--json", "detect"]));
    let detected: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let targets: Vec<&str> = detected["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|gpu| gpu["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["gfx1170", "gfx1154", "gfx1250-strict", "gfx1250"]);
    assert_eq!(detected["gpus"][2]["silicon"]["value"], "0");
    let selection = &detected["selections"][0];
    assert_eq!(
        files(
            selection["artifacts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
        ),
        [
            "rocrand_gfx1170.kpack",
            "rocrand_gfx1250-strict.kpack",
            "rocrand_gfx1250.kpack"
        ]
    );
    assert_eq!(selection["no_device_code"], serde_json::json!(["gfx1154"]));
}

#[test]
fn an_install_on_a0_silicon_carries_both_names_and_check_judges_by_the_one_reported() {
    let context = machine(&[a0()]);
    for strict in [None, Some("0"), Some("1")] {
        let env: Vec<(&str, &str)> = strict
            .map(|value| ("HSA_DISABLE_GFX12_STRICT", value))
            .into_iter()
            .collect();
        assert_eq!(
            planned(&context, &env),
            [
                "rocm-rand-5.3.4-host.tar.zst",
                "rocrand_gfx1250-strict.kpack",
                "rocrand_gfx1250.kpack"
            ],
            "{strict:?}"
        );
    }

    success(&mut kpack_get(&context, None, &["install", "rocm-rand"]));
    assert_eq!(
        fetched(&context),
        [
            "rocm-rand-5.3.4-host.tar.zst",
            "rocrand_gfx1250-strict.kpack",
            "rocrand_gfx1250.kpack"
        ]
    );
    let prefix = &context.env.prefix;
    assert!(prefix.join(".kpack/rocrand_gfx1250.kpack").is_file());
    assert!(prefix.join(".kpack/rocrand_gfx1250-strict.kpack").is_file());

    // Reported as gfx1250: served, with a warning that A0 runs B0 code.
    let checked = context.run(&mut kpack_get(&context, None, &["check"]));
    insta::assert_snapshot!("check_a0_reported_as_gfx1250", checked);
    let out = output(&mut kpack_get(&context, None, &["--json", "check"]));
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["gpus"],
        serde_json::json!([{"target": "gfx1250", "served": true}])
    );
    assert_eq!(report["warnings"].as_array().unwrap().len(), 1);

    // Reported as gfx1250-strict: served by its own code, nothing to warn of.
    let out = output(&mut kpack_get(&context, Some("0"), &["--json", "check"]));
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["gpus"],
        serde_json::json!([{"target": "gfx1250-strict", "served": true}])
    );
    assert_eq!(report["warnings"], serde_json::json!([]));
}

#[test]
fn b0_silicon_is_plain_gfx1250() {
    let context = machine(&[b0()]);
    for strict in ["0", "1"] {
        assert_eq!(
            planned(&context, &[("HSA_DISABLE_GFX12_STRICT", strict)]),
            ["rocm-rand-5.3.4-host.tar.zst", "rocrand_gfx1250.kpack"]
        );
    }
    success(&mut kpack_get(&context, None, &["install", "rocm-rand"]));
    assert_eq!(
        fetched(&context),
        ["rocm-rand-5.3.4-host.tar.zst", "rocrand_gfx1250.kpack"]
    );
    let out = output(&mut kpack_get(&context, None, &["--json", "check"]));
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["warnings"], serde_json::json!([]));
}

#[test]
fn a_fat_library_made_on_a0_silicon_holds_the_code_of_both_names() {
    let context = machine(&[a0()]);
    let fat = |strict: Option<&str>, args: &[&str]| {
        let mut command = kpack_get(&context, strict, args);
        command.env("KPACK_GET_LAYOUT", "fat");
        command
    };
    success(&mut fat(None, &["install", "rocm-rand"]));
    let library = context.env.prefix.join(LIBRARY);
    assert_eq!(
        fat_targets(&library).unwrap(),
        ["gfx1250", "gfx1250-strict"]
    );
    for strict in [None, Some("0")] {
        let out = output(&mut fat(strict, &["check"]));
        assert!(out.status.success(), "{strict:?}: {out:?}");
    }
}

#[test]
fn gfx1170_gets_its_archive_and_gfx1154_has_none() {
    let context = machine(&[FakeNode::gpu(110700, 0, "gfx1170 iGPU")]);
    assert_eq!(
        planned(&context, &[]),
        ["rocm-rand-5.3.4-host.tar.zst", "rocrand_gfx1170.kpack"]
    );

    let context = machine(&[FakeNode::gpu(110504, 0, "gfx1154")]);
    let refused = context.run(&mut kpack_get(
        &context,
        None,
        &["install", "rocm-rand", "--dry-run"],
    ));
    insta::assert_snapshot!("no_device_code_for_gfx1154", refused);
}

#[test]
fn an_override_is_used_within_the_major_version_only_and_an_empty_one_is_unset() {
    // 11.0.0 on a gfx1103: the runtime runs it as gfx1100.
    let context = machine(&[FakeNode::gpu(110003, 0, "Radeon 780M")]);
    assert_eq!(
        planned(&context, &[("HSA_OVERRIDE_GFX_VERSION", "11.0.0")]),
        ["rocm-rand-5.3.4-host.tar.zst", "rocrand_gfx1100.kpack"]
    );

    // 10.3.0 on a gfx1100: refused, so gfx1100's code, not gfx1030's.
    let context = machine(&[FakeNode::gpu(110000, 0, "Radeon RX 7900 XTX")]);
    assert_eq!(
        planned(&context, &[("HSA_OVERRIDE_GFX_VERSION", "10.3.0")]),
        ["rocm-rand-5.3.4-host.tar.zst", "rocrand_gfx1100.kpack"]
    );
    let mut detect = kpack_get(&context, None, &["detect"]);
    detect.env("HSA_OVERRIDE_GFX_VERSION", "10.3.0");
    insta::assert_snapshot!(
        "override_across_the_major_version",
        context.run(&mut detect)
    );
    let mut detect = kpack_get(&context, None, &["--json", "detect"]);
    detect.env("HSA_OVERRIDE_GFX_VERSION", "10.3.0");
    let detected: serde_json::Value = serde_json::from_str(&success(&mut detect)).unwrap();
    assert_eq!(detected["gpus"][0]["target"], "gfx1100");
    assert_eq!(detected["gpus"][0].get("overridden"), None);
    assert_eq!(detected["warnings"].as_array().unwrap().len(), 1);

    // Set empty: unset, no warning.
    assert_eq!(
        planned(&context, &[("HSA_OVERRIDE_GFX_VERSION", "")]),
        ["rocm-rand-5.3.4-host.tar.zst", "rocrand_gfx1100.kpack"]
    );
    let mut detect = kpack_get(&context, None, &["--json", "detect"]);
    detect.env("HSA_OVERRIDE_GFX_VERSION", "");
    let detected: serde_json::Value = serde_json::from_str(&success(&mut detect)).unwrap();
    assert_eq!(detected["gpus"][0]["target"], "gfx1100");
    assert_eq!(detected["warnings"], serde_json::json!([]));
}

//! `kpack-pack deps`: the archives split binaries need at run time, on
//! Debian's rocRAND split into a tree: the files present, the runtime's
//! expansion per target, a target without an archive, JSON, a file that is
//! not split and an archive deleted.

use crate::common::*;

/// A context holding Debian's rocRAND package in `deb/` and its split into
/// `split/` (archives `split/.kpack/rocrand_<processor>.kpack`).
fn with_split_rocrand() -> TestContext {
    let context = TestContext::new();
    unpack_rocrand(&context.path().join("deb"));
    run(&mut context.kpack_pack(&["split", "deb", "-o", "split", "--group", "rocrand"]));
    context
}

/// The split library, relative to the context's directory.
const LIBRARY: &str = "split/usr/lib/x86_64-linux-gnu/librocrand.so.1.1";

#[test]
fn lists_the_archives_present_for_a_split_tree() {
    let context = with_split_rocrand();
    insta::assert_snapshot!(context.run(&mut context.kpack_pack(&["deps", "split"])));
    let help = run(&mut context.kpack_pack(&["--help"]));
    assert!(
        help.lines()
            .any(|line| line.trim_start().starts_with("deps ")),
        "{help}"
    );
}

#[test]
fn expands_a_target_as_the_runtimes_loader_does() {
    let context = with_split_rocrand();
    let mut deps = context.kpack_pack(&["deps", "split", "--target", "gfx90a:sramecc+:xnack-"]);
    insta::assert_snapshot!(context.run(&mut deps));
}

#[test]
fn a_target_without_an_archive_fails() {
    let context = with_split_rocrand();
    let mut deps = context.kpack_pack(&["deps", "split", "--target", "gfx1100"]);
    insta::assert_snapshot!(context.run(&mut deps));
}

#[test]
fn the_json_report_has_every_field() {
    let context = with_split_rocrand();
    let mut deps = context.kpack_pack(&[
        "deps",
        "split",
        "--json",
        "--target",
        "gfx90a:sramecc+:xnack-",
        "--target",
        "gfx1100",
    ]);
    let output = deps.output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["schema"], 1);
    assert_eq!(
        report["targets"],
        serde_json::json!(["gfx90a:sramecc+:xnack-", "gfx1100"])
    );
    let binaries = report["binaries"].as_array().unwrap();
    assert_eq!(binaries.len(), 1);
    let binary = &binaries[0];
    assert_eq!(binary["path"], LIBRARY);
    assert_eq!(binary["format"], "elf");
    assert_eq!(
        binary["kernel_name"],
        "usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
    );
    assert_eq!(binary["bundles"], serde_json::json!([0]));

    let archives = binary["archives"].as_array().unwrap();
    assert_eq!(archives.len(), 1);
    let pattern = &archives[0];
    let kpack = "split/usr/lib/x86_64-linux-gnu/../../../.kpack";
    assert_eq!(
        pattern["pattern"],
        "../../../.kpack/rocrand_@GFXARCH@.kpack"
    );
    assert_eq!(
        pattern["resolved"],
        format!("{kpack}/rocrand_@GFXARCH@.kpack")
    );
    assert_eq!(pattern["per_target"], true);
    let present: Vec<(&str, &str)> = pattern["present"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["path"].as_str().unwrap(), p["gfxarch"].as_str().unwrap()))
        .collect();
    let processors = ["gfx1030", "gfx803", "gfx900", "gfx906", "gfx908", "gfx90a"];
    let expected: Vec<String> = processors
        .iter()
        .map(|p| format!("{kpack}/rocrand_{p}.kpack"))
        .collect();
    assert_eq!(
        present,
        expected
            .iter()
            .map(String::as_str)
            .zip(processors)
            .collect::<Vec<_>>()
    );

    let expansions = pattern["expansions"].as_array().unwrap();
    assert_eq!(expansions.len(), 2);
    assert_eq!(expansions[0]["target"], "gfx90a:sramecc+:xnack-");
    let candidates: Vec<(&str, bool)> = expansions[0]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["path"].as_str().unwrap(), c["present"].as_bool().unwrap()))
        .collect();
    let gfx90a = |name: &str| format!("{kpack}/rocrand_{name}.kpack");
    assert_eq!(
        candidates,
        [
            (gfx90a("gfx90a:sramecc+:xnack-").as_str(), false),
            (gfx90a("gfx90a:sramecc+").as_str(), false),
            (gfx90a("gfx90a:xnack-").as_str(), false),
            (gfx90a("gfx90a").as_str(), true),
        ]
    );
    assert_eq!(expansions[1]["target"], "gfx1100");
    assert_eq!(
        expansions[1]["candidates"],
        serde_json::json!([{ "path": gfx90a("gfx1100"), "present": false }])
    );

    assert_eq!(
        binary["targets"],
        serde_json::json!([
            { "target": "gfx90a:sramecc+:xnack-", "present": true, "archive": gfx90a("gfx90a") },
            { "target": "gfx1100", "present": false, "archive": null },
        ])
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        format!("error: no archive present: {LIBRARY} for gfx1100\n")
    );
}

#[test]
fn a_file_that_is_not_split_is_refused_by_name() {
    let context = with_split_rocrand();
    // The fat library named on its own is an error...
    let fat = context
        .path()
        .join("deb/usr/lib/x86_64-linux-gnu/librocrand.so.1.1");
    let mut deps = context.kpack_pack(&["deps", "split"]);
    deps.arg(&fat);
    insta::assert_snapshot!("fat_file", context.run(&mut deps));
    let mut deps = context.kpack_pack(&["deps", "deb/usr/share/doc/librocrand1/copyright"]);
    insta::assert_snapshot!("plain_file", context.run(&mut deps));
    // ...and in a directory it is left out.
    let mut deps = context.kpack_pack(&["deps", "deb"]);
    insta::assert_snapshot!("fat_tree", context.run(&mut deps));
}

#[test]
fn an_archive_deleted_is_missing() {
    let context = with_split_rocrand();
    fs_err::remove_file(context.path().join("split/.kpack/rocrand_gfx90a.kpack")).unwrap();
    insta::assert_snapshot!(
        "present",
        context.run(&mut context.kpack_pack(&["deps", "split"]))
    );
    let mut deps = context.kpack_pack(&[
        "deps",
        "split",
        "--target",
        "gfx90a:sramecc+:xnack-",
        "--target",
        "gfx1030",
    ]);
    insta::assert_snapshot!("for_targets", context.run(&mut deps));
}

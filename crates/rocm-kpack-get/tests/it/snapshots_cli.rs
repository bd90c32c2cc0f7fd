//! What `kpack-get` prints, as snapshots, one a test: the plan of an
//! install (human and JSON), the install, list, verify, info, detect,
//! check (human and JSON) and an error, against the rocRAND repository
//! served over loopback, as a user gets them: the layout is `auto`, and
//! with no HIP runtime found it is `fat`. The server's address, the
//! temporary directories and times are masked.

use kpack_test_support::context::TestContext;

/// `kpack-get --target gfx1030 --no-progress ARGS` as a user runs it (the
/// layout left to `auto`), as a transcript.
fn run(context: &TestContext, args: &[&str]) -> String {
    let mut all = vec!["--target", "gfx1030", "--no-progress"];
    all.extend_from_slice(args);
    context.run(context.kpack_get(&all).env_remove("KPACK_GET_LAYOUT"))
}

/// A context with rocm-rand installed for gfx1030; the install's transcript.
fn installed() -> (TestContext, String) {
    let context = TestContext::new();
    let install = run(&context, &["install", "rocm-rand"]);
    (context, install)
}

#[test]
fn dry_run() {
    let context = TestContext::new();
    insta::assert_snapshot!(run(&context, &["install", "rocm-rand", "--dry-run"]));
}

#[test]
fn dry_run_json() {
    let context = TestContext::new();
    let args = ["--json", "install", "rocm-rand", "--dry-run"];
    insta::assert_snapshot!(run(&context, &args));
}

#[test]
fn install() {
    insta::assert_snapshot!(installed().1);
}

#[test]
fn list() {
    let (context, _) = installed();
    insta::assert_snapshot!(run(&context, &["list"]));
}

#[test]
fn verify() {
    let (context, _) = installed();
    insta::assert_snapshot!(run(&context, &["verify"]));
}

#[test]
fn info() {
    let context = TestContext::new();
    insta::assert_snapshot!(run(&context, &["info", "rocm-rand"]));
}

#[test]
fn detect() {
    let context = TestContext::new();
    insta::assert_snapshot!(run(&context, &["detect"]));
}

#[test]
fn unknown_package() {
    let context = TestContext::new();
    insta::assert_snapshot!(run(&context, &["install", "rocm-nothing"]));
}

/// Installed for gfx1030, checked for it and an MI210 beside it: one GPU
/// served, the other not, and the command that adds it.
#[test]
fn check() {
    let (context, _) = installed();
    let args = ["--target", "gfx90a:sramecc+:xnack-", "check"];
    insta::assert_snapshot!(run(&context, &args));
}

#[test]
fn check_json() {
    let (context, _) = installed();
    let args = ["--target", "gfx90a:sramecc+:xnack-", "--json", "check"];
    insta::assert_snapshot!(run(&context, &args));
}

//! What `kpack-get` prints, as snapshots: the plan of an install (human and
//! JSON), the install, list, verify, info and detect, and an error, against
//! the rocRAND repository served over loopback, as a user gets them: the
//! layout is `auto`, and with no HIP runtime found it is `fat`. The
//! server's address, the temporary directories and times are masked.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::server::TestServer;
use common::{output, shared_rocrand_repo, Env};
use kpack_test_support::transcript;

#[test]
fn install_list_verify_info_and_detect_for_gfx1030() {
    let repo = shared_rocrand_repo();
    let server = TestServer::start(&repo.dir);
    let env = Env::new();
    let url = server.url();
    let home = env.home.path().display().to_string();
    let key = repo.public_key.display().to_string();
    let masks = [
        (url.as_str(), "<URL>"),
        (home.as_str(), "<HOME>"),
        (key.as_str(), "<KEY>"),
    ];
    let run = |args: &[&str]| {
        let mut all = vec!["--target", "gfx1030", "--no-progress"];
        all.extend_from_slice(args);
        let mut command = env.with_repo(&url, &repo.public_key, &all);
        transcript(&output(command.env_remove("KPACK_GET_LAYOUT")), &masks)
    };
    insta::assert_snapshot!("dry_run", run(&["install", "rocm-rand", "--dry-run"]));
    insta::assert_snapshot!(
        "dry_run_json",
        run(&["--json", "install", "rocm-rand", "--dry-run"])
    );
    // Downloads run at once: the order of their lines is not part of it.
    insta::assert_snapshot!("install", sorted_downloads(&run(&["install", "rocm-rand"])));
    insta::assert_snapshot!("list", run(&["list"]));
    insta::assert_snapshot!("verify", run(&["verify"]));
    insta::assert_snapshot!("info", run(&["info", "rocm-rand"]));
    insta::assert_snapshot!("detect", run(&["detect"]));
    insta::assert_snapshot!("unknown_package", run(&["install", "rocm-nothing"]));
}

/// The transcript with its `downloaded ...` lines in sorted order.
fn sorted_downloads(text: &str) -> String {
    let mut downloads: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("downloaded "))
        .collect();
    downloads.sort_unstable();
    let mut sorted = downloads.into_iter();
    text.lines()
        .map(|line| {
            if line.starts_with("downloaded ") {
                sorted.next().unwrap_or(line)
            } else {
                line
            }
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

//! What `kpack-repo` prints, as snapshots: keygen, build of the rocRAND
//! manifest, verify, mirror, and errors. The commands run in a temporary
//! directory with relative paths; times are masked.

use std::path::Path;
use std::process::{Command, Output};

use fs_err as fs;
use kpack_test_support::transcript;

fn kpack_repo(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kpack-repo"))
        .args(args)
        .current_dir(dir)
        .env_remove("KPACK_REPO_PASSWORD")
        .output()
        .unwrap()
}

#[test]
fn build_verify_and_mirror_of_rocrand() {
    let work = tempfile::tempdir().unwrap();
    let manifest = kpack_test_support::workspace().join("manifests/rocm-rand.toml");
    let sources = kpack_test_support::fixtures().join("debian");
    let keygen = kpack_repo(work.path(), &["keygen", "key", "--unencrypted"]);
    insta::assert_snapshot!("keygen", transcript(&keygen, &[]));

    let build = kpack_repo(
        work.path(),
        &[
            "build",
            "repo",
            manifest.to_str().unwrap(),
            "--sources",
            sources.to_str().unwrap(),
            "--key",
            "key.key",
        ],
    );
    insta::assert_snapshot!("build", transcript(&build, &[]));
    let verify = kpack_repo(work.path(), &["verify", "repo", "--pubkey", "key.pub"]);
    insta::assert_snapshot!("verify", transcript(&verify, &[]));
    let mirror = kpack_repo(
        work.path(),
        &[
            "mirror",
            "repo",
            "mirror",
            "--pubkey",
            "key.pub",
            "--targets",
            "gfx1030",
        ],
    );
    insta::assert_snapshot!("mirror", transcript(&mirror, &[]));
    let partial = kpack_repo(
        work.path(),
        &["verify", "mirror", "--pubkey", "key.pub", "--partial"],
    );
    insta::assert_snapshot!("verify_partial", transcript(&partial, &[]));
}

#[test]
fn errors_say_what_and_where() {
    let work = tempfile::tempdir().unwrap();
    kpack_repo(work.path(), &["keygen", "key", "--unencrypted"]);
    let missing = kpack_repo(work.path(), &["verify", "nowhere", "--pubkey", "key.pub"]);
    insta::assert_snapshot!("verify_missing", transcript(&missing, &[]));
    fs::write(
        work.path().join("bad.key"),
        "untrusted comment: x\nnot a key\n",
    )
    .unwrap();
    let bad_key = kpack_repo(work.path(), &["sign", "repo", "--key", "bad.key"]);
    insta::assert_snapshot!("sign_bad_key", transcript(&bad_key, &[]));
}

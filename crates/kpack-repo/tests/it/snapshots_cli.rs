//! What `kpack-repo` prints, as snapshots: keygen, build of the rocRAND
//! manifest, verify, mirror, and errors. The commands run in a temporary
//! directory with relative paths; times are masked.

use crate::common::TestContext;
use fs_err as fs;

/// The transcript of `kpack-repo ARGS` in the context's directory.
fn kpack_repo(context: &TestContext, args: &[&str]) -> String {
    context.transcript(&mut context.kpack_repo(args), &[])
}

#[test]
fn build_verify_and_mirror_of_rocrand() {
    let context = TestContext::new();
    let manifest = kpack_test_support::workspace().join("manifests/rocm-rand.toml");
    let sources = kpack_test_support::fixtures().join("debian");
    let keygen = kpack_repo(&context, &["keygen", "key", "--unencrypted"]);
    // The public key printed is the one written, masked for the snapshot.
    let public = kpack_sign::PublicKey::load(&context.dir.path().join("key.pub").to_string_lossy())
        .unwrap()
        .to_base64();
    assert!(
        keygen.contains(&format!("public key: {public} (")),
        "{keygen}"
    );
    insta::assert_snapshot!("keygen", keygen.replace(&public, "<PUBLIC KEY>"));

    let build = kpack_repo(
        &context,
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
    insta::assert_snapshot!("build", build);
    let verify = kpack_repo(&context, &["verify", "repo", "--pubkey", "key.pub"]);
    insta::assert_snapshot!("verify", verify);
    let mirror = kpack_repo(
        &context,
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
    insta::assert_snapshot!("mirror", mirror);
    let partial = kpack_repo(
        &context,
        &["verify", "mirror", "--pubkey", "key.pub", "--partial"],
    );
    insta::assert_snapshot!("verify_partial", partial);

    // The same reports as JSON, with their schema; quiet says nothing.
    let verify = kpack_repo(
        &context,
        &["verify", "repo", "--pubkey", "key.pub", "--json"],
    );
    insta::assert_snapshot!("verify_json", verify);
    let quiet = kpack_repo(&context, &["verify", "-q", "repo", "--pubkey", "key.pub"]);
    insta::assert_snapshot!("verify_quiet", quiet);
    let again = kpack_repo(
        &context,
        &[
            "build",
            "repo",
            manifest.to_str().unwrap(),
            "--sources",
            sources.to_str().unwrap(),
            "--key",
            "key.key",
            "--json",
        ],
    );
    insta::assert_snapshot!("build_again_json", again);
    let mirror = kpack_repo(
        &context,
        &[
            "mirror",
            "repo",
            "json-mirror",
            "--pubkey",
            "key.pub",
            "--target",
            "gfx1030",
            "--json",
        ],
    );
    insta::assert_snapshot!("mirror_json", mirror);
}

#[test]
fn s3_options_are_offered_only_where_a_repository_is_written() {
    let context = TestContext::new();
    let verify = kpack_repo(&context, &["verify", "--help"]);
    assert!(!verify.contains("--endpoint"), "{verify}");
    insta::assert_snapshot!("help_verify", verify);
    let add = kpack_repo(&context, &["add", "--help"]);
    assert!(
        add.contains("S3 options:") && add.contains("--endpoint"),
        "{add}"
    );
    insta::assert_snapshot!("help_add", add);
    let top = kpack_repo(&context, &["--help"]);
    assert!(!top.contains("--endpoint"), "{top}");
    insta::assert_snapshot!("help", top);
}

#[test]
fn errors_say_what_and_where() {
    let context = TestContext::new();
    kpack_repo(&context, &["keygen", "key", "--unencrypted"]);
    let missing = kpack_repo(&context, &["verify", "nowhere", "--pubkey", "key.pub"]);
    insta::assert_snapshot!("verify_missing", missing);
    fs::write(
        context.dir.path().join("bad.key"),
        "untrusted comment: x\nnot a key\n",
    )
    .unwrap();
    let bad_key = kpack_repo(&context, &["sign", "repo", "--key", "bad.key"]);
    insta::assert_snapshot!("sign_bad_key", bad_key);
}

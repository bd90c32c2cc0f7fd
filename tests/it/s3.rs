//! rocm-rand published to an S3-compatible bucket (moto on loopback) and
//! installed by `kpack-get` from the bucket's plain HTTP URL, as a CDN in
//! front of it would serve it: only the GPU's files are fetched, and the
//! installed library's code object loads.

use std::process::Command;

use kpack_test_support::chain::{
    kpack_repo_exe, load_installed, pool, success, Env, ENCODED_ARCHIVE, HOST_TREE,
};
use kpack_test_support::s3::S3Server;
use kpack_test_support::{fixtures, run, workspace};

#[test]
fn kpack_get_installs_from_a_buckets_http_url() {
    let server = S3Server::start();
    server.create_bucket("rocm-packages");
    let keys = tempfile::tempdir().unwrap();
    run(Command::new(kpack_repo_exe())
        .args(["keygen", "key", "--unencrypted"])
        .current_dir(keys.path()));
    run(server
        .env(&mut Command::new(kpack_repo_exe()))
        .args(["build", "s3://rocm-packages/stable"])
        .arg(workspace().join("manifests/rocm-rand.toml"))
        .arg("--sources")
        .arg(fixtures().join("debian"))
        .arg("--key")
        .arg(keys.path().join("key.key")));

    let env = Env::new();
    let url = server.http_url("rocm-packages", "stable");
    let stdout = success(&mut env.with_repo(
        &url,
        &keys.path().join("key.pub"),
        &["--target", "gfx90a:sramecc+:xnack-", "install", "rocm-rand"],
    ));
    assert!(stdout.contains("installed rocm-rand 5.3.3"), "{stdout}");
    // Downloads run side by side, so in either order.
    let mut pool_gets = server.gets("/rocm-packages/stable/pool/");
    pool_gets.sort();
    let mut expected: Vec<String> = [pool(HOST_TREE), pool(ENCODED_ARCHIVE)]
        .iter()
        .map(|path| format!("/rocm-packages/stable/{path}"))
        .collect();
    expected.sort();
    assert_eq!(pool_gets, expected);
    let code = load_installed(
        &env.prefix.join("lib/librocrand.so.1.1"),
        "gfx90a:sramecc+:xnack-",
    );
    assert!(code.starts_with(b"\x7fELF"), "a code object");
}

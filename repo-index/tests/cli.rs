//! `kpack-repo` as an operator runs it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Command;

use common::{archive, host_tree};

fn kpack_repo() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kpack-repo"));
    command.env_remove("KPACK_REPO_PASSWORD");
    command
}

fn run(command: &mut Command) -> String {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn keygen_add_verify_sign_and_index() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("repo");
    run(kpack_repo().arg("keygen").arg(&key).arg("--unencrypted"));
    let repo = dir.path().join("rocm");
    let inputs = dir.path().join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    let added = run(kpack_repo()
        .arg("add")
        .arg(&repo)
        .args(["rocm-rand", "5.3.3"])
        .arg(host_tree(&inputs))
        .arg(archive(&inputs, "gfx90a", &["gfx90a:xnack-"]))
        .args(["--depends", "rocm-core >=5.3, <6", "--summary", "rocRAND"])
        .arg("--key")
        .arg(key.with_extension("key")));
    assert!(
        added.contains("published rocm-rand 5.3.3")
            && added.contains("repo rocm version 1, signed"),
        "{added}"
    );

    let verified = run(kpack_repo()
        .arg("verify")
        .arg(&repo)
        .arg("--pubkey")
        .arg(key.with_extension("pub")));
    assert!(
        verified.contains("rocm version 1")
            && verified.contains("1 packages, 1 versions, 2 artifacts"),
        "{verified}"
    );

    // Unsigned index, then signed: verify needs the signature.
    run(kpack_repo().arg("index").arg(&repo));
    let unsigned = kpack_repo()
        .arg("verify")
        .arg(&repo)
        .arg("--pubkey")
        .arg(key.with_extension("pub"))
        .output()
        .unwrap();
    assert_eq!(unsigned.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unsigned.stderr).contains("index.toml.minisig"));
    run(kpack_repo()
        .arg("sign")
        .arg(&repo)
        .arg("--key")
        .arg(key.with_extension("key")));
    let verified = run(kpack_repo()
        .arg("verify")
        .arg(&repo)
        .arg("--pubkey")
        .arg(key.with_extension("pub")));
    assert!(verified.contains("rocm version 2"), "{verified}");
}

#[test]
fn a_password_protected_key_needs_its_password() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("repo");
    let refused = kpack_repo().arg("keygen").arg(&key).output().unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("KPACK_REPO_PASSWORD"));
    run(kpack_repo()
        .arg("keygen")
        .arg(&key)
        .env("KPACK_REPO_PASSWORD", "hunter2"));
    let locked = kpack_repo()
        .arg("sign")
        .arg(dir.path())
        .arg("--key")
        .arg(key.with_extension("key"))
        .output()
        .unwrap();
    assert_eq!(locked.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&locked.stderr).contains("repo.key"),
        "{}",
        String::from_utf8_lossy(&locked.stderr)
    );
}

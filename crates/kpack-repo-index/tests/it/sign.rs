//! Root index signatures, with the stock minisign tool on the other side.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use fs_err as fs;
use kpack_repo_index::sign::{root_comment, sign_root, verify_root, SignError};
use kpack_repo_index::RootIndex;
use kpack_sign::{keygen, PublicKey, SecretKey};

const ROOT: &str = r#"format = 1

[repo]
name = "rocm"
version = 42
generated = 2026-11-21T10:00:00Z
expires = 2026-12-21T10:00:00Z
"#;

/// Runs the stock `minisign` tool in `dir` with `stdin`, which must
/// succeed; its stdout.
fn minisign(args: &[&str], dir: &Path, stdin: &[u8]) -> String {
    let mut child = kpack_test_support::tool("minisign")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the minisign tool (Debian package minisign)");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "minisign {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn our_signatures_verify_with_the_stock_tool_and_catch_tampering() {
    let dir = tempfile::tempdir().unwrap();
    let (secret, public) = (dir.path().join("repo.key"), dir.path().join("repo.pub"));
    let public_key = keygen(&secret, &public, None).unwrap();
    let key = SecretKey::load(&secret, None).unwrap();
    fs::write(dir.path().join("index.toml"), ROOT).unwrap();
    let signature = sign_root(&key, ROOT.as_bytes()).unwrap();
    fs::write(dir.path().join("index.toml.minisig"), &signature).unwrap();

    let root = verify_root(&public_key, "index.toml", ROOT.as_bytes(), &signature).unwrap();
    assert_eq!(root.repo.version, 42);

    let stdout = minisign(&["-Vm", "index.toml", "-p", "repo.pub"], dir.path(), b"");
    assert!(
        stdout.contains("repo:rocm version:42 expires:2026-12-21T10:00:00Z"),
        "{stdout}"
    );

    // A flipped byte.
    let tampered = ROOT.replace("version = 42", "version = 43");
    assert!(matches!(
        verify_root(&public_key, "index.toml", tampered.as_bytes(), &signature),
        Err(SignError::BadSignature { .. })
    ));
    // Another key.
    let other = keygen(
        &dir.path().join("other.key"),
        &dir.path().join("other.pub"),
        None,
    )
    .unwrap();
    let error = verify_root(&other, "index.toml", ROOT.as_bytes(), &signature).unwrap_err();
    assert!(
        error.to_string().starts_with("index.toml: bad signature"),
        "{error}"
    );
    // A signature whose comment describes another root.
    let moved = key
        .sign(
            "index.toml",
            ROOT.as_bytes(),
            "repo:rocm version:41 expires:2026-12-21T10:00:00Z",
        )
        .unwrap();
    assert!(matches!(
        verify_root(&public_key, "index.toml", ROOT.as_bytes(), &moved),
        Err(SignError::CommentMismatch { .. })
    ));
    // Keys are never overwritten.
    assert!(keygen(&secret, &public, None).is_err());
}

#[test]
fn stock_keys_and_signatures_work_here_and_our_encrypted_keys_there() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("index.toml"), ROOT).unwrap();
    let comment = root_comment(&RootIndex::parse("index.toml", ROOT).unwrap());

    // A key pair and a signature made by the stock tool.
    minisign(
        &["-G", "-f", "-p", "stock.pub", "-s", "stock.key"],
        dir.path(),
        b"pw\npw\n",
    );
    minisign(
        &["-S", "-s", "stock.key", "-m", "index.toml", "-t", &comment],
        dir.path(),
        b"pw\n",
    );
    let signature = fs::read_to_string(dir.path().join("index.toml.minisig")).unwrap();
    let public = PublicKey::load(dir.path().join("stock.pub").to_str().unwrap()).unwrap();
    verify_root(&public, "index.toml", ROOT.as_bytes(), &signature).unwrap();
    // The stock secret key signs here too.
    let key = SecretKey::load(&dir.path().join("stock.key"), Some("pw".into())).unwrap();
    verify_root(
        &public,
        "index.toml",
        ROOT.as_bytes(),
        &sign_root(&key, ROOT.as_bytes()).unwrap(),
    )
    .unwrap();

    // Our password-protected key signs with the stock tool.
    let ours = keygen(
        &dir.path().join("ours.key"),
        &dir.path().join("ours.pub"),
        Some("secret".into()),
    )
    .unwrap();
    fs::remove_file(dir.path().join("index.toml.minisig")).unwrap();
    minisign(
        &["-S", "-s", "ours.key", "-m", "index.toml", "-t", &comment],
        dir.path(),
        b"secret\n",
    );
    let signature = fs::read_to_string(dir.path().join("index.toml.minisig")).unwrap();
    verify_root(&ours, "index.toml", ROOT.as_bytes(), &signature).unwrap();
    assert!(SecretKey::load(&dir.path().join("ours.key"), Some("wrong".into())).is_err());
}

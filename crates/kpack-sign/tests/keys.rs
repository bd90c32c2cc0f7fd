//! Secret keys from the stock `minisign` tool and from the minisign crate
//! load; corrupted ones are refused, naming what is wrong.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use ct_codecs::{Base64, Decoder, Encoder};
use fs_err as fs;
use kpack_sign::{KeyProblem, SecretKey};
use kpack_test_support::tool;

/// A key pair made by the stock tool: `-W` for an unencrypted secret key,
/// else protected by `password`.
fn stock_keypair(dir: &Path, password: Option<&str>) -> (PathBuf, PathBuf) {
    let (public, secret) = (dir.join("stock.pub"), dir.join("stock.key"));
    let mut command = tool("minisign");
    command
        .args(["-G", "-f", "-p"])
        .arg(&public)
        .arg("-s")
        .arg(&secret);
    if password.is_none() {
        command.arg("-W");
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    if let Some(password) = password {
        writeln!(child.stdin.as_mut().unwrap(), "{password}\n{password}").unwrap();
    }
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    (public, secret)
}

/// Flips one bit of the decoded key line at `offset`.
fn flip_key_byte(secret: &Path, offset: usize) {
    let text = fs::read_to_string(secret).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut bytes = Base64::decode_to_vec(&lines[1], None).unwrap();
    bytes[offset] ^= 1;
    lines[1] = Base64::encode_to_string(&bytes).unwrap();
    fs::write(secret, lines.join("\n") + "\n").unwrap();
}

/// Offsets in the decoded key: the key id, the seed, the public half.
const KEY_ID: usize = 54;
const SEED: usize = 62;
const PUBLIC_HALF: usize = 94;

#[test]
fn a_stock_unencrypted_key_signs_what_the_stock_tool_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let (public, secret) = stock_keypair(dir.path(), None);
    let key = SecretKey::load(&secret, None).unwrap();
    // A password is ignored for a key that has none.
    SecretKey::load(&secret, Some("unused".into())).unwrap();

    let data = dir.path().join("data");
    fs::write(&data, b"published bytes").unwrap();
    key.sign_file(&data, "file:data").unwrap();
    let verified = tool("minisign")
        .arg("-Vm")
        .arg(&data)
        .arg("-p")
        .arg(&public)
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );
}

#[test]
fn a_stock_unencrypted_key_with_a_damaged_half_is_refused() {
    for offset in [SEED, PUBLIC_HALF] {
        let dir = tempfile::tempdir().unwrap();
        let (public, secret) = stock_keypair(dir.path(), None);
        fs::remove_file(public).unwrap();
        flip_key_byte(&secret, offset);
        let error = SecretKey::load(&secret, None).unwrap_err();
        assert!(
            matches!(error.problem, KeyProblem::Mismatched),
            "offset {offset}: {error}"
        );
        assert_eq!(error.path, secret);
    }
}

#[test]
fn a_key_id_that_differs_from_the_public_key_beside_it_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (public, secret) = stock_keypair(dir.path(), None);
    flip_key_byte(&secret, KEY_ID);
    let error = SecretKey::load(&secret, None).unwrap_err();
    assert!(
        matches!(&error.problem, KeyProblem::NotThePublicKey(path) if *path == public),
        "{error}"
    );
    assert!(error.to_string().contains("stock.pub"), "{error}");
}

#[test]
fn a_stock_encrypted_key_needs_its_password() {
    let dir = tempfile::tempdir().unwrap();
    let (_, secret) = stock_keypair(dir.path(), Some("correct horse"));
    let error = SecretKey::load(&secret, None).unwrap_err();
    assert!(
        matches!(error.problem, KeyProblem::NeedsPassword),
        "{error}"
    );
    let error = SecretKey::load(&secret, Some("wrong".into())).unwrap_err();
    assert!(matches!(error.problem, KeyProblem::Minisign(_)), "{error}");
    SecretKey::load(&secret, Some("correct horse".into())).unwrap();
}

#[test]
fn a_checksummed_unencrypted_key_loads_and_a_wrong_checksum_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("crate.key");
    let pair = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
    fs::write(&secret, pair.sk.to_box(None).unwrap().to_string()).unwrap();
    SecretKey::load(&secret, None).unwrap();

    // Checksum set but wrong: not the stock tool's layout, so corrupted.
    flip_key_byte(&secret, 158 - 1);
    let error = SecretKey::load(&secret, None).unwrap_err();
    assert!(matches!(error.problem, KeyProblem::Minisign(_)), "{error}");
}

#[test]
fn garbage_is_not_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("garbage.key");
    fs::write(&secret, "untrusted comment: x\nnot base64 at all!\n").unwrap();
    let error = SecretKey::load(&secret, None).unwrap_err();
    assert!(matches!(error.problem, KeyProblem::Malformed(_)), "{error}");
    let error = SecretKey::load(&dir.path().join("missing.key"), None).unwrap_err();
    assert!(matches!(error.problem, KeyProblem::Read(_)), "{error}");
    // The cause names the file, the message does not repeat it.
    let cause = std::error::Error::source(&error).unwrap().to_string();
    assert!(
        cause.contains("missing.key") && !error.to_string().contains("missing.key"),
        "{error}: {cause}"
    );
}

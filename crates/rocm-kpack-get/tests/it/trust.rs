//! The client-side protections of 04-repo-index.md against repositories
//! published with the real `kpack-repo`: an older root than one already
//! seen is a rollback, a root past its expiry is a frozen mirror, a root
//! signed by another key is not the repository's, a shard that does not
//! match its pin is discarded; each refusal exits 5, and the two override
//! flags accept loudly. A root and signature read between the two renames
//! of a publish are fetched again once.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::server::{Fault, TestServer};
use crate::common::{copy_dir, describe, kpack_repo_exe, output, stderr, success, Env};
use kpack_repo_index::sign::sign_root;
use kpack_repo_index::{RootIndex, Timestamp};
use kpack_sign::SecretKey;
use kpack_test_support::context::TestContext;

const TARGET: &str = "gfx90a:sramecc+:xnack-";

/// `kpack-repo index` of the context's repository: regenerates and
/// republishes, bumping the version.
fn reindex(private: &TestContext) {
    kpack_test_support::run(
        Command::new(kpack_repo_exe())
            .arg("index")
            .arg(&private.repo.dir)
            .arg("--key")
            .arg(&private.repo.secret_key),
    );
}

/// A copy of the context's repository as it is now.
fn copy_named(private: &TestContext, name: &str) -> PathBuf {
    let copy = private.home().join(name);
    copy_dir(&private.repo.dir, &copy);
    copy
}

/// The context's repository's root.
fn root(private: &TestContext) -> RootIndex {
    root_at(&private.repo.dir.join("index.toml"))
}

fn root_at(path: &Path) -> RootIndex {
    RootIndex::parse("index.toml", &fs_err::read_to_string(path).unwrap()).unwrap()
}

/// The root the client keeps for the repository `rocm`, if any.
fn stored_version(env: &Env) -> Option<u64> {
    let path = env.state.join("repos/rocm/index.toml");
    path.exists().then(|| root_at(&path).repo.version)
}

/// The highest version the client remembers for the configured repository
/// `config`.
fn remembered_version(env: &Env, config: &str) -> Option<u64> {
    let text = fs_err::read_to_string(env.state.join("versions.toml")).ok()?;
    let table: toml::Table = toml::from_str(&text).unwrap();
    let entry = table
        .get("repo")?
        .as_array()?
        .iter()
        .find(|entry| entry.get("config").and_then(|c| c.as_str()) == Some(config))?;
    Some(entry.get("version")?.as_integer().unwrap() as u64)
}

fn assert_refused(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(5), "{}", describe(out));
    let stderr = stderr(out);
    assert!(stderr.lines().any(|l| l.starts_with("error:")), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

fn assert_nothing_installed(env: &Env) {
    assert!(!env.prefix.join("lib").exists());
    assert!(!env.prefix.join(".kpack/installed.toml").exists());
}

/// A configuration with one mirror whose stored root is always too old,
/// so every command fetches the root again.
fn configure_always_update(env: &Env, mirror: &str, key: &Path) {
    env.configure(&[mirror.to_owned()], key);
    let path = env.home.path().join("config/kpack-get/config.toml");
    let text = fs_err::read_to_string(&path).unwrap();
    fs_err::write(&path, format!("max-index-age = 0\n{text}")).unwrap();
}

#[test]
fn an_older_root_than_one_seen_is_a_rollback_refused_unless_allowed() {
    let private = TestContext::own_key();
    let older = copy_named(&private, "older").display().to_string();
    reindex(&private);
    let newer = root(&private).repo.version;
    let old = root_at(&Path::new(&older).join("index.toml")).repo.version;
    assert!(old < newer, "{old} {newer}");

    let env = &private.env;
    let updated = private.run(&mut env.with_repo(
        &private.repo_path(),
        &private.repo.public_key,
        &["update"],
    ));
    insta::assert_snapshot!("newer_seen", updated);
    assert_eq!(remembered_version(env, "rocm"), Some(newer));
    // Emptying the download cache does not forget it.
    success(env.command().args(["cache", "clean"]));

    // A mirror still offering the older root: refused, naming both.
    let out = output(&mut env.with_repo(&older, &private.repo.public_key, &["update"]));
    insta::assert_snapshot!("rollback_refused", private.transcript(&out));
    assert_eq!(stored_version(env), Some(newer));

    // install fetching the root again refuses it too, and installs nothing.
    configure_always_update(env, &older, &private.repo.public_key);
    let out = output(
        env.command()
            .args(["--target", TARGET, "install", "rocm-rand"]),
    );
    assert_refused(&out);
    assert_nothing_installed(env);
    assert_eq!(stored_version(env), Some(newer));

    // Allowed explicitly: accepted, loudly, and the highest version seen
    // stays, so the next run without the flag refuses again.
    let out = output(&mut env.with_repo(
        &older,
        &private.repo.public_key,
        &["--allow-rollback", "update"],
    ));
    insta::assert_snapshot!("rollback_allowed", private.transcript(&out));
    assert_eq!(stored_version(env), Some(old));
    assert_eq!(remembered_version(env, "rocm"), Some(newer));
    let out = output(&mut env.with_repo(&older, &private.repo.public_key, &["update"]));
    assert_refused(&out);
}

#[test]
fn a_stale_mirror_is_passed_over_for_one_with_the_newer_root() {
    let private = TestContext::own_key();
    let older = copy_named(&private, "older").display().to_string();
    reindex(&private);
    let newer = root(&private).repo.version;
    let env = &private.env;
    success(&mut env.with_repo(&private.repo_path(), &private.repo.public_key, &["update"]));

    env.configure(
        &[older.clone(), private.repo_path()],
        &private.repo.public_key,
    );
    let out = output(env.command().arg("update"));
    insta::assert_snapshot!("stale_mirror_passed_over", private.transcript(&out));
    assert_eq!(stored_version(env), Some(newer));
}

/// Rewrites the repository's root to have expired a day ago, signed with
/// the repository's key as a publish would.
fn expire_root(private: &TestContext) -> Timestamp {
    let mut root = root(private);
    let now = Timestamp::now().as_second();
    root.repo.version += 1;
    root.repo.generated = Timestamp::from_second(now - 31 * 86_400).unwrap();
    root.repo.expires = Timestamp::from_second(now - 86_400).unwrap();
    let text = root.to_toml().unwrap();
    let key = SecretKey::load(&private.repo.secret_key, None).unwrap();
    let signature = sign_root(&key, text.as_bytes()).unwrap();
    let dir = &private.repo.dir;
    kpack_fs::write_atomic(&dir.join("index.toml.minisig"), signature.as_bytes()).unwrap();
    kpack_fs::write_atomic(&dir.join("index.toml"), text.as_bytes()).unwrap();
    root.repo.expires
}

#[test]
fn an_expired_root_is_refused_unless_allowed() {
    let private = TestContext::own_key();
    let expires = expire_root(&private);
    let env = &private.env;

    let out =
        output(&mut env.with_repo(&private.repo_path(), &private.repo.public_key, &["update"]));
    // The time is masked: that it names when the root expired is checked
    // here.
    assert!(
        stderr(&out).contains(&expires.to_string()),
        "{}",
        describe(&out)
    );
    insta::assert_snapshot!("expired_refused", private.transcript(&out));
    assert_eq!(stored_version(env), None);

    let install = |extra: &[&str]| {
        let mut args = vec!["--target", TARGET];
        args.extend(extra);
        args.extend(["install", "rocm-rand"]);
        output(&mut env.with_repo(&private.repo_path(), &private.repo.public_key, &args))
    };
    assert_refused(&install(&[]));
    assert_nothing_installed(env);

    let out = install(&["--allow-expired"]);
    insta::assert_snapshot!("expired_allowed", private.transcript(&out));
    assert!(env.prefix.join("lib/librocrand.so.1.1").is_file());
    success(env.command().arg("verify"));

    // The stored root is still expired: without the flag it is refused.
    let out = output(&mut env.with_repo(
        &private.repo_path(),
        &private.repo.public_key,
        &["info", "rocm-rand"],
    ));
    assert_refused(&out);
}

#[test]
fn a_root_signed_by_another_key_is_refused_with_a_hint_about_the_key() {
    let private = TestContext::own_key();
    kpack_test_support::run(
        Command::new(kpack_repo_exe())
            .args(["keygen", "intruder", "--unencrypted"])
            .current_dir(private.home()),
    );
    kpack_test_support::run(
        Command::new(kpack_repo_exe())
            .arg("sign")
            .arg(&private.repo.dir)
            .arg("--key")
            .arg(private.home().join("intruder.key")),
    );
    let server = &private.server;
    let env = &private.env;
    let out = output(&mut env.with_repo(&server.url(), &private.repo.public_key, &["update"]));
    insta::assert_snapshot!("another_key_refused", private.transcript(&out));
    assert_eq!(stored_version(env), None);
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.path.starts_with("packages/")),
        "nothing else is read from an unverified root: {:?}",
        server.requests()
    );

    // The same with the key that signed it works: the refusal was the key.
    let intruder = private.home().join("intruder.pub");
    success(&mut env.with_repo(&server.url(), &intruder, &["update"]));
}

/// The GETs of exactly `path`.
fn gets_of(server: &TestServer, path: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == path)
        .count()
}

/// A repository whose root is at version N+1 while serving the root of
/// version N: what a reader sees between the two renames of a publish
/// (signature first, then root). Returns the root of version N+1.
fn half_published(private: &TestContext) -> Vec<u8> {
    let index = private.repo.dir.join("index.toml");
    let before = fs_err::read(&index).unwrap();
    reindex(private);
    let after = fs_err::read(&index).unwrap();
    fs_err::write(&index, &before).unwrap();
    after
}

#[test]
fn a_root_and_signature_out_of_step_are_fetched_again_once() {
    let private = TestContext::own_key();
    let newer = half_published(&private);
    let version = RootIndex::parse("index.toml", std::str::from_utf8(&newer).unwrap())
        .unwrap()
        .repo
        .version;
    let server = &private.server;
    // Hold the first signature's body until the publish has completed.
    server.fault(
        "index.toml.minisig",
        Fault::Stall {
            stall: Duration::from_secs(2),
        },
    );
    let env = &private.env;
    let child = env
        .with_repo(&server.url(), &private.repo.public_key, &["update"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while gets_of(server, "index.toml.minisig") == 0 {
        assert!(Instant::now() < deadline, "{:?}", server.requests());
        std::thread::sleep(Duration::from_millis(5));
    }
    kpack_fs::write_atomic(&private.repo.dir.join("index.toml"), &newer).unwrap();
    server.clear_faults();
    let out = child.wait_with_output().unwrap();
    insta::assert_snapshot!(private.transcript(&out));
    assert_eq!(gets_of(server, "index.toml"), 2);
    assert_eq!(gets_of(server, "index.toml.minisig"), 2);
    assert_eq!(stored_version(env), Some(version));
}

#[test]
fn a_root_and_signature_that_stay_out_of_step_are_refused_after_one_more_fetch() {
    let private = TestContext::own_key();
    half_published(&private);
    // No immutable copies of the roots to fall back on.
    fs_err::remove_dir_all(private.repo.dir.join("roots")).unwrap();
    let server = &private.server;
    let env = &private.env;
    let out = output(&mut env.with_repo(&server.url(), &private.repo.public_key, &["update"]));
    assert_refused(&out);
    assert_eq!(gets_of(server, "index.toml"), 2);
    assert_eq!(gets_of(server, "index.toml.minisig"), 2);
    assert_eq!(stored_version(env), None);
}

/// A publisher stopped between the root and its signature: the root
/// verifies with the signature of its immutable copy, `roots/<version>`.
#[test]
fn a_root_whose_signature_stays_out_of_step_verifies_through_its_copy() {
    let private = TestContext::own_key();
    let before = root(&private).repo.version;
    half_published(&private);
    let server = &private.server;
    let env = &private.env;
    let out = output(&mut env.with_repo(&server.url(), &private.repo.public_key, &["update"]));
    assert!(out.status.success(), "{}", describe(&out));
    let copy = format!("roots/{before}.toml.minisig");
    assert_eq!(gets_of(server, &copy), 1);
    assert_eq!(stored_version(env), Some(before));
}

/// Changes the repository's shard of rocm-rand (same name, other bytes);
/// returns its path inside the repository.
fn tamper_shard(repo: &Path) -> String {
    let dir = repo.join("packages/rocm-rand");
    let entries: Vec<_> = fs_err::read_dir(&dir).unwrap().collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let path = entries[0].as_ref().unwrap().path();
    let text = fs_err::read_to_string(&path).unwrap();
    // Still a valid shard of the same length (the root pins its size
    // too), with the host tree's size changed: its first digit.
    let at = text.find("size = ").unwrap() + "size = ".len();
    let digit = if &text[at..=at] == "9" { "8" } else { "9" };
    let tampered = format!("{}{digit}{}", &text[..at], &text[at + 1..]);
    assert_ne!(tampered, text);
    fs_err::write(&path, tampered).unwrap();
    path.strip_prefix(repo).unwrap().display().to_string()
}

#[test]
fn a_tampered_shard_is_refused() {
    let private = TestContext::own_key();
    let shard = tamper_shard(&private.repo.dir);
    let server = &private.server;
    let env = &private.env;
    let out = output(&mut env.with_repo(
        &server.url(),
        &private.repo.public_key,
        &["--target", TARGET, "install", "rocm-rand"],
    ));
    assert!(stderr(&out).contains(&shard), "{}", describe(&out));
    insta::assert_snapshot!("tampered_shard_refused", private.transcript(&out));
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.path.starts_with("pool/")),
        "{:?}",
        server.requests()
    );
    assert_nothing_installed(env);
    // Discarded, not kept in the cache.
    let cached = fs_err::read_dir(env.cache.join("blobs")).map_or(0, |d| d.count());
    assert_eq!(cached, 0);
}

#[test]
fn a_tampered_shard_on_one_mirror_is_taken_from_the_next() {
    let private = TestContext::own_key();
    let tampered = copy_named(&private, "tampered");
    let shard = tamper_shard(&tampered);
    let first = TestServer::start(&tampered);
    let second = TestServer::start(&private.repo.dir);
    let env = &private.env;
    env.configure(&[first.url(), second.url()], &private.repo.public_key);
    let out = output(
        env.command()
            .args(["--target", TARGET, "install", "rocm-rand"]),
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(gets_of(&first, &shard), 1);
    assert_eq!(gets_of(&second, &shard), 1);
    success(env.command().arg("verify"));
}

/// Republishes the repository's root under another repository name and
/// version, signed with the same key: another channel of the same
/// publisher (`nightly` beside `rocm`).
fn rename_root(private: &TestContext, name: &str, version: u64) {
    let mut root = root(private);
    root.repo.name = name.parse().unwrap();
    root.repo.version = version;
    let text = root.to_toml().unwrap();
    let key = SecretKey::load(&private.repo.secret_key, None).unwrap();
    let signature = sign_root(&key, text.as_bytes()).unwrap();
    let dir = &private.repo.dir;
    kpack_fs::write_atomic(&dir.join("index.toml.minisig"), signature.as_bytes()).unwrap();
    kpack_fs::write_atomic(&dir.join("index.toml"), text.as_bytes()).unwrap();
}

/// The configuration `rocm` has seen its repository at version 2; a
/// mirror then serves another repository's root signed with the same key.
/// Returns the name the first root gave and the mirror of the other.
fn seen_then_other_channel(env: &Env, other: &str, version: u64) -> (String, TestContext) {
    let private = TestContext::own_key();
    reindex(&private);
    let name = root(&private).repo.name.to_string();
    assert_ne!(name, other);
    success(&mut env.with_repo(&private.repo_path(), &private.repo.public_key, &["update"]));
    rename_root(&private, other, version);
    (name, private)
}

#[test]
fn an_older_root_of_another_channel_with_the_same_key_is_refused_naming_both() {
    let env = Env::new();
    let (name, nightly) = seen_then_other_channel(&env, "nightly", 1);
    let out =
        output(&mut env.with_repo(&nightly.repo_path(), &nightly.repo.public_key, &["update"]));
    assert!(
        stderr(&out).contains(&format!("repository {name}")),
        "{}",
        describe(&out)
    );
    insta::assert_snapshot!("other_channel_refused", nightly.transcript(&out));
    assert_eq!(stored_version(&env), Some(2));
    // --allow-rollback is about versions, not about which repository.
    let out = output(&mut env.with_repo(
        &nightly.repo_path(),
        &nightly.repo.public_key,
        &["--allow-rollback", "update"],
    ));
    assert_refused(&out);
}

#[test]
fn a_newer_root_naming_another_repository_is_refused() {
    let env = Env::new();
    let (name, other) = seen_then_other_channel(&env, "other", 100);
    let out = output(&mut env.with_repo(&other.repo_path(), &other.repo.public_key, &["update"]));
    assert!(stderr(&out).contains(&name), "{}", describe(&out));
    insta::assert_snapshot!("other_repository_refused", other.transcript(&out));
    assert_eq!(stored_version(&env), Some(2));

    // An install that fetches the root again refuses it as well.
    configure_always_update(&env, &other.repo_path(), &other.repo.public_key);
    let out = output(
        env.command()
            .args(["--target", TARGET, "install", "rocm-rand"]),
    );
    assert_refused(&out);
    assert_eq!(stored_version(&env), Some(2));
    assert_nothing_installed(&env);
}

#[test]
fn each_configured_repository_keeps_its_own_highest_version() {
    let env = Env::new();
    let (_, nightly) = seen_then_other_channel(&env, "nightly", 1);
    // Configured as a repository of its own, the channel is new.
    let mut command = env.command();
    command
        .arg("--repo")
        .arg(format!("nightly={}", nightly.repo_path()))
        .arg("--key")
        .arg(&nightly.repo.public_key)
        .arg("update");
    let out = output(&mut command);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(remembered_version(&env, "nightly"), Some(1));
    assert_eq!(remembered_version(&env, "rocm"), Some(2));
}

#[test]
fn versions_recorded_by_root_name_before_still_refuse_a_rollback() {
    let private = TestContext::own_key();
    let name = root(&private).repo.name.to_string();
    let env = &private.env;
    fs_err::create_dir_all(&env.state).unwrap();
    fs_err::write(env.state.join("versions.toml"), format!("{name} = 7\n")).unwrap();
    let out =
        output(&mut env.with_repo(&private.repo_path(), &private.repo.public_key, &["update"]));
    insta::assert_snapshot!("recorded_version_refused", private.transcript(&out));

    // Once a version at or above it is accepted, the record is the
    // configured repository's.
    rename_root(&private, &name, 8);
    success(&mut env.with_repo(&private.repo_path(), &private.repo.public_key, &["update"]));
    assert_eq!(remembered_version(env, "rocm"), Some(8));
}

/// Two `kpack-get update`s at once, of two repositories served from two
/// loopback servers, with one state directory: `versions.toml` keeps both
/// records every time (it is read, changed and written under a lock), so
/// neither repository forgets the highest version it has seen.
#[test]
fn concurrent_updates_of_two_repositories_keep_both_records() {
    let context = TestContext::new();
    let second = TestServer::start(&context.repo.dir);
    let env = &context.env;
    let key = context.repo.public_key.display().to_string();
    let version = root(&context).repo.version;
    for round in 0..30 {
        let _ = fs_err::remove_dir_all(&env.state);
        let children: Vec<_> = [("a", context.server.url()), ("b", second.url())]
            .into_iter()
            .map(|(name, url)| {
                let mut command = env.command();
                command
                    .args(["--repo", &format!("{name}={url}"), "--key", &key, "update"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped());
                command.spawn().unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "round {round}: {}", describe(&out));
        }
        for name in ["a", "b"] {
            assert_eq!(
                remembered_version(env, name),
                Some(version),
                "round {round}: {name} lost from {}",
                fs_err::read_to_string(env.state.join("versions.toml")).unwrap_or_default()
            );
        }
    }
}

/// A repository published unsigned (`kpack-repo build --unsigned`, or a
/// mirror that lost the signature) serves `index.toml` and no
/// `index.toml.minisig`: that is a verification failure saying so (exit
/// 5), not a network error.
#[test]
fn an_unsigned_repository_is_refused_as_unsigned() {
    let private = TestContext::own_key();
    fs_err::remove_file(private.repo.dir.join("index.toml.minisig")).unwrap();
    let server = &private.server;
    let env = &private.env;
    let out = output(&mut env.with_repo(&server.url(), &private.repo.public_key, &["update"]));
    let stderr = assert_refused(&out);
    assert!(stderr.contains("is unsigned"), "{stderr}");
    insta::assert_snapshot!("unsigned_refused", private.transcript(&out));
    assert_eq!(stored_version(env), None);

    // One `kpack-repo build --unsigned` published, read from its directory.
    let unsigned = private.home().join("unsigned");
    kpack_test_support::run(
        Command::new(kpack_repo_exe())
            .arg("build")
            .arg(&unsigned)
            .arg(kpack_test_support::workspace().join("manifests/rocm-rand.toml"))
            .arg("--sources")
            .arg(kpack_test_support::fixtures().join("debian"))
            .arg("--unsigned"),
    );
    let out = output(&mut env.with_repo(
        &unsigned.display().to_string(),
        &private.repo.public_key,
        &["update"],
    ));
    let stderr = assert_refused(&out);
    assert!(stderr.contains("is unsigned"), "{stderr}");
}

/// An index older than `max-index-age` is fetched again before an
/// install; with `--offline` it is used as it is, and said with its age.
#[test]
fn an_old_index_used_offline_is_said_with_its_age() {
    let private = TestContext::own_key();
    let env = &private.env;
    configure_always_update(env, &private.repo_path(), &private.repo.public_key);
    let plan = ["--target", "gfx1030", "install", "rocm-rand", "--dry-run"];
    // Online, the old index is fetched again, silently; its shard cached.
    let online = output(env.command().args(plan));
    assert!(online.status.success(), "{}", describe(&online));
    assert!(
        !stderr(&online).contains("using its index"),
        "{}",
        describe(&online)
    );
    let out = output(env.command().args([
        "--offline",
        "--target",
        "gfx1030",
        "install",
        "rocm-rand",
        "--dry-run",
    ]));
    assert!(out.status.success(), "{}", describe(&out));
    let stderr = stderr(&out);
    assert!(
        stderr.contains("repository rocm: using its index fetched ")
            && stderr.contains(" ago (--offline); `kpack-get update` fetches the current one"),
        "{stderr}"
    );
}

//! Failures a user can act on: each exits with its documented code, says
//! what failed and where on an `error:` line, suggests what to do on a
//! `hint:` line where there is something to suggest, shows no Rust panic or
//! backtrace, and installs nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::gpus::{fake_sysfs, FakeNode};
use common::hostile::{private_repo, publish_tree, tree, Entry};
use common::server::TestServer;
use common::{
    error_text, failed, hint_text, output, pool, pool_gets, shared_rocrand_repo, snapshot, success,
    Env, HOST_TREE,
};

const TARGET: &str = "gfx90a:sramecc+:xnack-";
const LIBRARY: &str = "lib/librocrand.so.1.1";
const ARCHIVE: &str = ".kpack/rocrand_gfx90a.kpack";

/// The prefix without kpack-get's lock file and an otherwise empty
/// `.kpack`: what a failed change may leave.
fn settled(root: &Path) -> BTreeMap<String, String> {
    let mut tree = snapshot(root);
    tree.remove(".kpack/.lock");
    if !tree.keys().any(|path| path.starts_with(".kpack/")) {
        tree.remove(".kpack");
    }
    tree
}

fn nothing_installed(env: &Env) {
    let left = settled(&env.prefix);
    assert!(left.is_empty(), "nothing installed: {left:#?}");
}

fn install(env: &Env, url: &str, key: &Path, extra: &[&str]) -> Command {
    let mut args = vec!["--no-progress"];
    args.extend_from_slice(extra);
    args.extend(["install", "rocm-rand"]);
    env.with_repo(url, key, &args)
}

#[test]
fn no_repository_configured() {
    let env = Env::new();
    let out = output(
        env.command()
            .args(["--target", TARGET, "install", "rocm-rand"]),
    );
    let stderr = failed(&out, 3);
    assert!(
        error_text(&stderr).contains("no repository configured"),
        "{stderr}"
    );
    let hint = hint_text(&stderr);
    let config = env.home.path().join("config/kpack-get/config.toml");
    assert!(hint.contains(&config.display().to_string()), "{hint}");
    assert!(hint.contains("--repo"), "{hint}");
    nothing_installed(&env);
}

#[test]
fn no_network() {
    let repo = shared_rocrand_repo();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let env = Env::new();
    let out = output(
        install(&env, &url, &repo.public_key, &["--target", TARGET]).env("KPACK_GET_ATTEMPTS", "1"),
    );
    let stderr = failed(&out, 4);
    assert!(
        error_text(&stderr).contains(&url),
        "names the URL: {stderr}"
    );
    assert!(hint_text(&stderr).contains("network"), "{stderr}");
    nothing_installed(&env);
}

#[test]
fn no_device_code_for_the_gpu() {
    let repo = shared_rocrand_repo();
    let server = TestServer::start(&repo.dir);
    let env = Env::new();
    let out = output(&mut install(
        &env,
        &server.url(),
        &repo.public_key,
        &["--target", "gfx1100"],
    ));
    let stderr = failed(&out, 6);
    let error = error_text(&stderr);
    for text in ["rocm-rand", "gfx1100", "gfx1030", "gfx90a:xnack-", "gfx908"] {
        assert!(error.contains(text), "{text}: {stderr}");
    }
    assert!(hint_text(&stderr).contains("--target"), "{stderr}");
    assert!(pool_gets(&server).is_empty(), "{:?}", server.requests());
    nothing_installed(&env);
}

#[test]
fn no_gpu_found_installs_host_parts_only() {
    let repo = shared_rocrand_repo();
    let server = TestServer::start(&repo.dir);
    let env = Env::new();
    let sysfs = fake_sysfs(&env.home.path().join("sysfs"), &[FakeNode::cpu()]);
    let out = output(
        install(&env, &server.url(), &repo.public_key, &[]).env("KPACK_GET_SYSFS_ROOT", &sysfs),
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("warning: ") && l.contains("no GPU found")),
        "{stderr}"
    );
    assert!(stdout.contains("installed rocm-rand 5.3.3"), "{stdout}");
    assert_eq!(pool_gets(&server), [pool(HOST_TREE)]);
    assert!(env.prefix.join(LIBRARY).is_file());
    assert!(!env.prefix.join(ARCHIVE).exists());
    let list = success(env.command().arg("list"));
    assert!(list.contains("host parts only"), "{list}");
    success(env.command().arg("verify"));
}

/// Runs `command` as nobody (uid and gid 65534, no groups).
fn as_nobody(command: &Command) -> Command {
    let mut wrapped = kpack_test_support::tool("setpriv");
    wrapped
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(command.get_program())
        .args(command.get_args())
        .stdin(Stdio::null());
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(name, value),
            None => wrapped.env_remove(name),
        };
    }
    wrapped
}

/// Whether this process runs as root (the owner of `/proc/self` is its
/// effective user).
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    fs_err::metadata("/proc/self").unwrap().uid() == 0
}

/// Fails the test, saying why, unless setpriv can drop root's rights.
fn require_setpriv() {
    let out = kpack_test_support::tool("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "setpriv cannot run a command as uid 65534 here, so this test cannot check \
         what an unprivileged user sees ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

#[test]
fn permission_denied_on_the_prefix() {
    let repo = shared_rocrand_repo();
    let server = TestServer::start(&repo.dir);
    let env = Env::new();
    // Everything but the prefix is open to the unprivileged user.
    fs_err::set_permissions(env.home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for dir in [&env.cache, &env.state] {
        fs_err::create_dir_all(dir).unwrap();
        fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    fs_err::create_dir_all(&env.prefix).unwrap();
    let mut command = install(&env, &server.url(), &repo.public_key, &["--target", TARGET]);
    // As root (CI), run as nobody against a root-owned prefix; as another
    // user, against a prefix that user may not write.
    let mut command = if running_as_root() {
        require_setpriv();
        fs_err::set_permissions(&env.prefix, std::fs::Permissions::from_mode(0o755)).unwrap();
        as_nobody(&command)
    } else {
        fs_err::set_permissions(&env.prefix, std::fs::Permissions::from_mode(0o555)).unwrap();
        command.stdin(Stdio::null());
        command
    };
    let before = snapshot(&env.prefix);

    let out = output(&mut command);
    fs_err::set_permissions(&env.prefix, std::fs::Permissions::from_mode(0o755)).unwrap();
    let stderr = failed(&out, 8);
    let error = error_text(&stderr);
    assert!(
        error.contains(&env.prefix.display().to_string()),
        "names the prefix: {stderr}"
    );
    assert!(error.contains("ermission denied"), "{stderr}");
    assert!(hint_text(&stderr).contains("--prefix"), "{stderr}");
    assert_eq!(snapshot(&env.prefix), before);
}

#[test]
fn list_and_verify_read_a_prefix_they_may_not_write() {
    let repo = shared_rocrand_repo();
    let server = TestServer::start(&repo.dir);
    let env = Env::new();
    success(&mut install(
        &env,
        &server.url(),
        &repo.public_key,
        &["--target", TARGET],
    ));
    // A root-owned prefix, as /opt/rocm is: readable by everyone, writable
    // by root only; no lock file yet, and a change an interrupted run left.
    fs_err::set_permissions(env.home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    fs_err::remove_file(env.prefix.join(".kpack/.lock")).unwrap();
    fs_err::create_dir_all(env.prefix.join(".kpack/staging/4242-1/root")).unwrap();
    fs_err::write(
        env.prefix.join(".kpack/transaction.toml"),
        "format = 1\nid = \"4242-1\"\n",
    )
    .unwrap();
    let before = snapshot(&env.prefix);

    for (command, says) in [
        ("list", "rocm-rand 5.3.3"),
        ("verify", "3 installed files match the record"),
    ] {
        let out = output(&mut as_nobody(env.command().arg(command)));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{command}:\n{stdout}\n{stderr}");
        assert!(stdout.contains(says), "{command}: {stdout}");
        let warning = stderr
            .lines()
            .find(|l| l.starts_with("warning: ") && l.contains("interrupted change (4242-1)"))
            .unwrap_or_else(|| panic!("{command}: a warning about the pending change:\n{stderr}"));
        assert!(
            warning.contains("the next `kpack-get install`, `remove` or `upgrade` completes it"),
            "{warning}"
        );
        assert_eq!(
            snapshot(&env.prefix),
            before,
            "{command} wrote in the prefix"
        );
    }
    // Even with the right to write, a reading command leaves the change to
    // one that may write.
    success(env.command().arg("list"));
    assert!(env.prefix.join(".kpack/transaction.toml").exists());
    let out = output(env.command().args(["--no-progress", "remove", "rocm-rand"]));
    assert!(out.status.success(), "{}", common::describe(&out));
    assert!(
        common::stderr(&out).contains("completed an interrupted change (4242-1)"),
        "{}",
        common::describe(&out)
    );
    assert!(!env.prefix.join(".kpack/transaction.toml").exists());
}

/// A tmpfs mounted at a directory for the length of a test.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(dir: &Path, size: &str) -> Result<Mount, String> {
        fs_err::create_dir_all(dir).unwrap();
        let out = kpack_test_support::tool("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size}"))
            .arg("tmpfs")
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if out.status.success() {
            Ok(Mount(dir.to_owned()))
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = kpack_test_support::tool("umount")
            .arg(&self.0)
            .stdin(Stdio::null())
            .status();
    }
}

#[test]
fn disk_full_in_the_prefix() {
    let repo = shared_rocrand_repo();
    let server = TestServer::start(&repo.dir);
    let env = Env::new();
    // The library alone is 13 MB; the downloads go to the cache, elsewhere.
    assert!(
        running_as_root(),
        "this test mounts a small tmpfs as the prefix, which needs root (CI runs the tests as root)"
    );
    let mount = Mount::tmpfs(&env.prefix, "2m")
        .unwrap_or_else(|reason| panic!("cannot mount a small tmpfs for the prefix: {reason}"));
    let out = output(&mut install(
        &env,
        &server.url(),
        &repo.public_key,
        &["--target", TARGET],
    ));
    let stderr = failed(&out, 8);
    let error = error_text(&stderr);
    assert!(
        error.contains(&env.prefix.display().to_string()),
        "names where: {stderr}"
    );
    // The file as the user knows it, not its staging copy.
    assert!(
        error.contains(&env.prefix.join("lib/").display().to_string())
            && !error.contains("staging"),
        "names the file: {stderr}"
    );
    let hint = hint_text(&stderr);
    assert!(hint.contains("disk is full"), "{hint}");
    nothing_installed(&env);
    // The cache kept the downloads: with room, the install needs no network.
    drop(mount);
    server.clear_requests();
    success(&mut install(
        &env,
        &server.url(),
        &repo.public_key,
        &["--target", TARGET],
    ));
    assert!(pool_gets(&server).is_empty(), "{:?}", server.requests());
    success(env.command().arg("verify"));
}

#[test]
fn tar_entries_escaping_the_prefix_are_refused() {
    let env = Env::new();
    let work = env.home.path().join("work");
    fs_err::create_dir_all(&work).unwrap();
    let repo = private_repo(&work);
    let outside = env.home.path().join("outside");
    fs_err::create_dir_all(&outside).unwrap();
    let absolute = outside.join("absolute-escape").display().to_string();
    // From the staging directory, five levels up is above the prefix.
    let parent = "../../../../../parent-escape";
    let escaped = b"escaped\n";
    // Package, its tree, the entry the refusal names.
    let cases: Vec<(&str, Vec<Entry>, &str)> = vec![
        (
            "escape-parent",
            vec![
                Entry::dir("share/"),
                Entry::file("share/innocent.txt", escaped),
                Entry::file(parent, escaped),
            ],
            parent,
        ),
        (
            "escape-absolute",
            vec![
                Entry::file("share/innocent.txt", escaped),
                Entry::file(&absolute, escaped),
            ],
            &absolute,
        ),
        (
            "escape-link",
            vec![
                Entry::file("share/innocent.txt", escaped),
                Entry::link("share/etc", "/etc"),
                Entry::file("share/etc/kpack-get-escape", escaped),
            ],
            "share/etc",
        ),
        (
            "escape-relative-link",
            vec![
                Entry::link("share/up", "../.."),
                Entry::file("share/up/relative-escape", escaped),
            ],
            "share/up",
        ),
        (
            "escape-through-link",
            vec![
                Entry::link("share/inside", "../lib"),
                Entry::file("share/inside/librocrand.so.1.1", escaped),
            ],
            "share/inside/librocrand.so.1.1",
        ),
    ];
    let mut artifacts = Vec::new();
    for (name, entries, _) in &cases {
        artifacts.push(publish_tree(&repo, &work, name, "1.0.0", &tree(entries)));
    }
    let server = TestServer::start(&repo.dir);
    // A prefix with something in it, to see it is left alone.
    success(&mut install(
        &env,
        &server.url(),
        &repo.public_key,
        &["--target", TARGET],
    ));
    let before = snapshot(&env.prefix);
    for ((name, _, entry), artifact) in cases.iter().zip(&artifacts) {
        let out = output(&mut env.with_repo(
            &server.url(),
            &repo.public_key,
            &["--no-progress", "--target", TARGET, "install", name],
        ));
        let stderr = failed(&out, 5);
        let error = error_text(&stderr);
        assert!(
            error.contains(artifact),
            "{name}: names {artifact}: {stderr}"
        );
        assert!(error.contains(entry), "{name}: names {entry}: {stderr}");
        assert!(error.contains("refused"), "{name}: {stderr}");
        assert!(
            hint_text(&stderr).contains("nothing was installed"),
            "{stderr}"
        );
        // Host parts only, by the package's nature: no warning about it.
        assert!(!stderr.contains("no device code"), "{name}: {stderr}");
        assert_eq!(snapshot(&env.prefix), before, "{name}: prefix unchanged");
    }
    for escaped in [
        env.home.path().join("parent-escape"),
        outside.join("absolute-escape"),
        PathBuf::from("/etc/kpack-get-escape"),
        env.home.path().join("relative-escape"),
    ] {
        assert!(!escaped.exists(), "{} written", escaped.display());
    }
    let outside_now: Vec<_> = fs_err::read_dir(&outside).unwrap().collect();
    assert!(outside_now.is_empty(), "{outside_now:?}");
    success(env.command().arg("verify"));
}

#[test]
fn a_file_kpack_get_did_not_install_is_not_overwritten() {
    let repo = shared_rocrand_repo();
    let server = TestServer::start(&repo.dir);
    let env = Env::new();
    fs_err::create_dir_all(env.prefix.join("lib")).unwrap();
    fs_err::write(env.prefix.join(LIBRARY), b"the user's own build").unwrap();
    let before = snapshot(&env.prefix);
    let out = output(&mut install(
        &env,
        &server.url(),
        &repo.public_key,
        &["--target", TARGET],
    ));
    let stderr = failed(&out, 1);
    let error = error_text(&stderr);
    assert!(error.contains(LIBRARY), "names the file: {stderr}");
    assert!(error.contains("not installed by kpack-get"), "{stderr}");
    assert!(
        error.contains(&env.prefix.display().to_string()),
        "names the prefix: {stderr}"
    );
    let hint = hint_text(&stderr);
    assert!(hint.contains("--prefix"), "{hint}");
    assert_eq!(settled(&env.prefix), before);
    assert_eq!(
        fs_err::read(env.prefix.join(LIBRARY)).unwrap(),
        b"the user's own build"
    );
}

#[test]
fn verify_names_a_corrupted_and_a_missing_file() {
    let repo = shared_rocrand_repo();
    let server = TestServer::start(&repo.dir);
    let env = Env::new();
    success(&mut install(
        &env,
        &server.url(),
        &repo.public_key,
        &["--target", TARGET],
    ));
    let library = env.prefix.join(LIBRARY);
    let mut bytes = fs_err::read(&library).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    fs_err::write(&library, &bytes).unwrap();
    fs_err::remove_file(env.prefix.join(ARCHIVE)).unwrap();

    let out = output(env.command().arg("verify"));
    let stderr = failed(&out, 5);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    assert!(
        warnings
            .iter()
            .any(|l| l.contains(LIBRARY) && l.contains("sha256")),
        "{stderr}"
    );
    assert!(warnings.iter().any(|l| l.contains(ARCHIVE)), "{stderr}");
    assert!(error_text(&stderr).contains("2 of 3"), "{stderr}");
    assert!(hint_text(&stderr).contains("install"), "{stderr}");
}

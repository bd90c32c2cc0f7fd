//! Failures a user can act on: each exits with its documented code, says
//! what failed and where on an `error:` line, suggests what to do on a
//! `hint:` line where there is something to suggest, shows no Rust panic or
//! backtrace, and installs nothing.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::gpus::{fake_sysfs, FakeNode};
use crate::common::hostile::{publish_tree, tree, Entry};
use crate::common::{output, pool, snapshot, success, Env, HOST_TREE};
use kpack_test_support::context::TestContext;

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

/// A command that failed before it could install anything made nothing:
/// not the prefix, not its `.kpack/`, not its lock.
fn nothing_created(env: &Env) {
    assert!(!env.prefix.exists(), "{:#?}", snapshot(&env.prefix));
}

/// `kpack-get --no-progress EXTRA install rocm-rand` from the context's
/// server.
fn install(context: &TestContext, extra: &[&str]) -> Command {
    let mut args = vec!["--no-progress"];
    args.extend_from_slice(extra);
    args.extend(["install", "rocm-rand"]);
    context.kpack_get(&args)
}

/// The install for `TARGET`, which must succeed.
fn installed(context: &TestContext) {
    success(&mut install(context, &["--target", TARGET]));
}

#[test]
fn no_repository_configured() {
    let context = TestContext::new();
    let out = output(
        context
            .env
            .command()
            .args(["--target", TARGET, "install", "rocm-rand"]),
    );
    insta::assert_snapshot!(context.transcript(&out));
    nothing_created(&context.env);
}

#[test]
fn no_network() {
    let context = TestContext::new();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let args = ["--no-progress", "--target", TARGET, "install", "rocm-rand"];
    let out = output(
        context
            .env
            .with_repo(&url, &context.repo.public_key, &args)
            .env("KPACK_GET_ATTEMPTS", "1"),
    );
    insta::assert_snapshot!(context.transcript_masking(&out, &[(&url, "<NOBODY>")]));
    nothing_created(&context.env);
}

#[test]
fn no_device_code_for_the_gpu() {
    let context = TestContext::new();
    let out = output(&mut install(&context, &["--target", "gfx1100"]));
    insta::assert_snapshot!(context.transcript(&out));
    let gets = context.pool_gets();
    assert!(gets.is_empty(), "{:?}", context.server.requests());
    nothing_created(&context.env);
}

#[test]
fn no_gpu_found_installs_host_parts_only() {
    let context = TestContext::new();
    let env = &context.env;
    let sysfs = fake_sysfs(&context.home().join("sysfs"), &[FakeNode::cpu()]);
    let out = output(install(&context, &[]).env("KPACK_GET_SYSFS_ROOT", &sysfs));
    insta::assert_snapshot!("no_gpu_found_install", context.transcript(&out));
    assert_eq!(context.pool_gets(), [pool(HOST_TREE)]);
    assert!(env.prefix.join(LIBRARY).is_file());
    assert!(!env.prefix.join(ARCHIVE).exists());
    let list = output(env.command().arg("list"));
    insta::assert_snapshot!("no_gpu_found_list", context.transcript(&list));
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
    let context = TestContext::new();
    let env = &context.env;
    // Everything but the prefix is open to the unprivileged user.
    fs_err::set_permissions(env.home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for dir in [&env.cache, &env.state] {
        fs_err::create_dir_all(dir).unwrap();
        fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    fs_err::create_dir_all(&env.prefix).unwrap();
    let mut command = install(&context, &["--target", TARGET]);
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
    insta::assert_snapshot!(context.transcript(&out));
    assert_eq!(snapshot(&env.prefix), before);
}

#[test]
fn list_and_verify_read_a_prefix_they_may_not_write() {
    let context = TestContext::new();
    let env = &context.env;
    installed(&context);
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

    for command in ["list", "verify"] {
        let out = output(&mut as_nobody(env.command().arg(command)));
        let name = format!("read_only_prefix_{command}");
        insta::assert_snapshot!(name, context.transcript(&out));
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
    insta::assert_snapshot!("read_only_prefix_then_remove", context.transcript(&out));
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
    let context = TestContext::new();
    let env = &context.env;
    // The library alone is 13 MB; the downloads go to the cache, elsewhere.
    assert!(
        running_as_root(),
        "this test mounts a small tmpfs as the prefix, which needs root (CI runs the tests as root)"
    );
    let mount = Mount::tmpfs(&env.prefix, "2m")
        .unwrap_or_else(|reason| panic!("cannot mount a small tmpfs for the prefix: {reason}"));
    let out = output(&mut install(&context, &["--target", TARGET]));
    // The file as the user knows it, not its staging copy.
    insta::assert_snapshot!(context.transcript(&out));
    nothing_installed(env);
    // The cache kept the downloads: with room, the install needs no network.
    drop(mount);
    context.server.clear_requests();
    installed(&context);
    let gets = context.pool_gets();
    assert!(gets.is_empty(), "{:?}", context.server.requests());
    success(env.command().arg("verify"));
}

#[test]
fn tar_entries_escaping_the_prefix_are_refused() {
    let context = TestContext::private();
    let (env, repo) = (&context.env, &context.repo);
    let work = context.home().join("work");
    fs_err::create_dir_all(&work).unwrap();
    let outside = context.home().join("outside");
    fs_err::create_dir_all(&outside).unwrap();
    let absolute = outside.join("absolute-escape").display().to_string();
    // From the staging directory, five levels up is above the prefix.
    let parent = "../../../../../parent-escape";
    let escaped = b"escaped\n";
    // Package and its tree.
    let cases: Vec<(&str, Vec<Entry>)> = vec![
        (
            "escape-parent",
            vec![
                Entry::dir("share/"),
                Entry::file("share/innocent.txt", escaped),
                Entry::file(parent, escaped),
            ],
        ),
        (
            "escape-absolute",
            vec![
                Entry::file("share/innocent.txt", escaped),
                Entry::file(&absolute, escaped),
            ],
        ),
        (
            "escape-link",
            vec![
                Entry::file("share/innocent.txt", escaped),
                Entry::link("share/etc", "/etc"),
                Entry::file("share/etc/kpack-get-escape", escaped),
            ],
        ),
        (
            "escape-relative-link",
            vec![
                Entry::link("share/up", "../.."),
                Entry::file("share/up/relative-escape", escaped),
            ],
        ),
        (
            "escape-through-link",
            vec![
                Entry::link("share/inside", "../lib"),
                Entry::file("share/inside/librocrand.so.1.1", escaped),
            ],
        ),
    ];
    let mut sizes = Vec::new();
    for (name, entries) in &cases {
        let artifact = publish_tree(repo, &work, name, "1.0.0", &tree(entries));
        sizes.push(fs_err::metadata(repo.dir.join(artifact)).unwrap().len());
    }
    // A prefix with something in it, to see it is left alone.
    installed(&context);
    let before = snapshot(&env.prefix);
    for ((name, _), size) in cases.iter().zip(sizes) {
        let out =
            output(&mut context.kpack_get(&["--no-progress", "--target", TARGET, "install", name]));
        // Each refusal names the artifact and the entry; host parts only,
        // by the package's nature, so no warning about device code. (A
        // tree's size follows the length of the temporary path in it.)
        let size = format!("{size} B");
        let text = context.transcript_masking(&out, &[(&size, "<SIZE> B")]);
        insta::assert_snapshot!(format!("refused_{name}"), text);
        assert_eq!(snapshot(&env.prefix), before, "{name}: prefix unchanged");
    }
    for escaped in [
        context.home().join("parent-escape"),
        outside.join("absolute-escape"),
        PathBuf::from("/etc/kpack-get-escape"),
        context.home().join("relative-escape"),
    ] {
        assert!(!escaped.exists(), "{} written", escaped.display());
    }
    let outside_now: Vec<_> = fs_err::read_dir(&outside).unwrap().collect();
    assert!(outside_now.is_empty(), "{outside_now:?}");
    success(env.command().arg("verify"));
}

#[test]
fn a_file_kpack_get_did_not_install_is_not_overwritten() {
    let context = TestContext::new();
    let env = &context.env;
    fs_err::create_dir_all(env.prefix.join("lib")).unwrap();
    fs_err::write(env.prefix.join(LIBRARY), b"the user's own build").unwrap();
    let before = snapshot(&env.prefix);
    let out = output(&mut install(&context, &["--target", TARGET]));
    insta::assert_snapshot!(context.transcript(&out));
    assert_eq!(settled(&env.prefix), before);
    assert_eq!(
        fs_err::read(env.prefix.join(LIBRARY)).unwrap(),
        b"the user's own build"
    );
}

#[test]
fn verify_names_a_corrupted_and_a_missing_file() {
    let context = TestContext::new();
    let env = &context.env;
    installed(&context);
    let library = env.prefix.join(LIBRARY);
    let mut bytes = fs_err::read(&library).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    fs_err::write(&library, &bytes).unwrap();
    fs_err::remove_file(env.prefix.join(ARCHIVE)).unwrap();

    let out = output(env.command().arg("verify"));
    insta::assert_snapshot!(context.transcript(&out));
    // What the hint says brings both back.
    success(&mut context.kpack_get(&["--target", TARGET, "install", "--reinstall", "rocm-rand"]));
    success(env.command().arg("verify"));
}

/// Durations too large for any clock (`u64::MAX` seconds), none at all, or
/// not numbers, from the environment or the command line: a usage error
/// naming the setting, never a panic.
#[test]
fn durations_out_of_range_are_usage_errors() {
    let env = Env::new();
    for (variable, value) in [
        ("KPACK_GET_READ_TIMEOUT", "18446744073709551615"),
        ("KPACK_GET_HSA_TIMEOUT", "18446744073709551615"),
        ("KPACK_GET_READ_TIMEOUT", "0"),
        ("KPACK_GET_HSA_TIMEOUT", "NaN"),
    ] {
        let out = output(env.command().env(variable, value).arg("detect"));
        assert_eq!(out.status.code(), Some(2), "{variable}={value}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        insta::assert_snapshot!(
            format!("duration_{variable}_{value}"),
            stderr.replace(value, "<VALUE>")
        );
    }
    let out = output(env.command().args(["--read-timeout", "1e300", "list"]));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// The prefix's lock is root's own (0600): another user cannot open it, so
/// cannot hold it (flock needs no write access) and block root's
/// kpack-get; a lock file made 0644 before is made 0600 at the next change.
#[test]
fn the_lock_is_roots_own_and_another_user_cannot_hold_it() {
    use std::os::unix::fs::MetadataExt;
    require_setpriv();
    let context = TestContext::new();
    let env = &context.env;
    installed(&context);
    let lock = env.prefix.join(".kpack/.lock");
    let mode = |path: &Path| fs_err::metadata(path).unwrap().mode() & 0o777;
    assert_eq!(mode(&lock), 0o600);
    fs_err::set_permissions(env.home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    fs_err::set_permissions(&lock, std::fs::Permissions::from_mode(0o644)).unwrap();
    success(env.command().args(["--no-progress", "remove", "rocm-rand"]));
    assert_eq!(mode(&lock), 0o600);

    let mut hold = kpack_test_support::tool("flock");
    hold.args(["--nonblock", "--exclusive"])
        .arg(&lock)
        .arg("true");
    let out = output(&mut as_nobody(&hold));
    assert!(!out.status.success(), "nobody took root's lock: {out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{out:?}"
    );
    // What kept working keeps working: root installs without waiting.
    success(&mut install(&context, &["--no-wait", "--target", TARGET]));
}

/// A lock file an older kpack-get left 0644 is made 0600 by the first
/// command that opens it, one that only reads the prefix included: before,
/// it stayed open to others until the next change.
#[test]
fn a_lock_left_open_to_others_is_made_private_by_the_first_command_that_opens_it() {
    use std::os::unix::fs::MetadataExt;
    let context = TestContext::new();
    let env = &context.env;
    installed(&context);
    let lock = env.prefix.join(".kpack/.lock");
    let mode = |path: &Path| fs_err::metadata(path).unwrap().mode() & 0o777;
    for command in [&["list"][..], &["verify"], &["--target", TARGET, "check"]] {
        fs_err::set_permissions(&lock, std::fs::Permissions::from_mode(0o644)).unwrap();
        output(env.command().arg("--no-progress").args(command));
        assert_eq!(mode(&lock), 0o600, "after {command:?}");
    }
}

/// A busy prefix names the process holding its lock.
#[test]
fn a_busy_lock_names_its_holder() {
    let context = TestContext::new();
    let env = &context.env;
    installed(&context);
    let lock = env.prefix.join(".kpack/.lock");
    // In a process group of its own: flock's `sleep` inherits the locked
    // descriptor, so the holder is gone only when both are.
    let mut holder = kpack_test_support::tool("flock")
        .arg("--exclusive")
        .arg(&lock)
        .args(["sleep", "60"])
        .process_group(0)
        .spawn()
        .unwrap();
    let held = (0..200).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(25));
        fs_err::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .any(|line| line.contains(&format!(" {} ", holder.id())))
    });
    assert!(held, "flock did not take the lock");
    let out = output(&mut install(&context, &["--no-wait"]));
    // One that waits says whom for, and goes on once the holder is gone.
    let log = context.home().join("waiting.log");
    let mut waiting = install(&context, &["--target", TARGET])
        .stdout(std::process::Stdio::null())
        .stderr(fs_err::File::create(&log).unwrap().into_file())
        .spawn()
        .unwrap();
    let named = format!(
        "waiting for another kpack-get (pid {} (flock))",
        holder.id()
    );
    let said = (0..400).any(|_| {
        std::thread::sleep(std::time::Duration::from_millis(25));
        fs_err::read_to_string(&log).unwrap().contains(&named)
    });
    let group = libc::pid_t::try_from(holder.id()).unwrap();
    // SAFETY: kill(2) with a negative pid signals that process group.
    assert_eq!(unsafe { libc::kill(-group, libc::SIGKILL) }, 0);
    holder.wait().unwrap();
    let waited = waiting.wait().unwrap();
    assert!(said, "{}", fs_err::read_to_string(&log).unwrap());
    assert!(
        waited.success(),
        "{}",
        fs_err::read_to_string(&log).unwrap()
    );
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        text.contains(&format!("pid {} (flock)", holder.id())),
        "{text}"
    );
    insta::assert_snapshot!(context.transcript(&out));
}

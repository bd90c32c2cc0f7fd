//! Commands that only read the prefix never wait for its lock, readers of
//! the stored root never pair it with another root's signature while an
//! update replaces them, and a
//! command that fails leaves nothing behind: not the prefix, not its
//! `.kpack/`, not its lock; a cache or state directory that cannot be
//! written exits 8 with a hint.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::hostile::publish_shards;
use crate::common::{describe, output, success};
use kpack_test_support::context::TestContext;

const TARGET: &str = "gfx90a:xnack-";

/// Runs `command`, which must end within `limit`: killed and failed
/// otherwise.
fn within(limit: Duration, command: &mut Command) -> Output {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            panic!("{command:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn list_verify_and_check_answer_while_another_install_holds_the_lock() {
    let context = TestContext::new();
    context.install_for(TARGET);
    // Held as an install holds it while it downloads.
    let lock = fs_err::OpenOptions::new()
        .read(true)
        .write(true)
        .open(context.env.prefix.join(".kpack/.lock"))
        .unwrap();
    lock.file().lock().unwrap();

    for args in [&["list"][..], &["verify"], &["--target", TARGET, "check"]] {
        let out = within(Duration::from_secs(30), &mut context.kpack_get(args));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {stdout}{stderr}");
        assert!(
            stderr.contains("is locked by pid") && stderr.contains("the state before"),
            "{args:?}: {stderr}"
        );
    }
    let listed = within(Duration::from_secs(30), &mut context.kpack_get(&["list"]));
    assert!(String::from_utf8_lossy(&listed.stdout).contains("rocm-rand"));
    drop(lock);
}

#[test]
fn verify_does_not_judge_the_files_a_change_under_way_is_moving() {
    let context = TestContext::new();
    context.install_for(TARGET);
    let env = &context.env;
    let record = rocm_kpack_get::install::Prefix::open(&env.prefix, false)
        .unwrap()
        .record()
        .unwrap();
    let moving = record.packages.values().next().unwrap().files[0]
        .path
        .clone();
    fs_err::write(env.prefix.join(moving.as_str()), "half moved").unwrap();
    // A committed change, its journal naming that file.
    fs_err::create_dir_all(env.prefix.join(".kpack/staging/4242-1/root")).unwrap();
    fs_err::write(
        env.prefix.join(".kpack/transaction.toml"),
        format!("format = 1\nid = \"4242-1\"\nmoves = [\"{moving}\"]\n"),
    )
    .unwrap();
    let lock = fs_err::File::open(env.prefix.join(".kpack/.lock")).unwrap();

    // Held by the process carrying the change out: the file is in motion.
    lock.file().lock().unwrap();
    let out = within(Duration::from_secs(30), &mut context.kpack_get(&["verify"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("is changing")
            && stderr.contains("1 installed file the change under way is moving not judged"),
        "{stderr}"
    );

    // Left by an interrupted run, nobody is moving it: it differs.
    lock.file().unlock().unwrap();
    let (code, stderr) = failure(&mut context.kpack_get(&["verify"]));
    assert_eq!(code, 5, "{stderr}");
    assert!(stderr.contains(moving.as_str()), "{stderr}");
}

/// The exit code and stderr of `command`.
fn failure(command: &mut Command) -> (i32, String) {
    let out = output(command);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A path no one can make a directory at, root included: under a file.
fn under_a_file(home: &Path, name: &str) -> std::path::PathBuf {
    let file = home.join(format!("{name}-is-a-file"));
    fs_err::write(&file, "").unwrap();
    file.join(name)
}

#[test]
fn a_cache_directory_that_cannot_be_written_exits_8_with_a_hint() {
    let context = TestContext::new();
    let cache = under_a_file(context.home(), "cache");
    let mut command = context.kpack_get(&["--target", TARGET, "install", "rocm-rand"]);
    command.env("KPACK_GET_CACHE_DIR", &cache);

    let (code, stderr) = failure(&mut command);

    assert_eq!(code, 8, "{stderr}");
    assert!(
        stderr.contains("hint: choose a cache directory you may write"),
        "{stderr}"
    );
}

#[test]
fn a_state_directory_that_cannot_be_written_exits_8_with_a_hint() {
    let context = TestContext::new();
    let state = under_a_file(context.home(), "state");
    let mut command = context.kpack_get(&["update"]);
    command.env("KPACK_GET_STATE_DIR", &state);

    let (code, stderr) = failure(&mut command);

    assert_eq!(code, 8, "{stderr}");
    assert!(
        stderr.contains("hint: choose a state directory you may write"),
        "{stderr}"
    );
}

#[test]
fn a_failed_install_creates_no_prefix() {
    let context = TestContext::new();
    let prefix = context.home().join("new-prefix");
    let at = prefix.to_str().unwrap();

    // A typo in the package's name.
    let (code, stderr) = failure(
        &mut context.kpack_get(&["--prefix", at, "--target", TARGET, "install", "rocm-rnd"]),
    );
    assert_eq!(code, 6, "{stderr}");
    assert!(!prefix.exists(), "{stderr}");

    // No repository configured.
    let (code, stderr) = failure(context.env.command().args([
        "--prefix",
        at,
        "--target",
        TARGET,
        "install",
        "rocm-rand",
    ]));
    assert_eq!(code, 3, "{stderr}");
    assert!(!prefix.exists(), "{stderr}");

    // What succeeds makes it.
    success(&mut context.kpack_get(&["--prefix", at, "--target", TARGET, "install", "rocm-rand"]));
    assert!(prefix.join(".kpack/installed.toml").is_file());
}

#[test]
fn readers_never_pair_a_root_with_another_roots_signature() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let context = TestContext::private();
    // The root and the shard, kept for the readers.
    success(&mut context.kpack_get(&["info", "rocm-rand"]));
    let done = AtomicBool::new(false);
    let read = || {
        (0..40)
            .map(|_| output(&mut context.kpack_get(&["--offline", "info", "rocm-rand"])))
            .filter(|out| !out.status.success())
            .map(|out| describe(&out))
            .collect::<Vec<String>>()
    };
    let (updates, failed) = std::thread::scope(|scope| {
        let updater = scope.spawn(|| {
            let mut updates = 0;
            while !done.load(Ordering::SeqCst) {
                // A new root (the next version), signed, then fetched.
                publish_shards(&context.repo, &[]);
                success(&mut context.kpack_get(&["update"]));
                updates += 1;
            }
            updates
        });
        let readers: Vec<_> = (0..4).map(|_| scope.spawn(read)).collect();
        let failed: Vec<String> = readers
            .into_iter()
            .flat_map(|reader| reader.join().unwrap())
            .collect();
        done.store(true, Ordering::SeqCst);
        (updater.join().unwrap(), failed)
    });
    assert!(updates >= 10, "{updates} updates");
    assert!(
        failed.is_empty(),
        "{} of 160 readers failed: {}",
        failed.len(),
        failed[0]
    );
}

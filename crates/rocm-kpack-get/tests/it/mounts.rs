//! A prefix with another file system mounted inside it: a change whose
//! files would be renamed across the mount is refused before its journal,
//! naming the mount, and the prefix stays usable; nothing is left for
//! every later run to retry.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{describe, output, stderr, success};
use kpack_test_support::context::TestContext;

const TARGET: &str = "gfx90a:sramecc+:xnack-";

/// A tmpfs mounted at a directory until dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs at `at` (created); fails the test when it cannot.
    fn mount(at: &Path) -> Tmpfs {
        fs_err::create_dir_all(at).unwrap();
        let out = output(
            Command::new("mount")
                .args(["-t", "tmpfs", "kpack-test"])
                .arg(at),
        );
        assert!(
            out.status.success(),
            "this test mounts a tmpfs (as root, with mount permitted): {}",
            describe(&out)
        );
        Tmpfs(at.to_owned())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_mount_point_in_the_prefix_refuses_the_change_before_its_journal() {
    let context = TestContext::new();
    let prefix = &context.env.prefix;
    fs_err::create_dir_all(prefix.join(".kpack")).unwrap();
    let mount = Tmpfs::mount(&prefix.join("lib"));
    let install = || {
        output(&mut context.kpack_get(&[
            "--no-progress",
            "--target",
            TARGET,
            "install",
            "rocm-rand",
        ]))
    };
    let out = install();
    assert!(!out.status.success(), "{}", describe(&out));
    insta::assert_snapshot!(context.transcript(&out));
    let refused = format!("{} is not on the mount of", prefix.join("lib").display());
    assert!(stderr(&out).contains(&refused), "{}", describe(&out));
    assert!(
        !prefix.join(".kpack/transaction.toml").exists(),
        "no journal"
    );
    assert!(!prefix.join(".kpack/staging").exists(), "no staging");
    // Not wedged: reading and writing commands run; without the mount the
    // install goes through.
    success(context.env.command().arg("list"));
    success(context.env.command().arg("verify"));
    drop(mount);
    // A bind mount of a directory of the same file system: renames across
    // it fail just the same.
    let elsewhere = context.env.home.path().join("elsewhere");
    fs_err::create_dir_all(&elsewhere).unwrap();
    let bind = BindMount::mount(&elsewhere, &prefix.join("lib"));
    let out = install();
    assert!(stderr(&out).contains(&refused), "{}", describe(&out));
    assert!(
        !prefix.join(".kpack/transaction.toml").exists(),
        "no journal"
    );
    drop(bind);
    let out = install();
    assert!(out.status.success(), "{}", describe(&out));
    success(context.env.command().arg("verify"));
}

/// A file bind-mounted over until dropped.
struct BindMount(PathBuf);

impl BindMount {
    fn mount(source: &Path, at: &Path) -> BindMount {
        let out = output(Command::new("mount").arg("--bind").arg(source).arg(at));
        assert!(
            out.status.success(),
            "this test bind-mounts a file (as root, with mount permitted): {}",
            describe(&out)
        );
        BindMount(at.to_owned())
    }
}

impl Drop for BindMount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_file_mounted_over_is_found_before_a_remove_commits() {
    let context = TestContext::new();
    let prefix = &context.env.prefix;
    success(&mut context.kpack_get(&["--no-progress", "--target", TARGET, "install", "rocm-rand"]));
    let library = prefix.join("lib/librocrand.so.1.1");
    let other = context.env.home.path().join("other.so");
    fs_err::write(&other, b"someone else's\n").unwrap();
    let mount = BindMount::mount(&other, &library);
    let out = output(
        context
            .env
            .command()
            .args(["--no-progress", "remove", "rocm-rand"]),
    );
    assert!(!out.status.success(), "{}", describe(&out));
    assert!(
        stderr(&out).contains(&format!("{} is a mount point", library.display())),
        "{}",
        describe(&out)
    );
    assert!(
        !prefix.join(".kpack/transaction.toml").exists(),
        "no journal"
    );
    success(context.env.command().arg("list"));
    drop(mount);
    success(
        context
            .env
            .command()
            .args(["--no-progress", "remove", "rocm-rand"]),
    );
    success(context.env.command().arg("verify"));
}

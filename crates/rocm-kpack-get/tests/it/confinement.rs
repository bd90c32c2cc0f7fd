//! A prefix holds against hostile packages: whatever a signed package
//! ships (chained links, paths through links, kpack-get's own bookkeeping,
//! files under files, bytes that are no archive), nothing outside the
//! prefix is created, changed or removed, every refusal comes before the
//! commit point, and the prefix stays usable.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::process::Output;

use crate::common::hostile::{deep, publish_forged, publish_tree, tree, zero_bomb, Entry, Forged};
use crate::common::{describe, output, snapshot, success};
use kpack_test_support::context::TestContext;
use kpack_test_support::measure::limit_open_files;

const TARGET: &str = "gfx90a:sramecc+:xnack-";
const JOURNAL: &str = ".kpack/transaction.toml";

/// A test's environment with a private repository and a directory
/// outside the prefix holding what an attacker would aim at.
struct Rig {
    context: TestContext,
    work: std::path::PathBuf,
}

impl std::ops::Deref for Rig {
    type Target = TestContext;

    fn deref(&self) -> &TestContext {
        &self.context
    }
}

impl Rig {
    fn new() -> Rig {
        let context = TestContext::private();
        let env = &context.env;
        let work = env.home.path().join("work");
        fs_err::create_dir_all(&work).unwrap();
        let outside = env.home.path().join("outside");
        fs_err::create_dir_all(&outside).unwrap();
        fs_err::write(outside.join("authorized_keys"), b"ssh-ed25519 AAAA owner\n").unwrap();
        let elsewhere = env.home.path().join("elsewhere/outside");
        fs_err::create_dir_all(&elsewhere).unwrap();
        fs_err::write(elsewhere.join("planted"), b"a file that was here first\n").unwrap();
        Rig { context, work }
    }

    /// Publishes a host tree of `entries` as `name` `version`.
    fn publish(&self, name: &str, version: &str, entries: &[Entry]) {
        publish_tree(&self.repo, &self.work, name, version, &tree(entries));
    }

    /// `kpack-get ARGS` against the repository, for a gfx90a.
    fn run(&self, args: &[&str]) -> Output {
        let mut command = self.kpack_get(&["--no-progress", "--target", TARGET]);
        output(command.args(args))
    }

    /// `kpack-get ARGS` with at most `files` open files.
    fn run_limited(&self, files: u64, args: &[&str]) -> Output {
        let mut command = self.kpack_get(&["--no-progress", "--target", TARGET]);
        output(limit_open_files(command.args(args), files))
    }

    /// Everything under the test's home except the prefix and kpack-get's
    /// own cache and state: what a package must never touch.
    fn outside(&self) -> BTreeMap<String, String> {
        let mut tree = snapshot(self.env.home.path());
        tree.retain(|path, _| {
            !["prefix", "cache", "state", "work", "config"]
                .iter()
                .any(|own| path == own || path.starts_with(&format!("{own}/")))
        });
        tree
    }

    /// The prefix as a change leaves it (the lock file aside).
    fn prefix(&self) -> BTreeMap<String, String> {
        let mut tree = snapshot(&self.env.prefix);
        tree.remove(".kpack/.lock");
        tree
    }

    /// `kpack-get ARGS`, which must succeed.
    fn ok(&self, args: &[&str]) {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?}: {}", describe(&out));
    }

    fn assert_usable(&self) {
        assert!(!self.env.prefix.join(JOURNAL).exists(), "no journal left");
        success(self.env.command().arg("verify"));
        success(self.env.command().arg("list"));
    }
}

/// `a/b -> ..`, then `up1 -> a/b/..` and `upN -> up(N-1)/..`: each link
/// looks inside on its own; `upN` resolves N levels above the tree.
fn link_chain(levels: usize) -> Vec<Entry> {
    let mut entries = vec![
        Entry::dir("a/"),
        Entry::link("a/b", ".."),
        Entry::link("up1", "a/b/.."),
    ];
    for level in 2..=levels {
        entries.push(Entry::link(
            &format!("up{level}"),
            &format!("up{}/..", level - 1),
        ));
    }
    entries
}

#[test]
fn a_kpack_artifact_placed_through_chained_links_replaces_nothing_outside() {
    let rig = Rig::new();
    // Staged four levels below the prefix, five links up reach the home. A
    // valid archive, so that where it goes is all that is wrong with it.
    let archive = crate::common::installed_bytes(&rig.repo.dir, crate::common::ENCODED_ARCHIVE);
    publish_forged(
        &rig.repo,
        "hostile",
        "1.0.0",
        &[
            Forged::tree("host.tar.zst", tree(&link_chain(5))),
            Forged::kpack("keys.kpack", archive, "up5/outside/authorized_keys"),
        ],
    );
    let outside = rig.outside();
    let out = rig.run(&["install", "hostile"]);
    assert_eq!(rig.outside(), outside, "{}", describe(&out));
    insta::assert_snapshot!(rig.transcript(&out));
    assert_eq!(
        fs_err::read(rig.env.home.path().join("outside/authorized_keys")).unwrap(),
        b"ssh-ed25519 AAAA owner\n"
    );
    assert!(rig.prefix().keys().all(|p| p.starts_with(".kpack")));
    rig.assert_usable();
}

#[test]
fn a_kpack_artifact_that_is_no_archive_is_refused() {
    let rig = Rig::new();
    publish_forged(
        &rig.repo,
        "not-an-archive",
        "1.0.0",
        &[Forged::kpack(
            "keys.kpack",
            b"ssh-ed25519 AAAA attacker\n".to_vec(),
            ".kpack/keys.kpack",
        )],
    );
    let out = rig.run(&["install", "not-an-archive"]);
    insta::assert_snapshot!(rig.transcript(&out));
    assert!(!rig.env.prefix.join(".kpack/keys.kpack").exists());
    rig.assert_usable();
}

#[test]
fn links_chained_across_packages_never_lead_a_later_write_or_remove_outside() {
    let rig = Rig::new();
    // Inside on their own: up1 is the home, one level above the prefix.
    rig.publish("chain", "1.0.0", &link_chain(1));
    rig.publish(
        "later",
        "1.0.0",
        &[Entry::file("up1/outside/planted", b"planted\n")],
    );
    // Re-pointed at a directory where a file by the same name was first.
    rig.publish(
        "chain",
        "2.0.0",
        &[
            Entry::dir("a/"),
            Entry::link("a/b", ".."),
            Entry::link("up1", "a/b/../elsewhere"),
        ],
    );
    let outside = rig.outside();
    let steps: [&[&str]; 5] = [
        &["install", "chain@1.0.0"],
        &["install", "later"],
        &["install", "chain@2.0.0"],
        &["remove", "later"],
        &["remove", "chain"],
    ];
    let mut transcripts = Vec::new();
    for step in steps {
        let out = rig.run(step);
        transcripts.push(format!(
            "$ kpack-get {}\n{}",
            step.join(" "),
            rig.transcript(&out)
        ));
        assert_eq!(rig.outside(), outside, "{step:?}: {}", describe(&out));
        rig.assert_usable();
    }
    // The chain is refused for where its link leads, not its text.
    insta::assert_snapshot!(transcripts.join("\n"));
}

#[test]
fn a_directory_swapped_for_a_link_is_not_followed_by_remove() {
    let rig = Rig::new();
    rig.publish(
        "data",
        "1.0.0",
        &[Entry::file("outside/planted", b"the package's\n")],
    );
    rig.ok(&["install", "data"]);
    // Someone replaces the package's directory with a link out.
    let dir = rig.env.prefix.join("outside");
    fs_err::remove_dir_all(&dir).unwrap();
    fs_err::os::unix::fs::symlink(rig.env.home.path().join("elsewhere/outside"), &dir).unwrap();
    let outside = rig.outside();
    let out = rig.run(&["remove", "data"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(rig.outside(), outside);
    assert!(
        fs_err::symlink_metadata(&dir).unwrap().is_symlink(),
        "the link is left"
    );
}

#[test]
fn kpack_gets_own_bookkeeping_cannot_be_shipped() {
    let rig = Rig::new();
    rig.publish("base", "1.0.0", &[Entry::file("share/base.txt", b"base\n")]);
    let journal = "format = 1\nid = \"1-1\"\ndeletes = [\"share/base.txt\"]\n";
    let trees: [(&str, &str); 4] = [
        ("ships-journal", JOURNAL),
        ("ships-record", ".kpack/installed.toml"),
        ("ships-staging", ".kpack/staging/1-1/installed.toml"),
        ("ships-archive", ".kpack/extra.kpack"),
    ];
    for (name, path) in trees {
        rig.publish(name, "1.0.0", &[Entry::file(path, journal.as_bytes())]);
    }
    let installs: [(&str, &str); 3] = [
        ("places-journal", JOURNAL),
        ("places-lock", ".kpack/.lock"),
        ("places-nested", ".kpack/staging/x.kpack"),
    ];
    let archive = crate::common::installed_bytes(&rig.repo.dir, crate::common::ENCODED_ARCHIVE);
    for (name, install_as) in installs {
        publish_forged(
            &rig.repo,
            name,
            "1.0.0",
            &[Forged::kpack("a.kpack", archive.clone(), install_as)],
        );
    }
    rig.ok(&["install", "base"]);
    let before = rig.prefix();
    for name in trees.iter().chain(&installs).map(|(name, _)| *name) {
        let out = rig.run(&["install", name]);
        insta::assert_snapshot!(name, rig.transcript(&out));
        assert_eq!(rig.prefix(), before, "{name}");
        rig.assert_usable();
        // The next change runs as usual.
        rig.ok(&["install", "base"]);
    }
    assert!(rig.env.prefix.join("share/base.txt").exists());
}

#[test]
fn conflicts_with_files_in_the_prefix_are_found_before_the_commit_point() {
    let rig = Rig::new();
    // The user's own file, where a package wants a directory.
    fs_err::create_dir_all(rig.env.prefix.join("share")).unwrap();
    fs_err::write(rig.env.prefix.join("share/notes"), b"mine\n").unwrap();
    let cases: [(&str, Entry, &str); 3] = [
        (
            "under-a-package-file",
            Entry::file("lib/librocrand.so.1.1/x", b"x\n"),
            "lib/librocrand.so.1.1",
        ),
        (
            "under-a-user-file",
            Entry::file("share/notes/x", b"x\n"),
            "share/notes",
        ),
        ("file-over-a-directory", Entry::file("lib", b"x\n"), "lib"),
    ];
    for (name, entry, _) in &cases {
        rig.publish(name, "1.0.0", std::slice::from_ref(entry));
    }
    rig.ok(&["install", "rocm-rand"]);
    let before = rig.prefix();
    for (name, _, _) in &cases {
        let out = rig.run(&["install", name]);
        insta::assert_snapshot!(*name, rig.transcript(&out));
        assert_eq!(rig.prefix(), before, "{name}");
        rig.assert_usable();
    }
    // Not wedged: the prefix changes as usual afterwards.
    rig.ok(&["remove", "rocm-rand"]);
    let out = rig.run(&["install", "under-a-package-file"]);
    assert!(out.status.success(), "{}", describe(&out));
}

#[test]
fn a_tree_bomb_stops_at_its_unpack_limit_and_leaves_nothing() {
    let rig = Rig::new();
    // 256 MiB of zeros in a few KiB: past the 64 MiB floor a shard without
    // an unpacked size gets, and past the 4 KiB a lying one declares.
    let bomb = zero_bomb(256 << 20);
    assert!(bomb.len() < 64 << 10, "{}", bomb.len());
    publish_forged(
        &rig.repo,
        "old-shard-bomb",
        "1.0.0",
        &[Forged::tree("bomb.tar.zst", bomb.clone())],
    );
    publish_forged(
        &rig.repo,
        "lying-bomb",
        "1.0.0",
        &[Forged::tree("bomb.tar.zst", bomb).with_field("unpacked-size = 4096")],
    );
    for name in ["old-shard-bomb", "lying-bomb"] {
        let out = rig.run(&["install", name]);
        insta::assert_snapshot!(name, rig.transcript(&out));
        assert!(
            rig.prefix().keys().all(|p| p.starts_with(".kpack")),
            "{name}: {:?}",
            rig.prefix()
        );
        assert!(!rig.env.prefix.join(".kpack/staging").exists(), "{name}");
        rig.assert_usable();
    }
}

#[test]
fn a_tree_whose_first_entry_is_a_top_level_file_installs() {
    let rig = Rig::new();
    let dir = rig.work.join("licensed");
    fs_err::create_dir_all(dir.join("share/doc")).unwrap();
    fs_err::write(dir.join("LICENSE"), b"MIT\n").unwrap();
    fs_err::write(dir.join("share/doc/README"), b"read me\n").unwrap();
    kpack_test_support::run(
        std::process::Command::new(crate::common::kpack_repo_exe())
            .arg("add")
            .arg(&rig.repo.dir)
            .args(["licensed", "1.0.0"])
            .arg(&dir)
            .arg("--key")
            .arg(&rig.repo.secret_key),
    );
    let out = rig.run(&["install", "licensed"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        fs_err::read(rig.env.prefix.join("LICENSE")).unwrap(),
        b"MIT\n"
    );
    rig.assert_usable();
}

#[test]
fn group_and_other_write_bits_are_masked_and_setuid_stripped() {
    let rig = Rig::new();
    rig.publish(
        "modes",
        "1.0.0",
        &[
            Entry::dir("open/").with_mode(0o777),
            Entry::file("open/data", b"data\n").with_mode(0o666),
            Entry::file("open/tool", b"#!/bin/sh\n").with_mode(0o4777),
        ],
    );
    let out = rig.run(&["install", "modes"]);
    assert!(out.status.success(), "{}", describe(&out));
    let mode = |path: &str| {
        fs_err::metadata(rig.env.prefix.join(path))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("open/data") & 0o022, 0, "{:o}", mode("open/data"));
    assert_eq!(mode("open/tool"), 0o755);
    assert_eq!(mode("open") & 0o022, 0, "{:o}", mode("open"));
}

#[test]
fn paths_too_deep_or_too_long_are_refused_at_staging_and_leave_nothing() {
    let rig = Rig::new();
    // 1,100 levels, as entries one level at a time and as one entry.
    rig.publish("deep", "1.0.0", &deep(1100));
    rig.publish("one-deep-entry", "1.0.0", &[Entry::dir(&"d/".repeat(1100))]);
    // 257 levels: one past the bound.
    rig.publish("just-too-deep", "1.0.0", &deep(257));
    // 20 names of 250 bytes: 5,019 bytes, past PATH_MAX.
    let long = vec!["n".repeat(250); 20].join("/");
    rig.publish("long-path", "1.0.0", &[Entry::file(&long, b"x\n")]);
    let name = format!("lib/{}", "n".repeat(256));
    rig.publish("long-name", "1.0.0", &[Entry::file(&name, b"x\n")]);
    rig.ok(&["install", "rocm-rand"]);
    let before = rig.prefix();
    for package in [
        "deep",
        "one-deep-entry",
        "just-too-deep",
        "long-path",
        "long-name",
    ] {
        // A user's usual limit of open files.
        let out = rig.run_limited(1024, &["install", package]);
        insta::assert_snapshot!(package, rig.transcript(&out));
        assert_eq!(rig.prefix(), before, "{package}");
        assert!(
            !rig.env.prefix.join(".kpack/staging").exists(),
            "{package}: staging left"
        );
        rig.assert_usable();
        let out = rig.run_limited(1024, &["remove", "rocm-rand"]);
        assert!(out.status.success(), "{package}: {}", describe(&out));
        rig.ok(&["install", "rocm-rand"]);
    }
}

#[test]
fn a_tree_256_levels_deep_installs_upgrades_and_removes_with_64_open_files() {
    let rig = Rig::new();
    rig.publish("deep", "1.0.0", &deep(256));
    let mut second = deep(255);
    second.push(Entry::file("share/deep.txt", b"two\n"));
    rig.publish("deep", "2.0.0", &second);
    for step in [
        &["install", "deep@1.0.0"][..],
        &["install", "deep@2.0.0"],
        &["remove", "deep"],
    ] {
        let out = rig.run_limited(64, step);
        assert!(out.status.success(), "{step:?}: {}", describe(&out));
        assert!(!rig.env.prefix.join(".kpack/staging").exists(), "{step:?}");
        rig.assert_usable();
    }
    assert!(
        rig.prefix().keys().all(|p| p.starts_with(".kpack")),
        "{:?}",
        rig.prefix().keys().take(3).collect::<Vec<_>>()
    );
}

#[test]
fn an_upgrade_turns_a_directory_into_a_link_and_removing_leaves_nothing() {
    let rig = Rig::new();
    rig.publish(
        "layout",
        "1.0.0",
        &[
            Entry::file("lib/libx.so", b"one\n"),
            Entry::file("lib/sub/data", b"one\n"),
        ],
    );
    rig.publish(
        "layout",
        "2.0.0",
        &[
            Entry::file("lib64/libx.so", b"two\n"),
            Entry::link("lib", "lib64"),
        ],
    );
    rig.publish(
        "layout",
        "3.0.0",
        &[
            Entry::file("lib/libx.so", b"three\n"),
            Entry::file("lib/sub/data", b"three\n"),
        ],
    );
    rig.ok(&["install", "layout@1.0.0"]);
    let out = rig.run(&["install", "layout@2.0.0"]);
    assert!(out.status.success(), "{}", describe(&out));
    let lib = rig.env.prefix.join("lib");
    assert_eq!(
        fs_err::read_link(&lib).unwrap(),
        std::path::Path::new("lib64")
    );
    assert_eq!(fs_err::read(lib.join("libx.so")).unwrap(), b"two\n");
    rig.assert_usable();
    // And back: the link becomes a directory again.
    rig.ok(&["install", "layout@3.0.0"]);
    assert!(fs_err::symlink_metadata(&lib).unwrap().is_dir());
    assert!(!rig.env.prefix.join("lib64").exists());
    rig.assert_usable();
    rig.ok(&["remove", "layout"]);
    assert!(
        rig.prefix().keys().all(|p| p.starts_with(".kpack")),
        "{:?}",
        rig.prefix()
    );
    // A directory the user made is never the package's to replace.
    fs_err::create_dir_all(rig.env.prefix.join("lib")).unwrap();
    rig.ok(&["install", "layout@1.0.0"]);
    let before = rig.prefix();
    let out = rig.run(&["install", "layout@2.0.0"]);
    insta::assert_snapshot!(rig.transcript(&out));
    assert_eq!(rig.prefix(), before);
    rig.assert_usable();
}

#[test]
fn removing_everything_leaves_no_directory_a_package_made() {
    let rig = Rig::new();
    // A file that becomes a directory in an upgrade.
    rig.publish("grows", "1.0.0", &[Entry::file("share/grows", b"one\n")]);
    rig.publish(
        "grows",
        "2.0.0",
        &[Entry::file("share/grows/two", b"two\n")],
    );
    // A directory made by one package that another puts files in.
    rig.publish("maker", "1.0.0", &[Entry::file("etc/maker/a", b"a\n")]);
    rig.publish("guest", "1.0.0", &[Entry::file("etc/maker/guest", b"g\n")]);
    for step in [
        &["install", "grows@1.0.0"][..],
        &["install", "grows@2.0.0"],
        &["install", "maker"],
        &["install", "guest"],
        &["remove", "maker"],
        &["remove", "grows"],
        &["remove", "guest"],
    ] {
        rig.ok(step);
        rig.assert_usable();
    }
    assert!(
        rig.prefix().keys().all(|p| p.starts_with(".kpack")),
        "{:?}",
        rig.prefix()
    );
}

/// Installs, upgrades and removes generated trees of directories, files
/// and links (relative and absolute, chained, through a link the user made
/// that leads out) into a prefix inside a temporary root, in any order:
/// nothing outside the prefix is ever created, changed or deleted, and
/// after every step the prefix verifies, whether the step was refused or
/// not.
mod property {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use kpack_repo_index::{Artifact, ArtifactKind, Sha256};
    use proptest::prelude::*;
    use rocm_kpack_get::install::{PackageInstall, Prefix, ReadyArtifact};

    use crate::common::hostile::{tree, Entry};
    use crate::common::snapshot;

    /// Names paths are made of: plain ones, kpack-get's own, and the
    /// user's link out of the prefix.
    const NAMES: &[&str] = &["a", "b", "lib", ".kpack", "out"];
    /// What link targets are made of.
    const STEPS: &[&str] = &["a", "b", "lib", "..", ".", "out", ".kpack"];

    fn path() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(NAMES), 1..4).prop_map(|parts| parts.join("/"))
    }

    /// Targets that each look inside from most places but lead out when
    /// chained: the attacks a generator rarely finds by chance.
    const GADGETS: &[&str] = &[
        "..", "a/..", "a/b/..", "b/../..", "lib/a/..", "out/a", "a/b",
    ];

    fn target() -> impl Strategy<Value = String> {
        let made = (
            any::<bool>(),
            prop::collection::vec(prop::sample::select(STEPS), 1..5),
        )
            .prop_map(|(absolute, parts)| {
                let text = parts.join("/");
                if absolute {
                    format!("/{text}")
                } else {
                    text
                }
            });
        prop_oneof![made, prop::sample::select(GADGETS).prop_map(str::to_owned),]
    }

    fn entry() -> impl Strategy<Value = Entry> {
        prop_oneof![
            path().prop_map(|p| Entry::dir(&format!("{p}/"))),
            (path(), any::<u8>()).prop_map(|(p, byte)| Entry::file(&p, &[byte; 3])),
            (path(), target()).prop_map(|(p, t)| Entry::link(&p, &t)),
        ]
    }

    /// Paths around the depth bound (256 levels), some past it.
    fn deep_path() -> impl Strategy<Value = String> {
        (250..262usize, prop::sample::select(&["a", "b", "lib"][..]))
            .prop_map(|(levels, name)| vec![name; levels].join("/"))
    }

    /// A version's entries: generated, a layout that turns `lib/` into a
    /// link to `lib64` (or back) within one upgrade, or (rarely: each costs
    /// a flush per directory) a file around the depth bound.
    fn entries() -> impl Strategy<Value = Vec<Entry>> {
        prop_oneof![
            32 => prop::collection::vec(entry(), 1..6),
            1 => (deep_path(), prop::collection::vec(entry(), 0..3)).prop_map(|(deep, mut more)| {
                more.push(Entry::file(&deep, b"deep"));
                more
            }),
            4 => any::<u8>().prop_map(|byte| vec![
                Entry::file("lib64/x.so", &[byte; 3]),
                Entry::link("lib", "lib64"),
            ]),
            4 => any::<u8>().prop_map(|byte| vec![
                Entry::file("lib/x.so", &[byte; 3]),
                Entry::file("lib/sub/y", &[byte; 3]),
            ]),
        ]
    }

    /// A step: install version `version` of package `package` (a tree of
    /// entries), or remove it.
    #[derive(Debug, Clone)]
    enum Step {
        Install { package: usize, entries: Vec<Entry> },
        Remove { package: usize },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => (0..3usize, entries())
                .prop_map(|(package, entries)| Step::Install { package, entries }),
            1 => (0..3usize).prop_map(|package| Step::Remove { package }),
        ]
    }

    /// Everything in `root` but the prefix.
    fn outside(root: &Path) -> BTreeMap<String, String> {
        let mut tree = snapshot(root);
        tree.retain(|path, _| path != "prefix" && !path.starts_with("prefix/"));
        tree.retain(|path, _| path != "blobs" && !path.starts_with("blobs/"));
        tree
    }

    fn install(blobs: &Path, package: usize, version: u64, entries: &[Entry]) -> PackageInstall {
        let bytes = tree(entries);
        let blob = blobs.join(format!("{package}-{version}.tar.zst"));
        fs_err::write(&blob, &bytes).unwrap();
        PackageInstall {
            name: format!("p{package}").parse().unwrap(),
            version: semver::Version::new(version, 0, 0),
            repo: "rocm".into(),
            repo_version: 1,
            targets: Vec::new(),
            layout: rocm_kpack_get::layout::Layout::Kpack,
            artifacts: vec![ReadyArtifact::new(
                Artifact {
                    kind: ArtifactKind::Tree,
                    component: None,
                    path: format!("pool/p{package}/{version}/host.tar.zst")
                        .parse()
                        .unwrap(),
                    install_as: None,
                    targets: None,
                    owner: None,
                    sha256: Sha256::of(&bytes),
                    size: bytes.len() as u64,
                    encoding: None,
                    decoded_sha256: None,
                    decoded_size: None,
                    unpacked_size: Some(1 << 20),
                },
                blob,
            )],
        }
    }

    fn run(steps: &[Step]) -> Result<(), TestCaseError> {
        let root = tempfile::tempdir().unwrap();
        let prefix_path: PathBuf = root.path().join("prefix");
        let blobs = root.path().join("blobs");
        fs_err::create_dir_all(&blobs).unwrap();
        fs_err::create_dir_all(root.path().join("a/b")).unwrap();
        fs_err::write(root.path().join("a/b/victim"), b"keep").unwrap();
        fs_err::write(root.path().join("lib"), b"keep").unwrap();
        let prefix = Prefix::open(&prefix_path, true).unwrap();
        // The user's own link, out of the prefix.
        fs_err::os::unix::fs::symlink("..", prefix_path.join("out")).unwrap();
        let lock = prefix.lock(false, |_| {}).unwrap();
        let before = outside(root.path());
        for (version, step) in steps.iter().enumerate() {
            let result = match step {
                Step::Install { package, entries } => {
                    let install = install(&blobs, *package, version as u64 + 1, entries);
                    prefix.apply(&lock, &[install], &[])
                }
                Step::Remove { package } => {
                    let name = format!("p{package}").parse().unwrap();
                    if !prefix.record().unwrap().packages.contains_key(&name) {
                        continue;
                    }
                    prefix.apply(&lock, &[], &[name])
                }
            };
            prop_assert_eq!(&outside(root.path()), &before, "{:?}: {:?}", step, result);
            prop_assert_eq!(
                prefix.change().unwrap(),
                rocm_kpack_get::install::PrefixChange::None,
                "{:?}",
                result
            );
            let (_, mismatches) = prefix.verify().unwrap();
            prop_assert!(
                mismatches.is_empty(),
                "{:?}: {:?}: {:?}",
                step,
                result,
                mismatches
            );
        }
        // Removing everything leaves no directory a package made.
        let all: Vec<_> = prefix.record().unwrap().packages.into_keys().collect();
        if !all.is_empty() {
            let result = prefix.apply(&lock, &[], &all);
            prop_assert!(result.is_ok(), "{:?}", result);
        }
        let mut left = snapshot(&prefix_path);
        left.retain(|path, _| path != "out" && path != ".kpack" && !path.starts_with(".kpack/"));
        prop_assert!(
            left.is_empty(),
            "left after removing everything: {:?}",
            left
        );
        prop_assert_eq!(&outside(root.path()), &before);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 512,
            ..ProptestConfig::default()
        })]
        #[test]
        fn nothing_outside_the_prefix_changes_and_the_prefix_always_verifies(
            steps in prop::collection::vec(step(), 1..7)
        ) {
            run(&steps)?;
        }
    }
}

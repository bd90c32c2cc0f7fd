//! Declared sizes bound every expansion: a kpack archive whose table of
//! contents lists more code than its shard declares (`unpacked-size`),
//! or for a shard without it more than 256 times its size and at least
//! 64 MiB, is refused by name before anything is written, and neither
//! memory nor disk grows by more than 64 MiB over a good run.

use std::process::Command;
use std::time::Duration;

use crate::common::hostile::edit_published;
use crate::common::{describe, kpack_repo_exe, pool, snapshot, stderr};
use kpack_test_support::context::TestContext;
use kpack_test_support::measure::{disk_use, run_watched_on_disk, DiskWatch, Measured};
use kpack_test_support::{zero_bomb_archive, GFX90A_VARIANTS};

const TARGET: &str = "gfx90a:sramecc+:xnack-";
const MIB: u64 = 1 << 20;

/// `kpack-get --layout fat --target TARGET install NAME` in `context`,
/// watched: killed past 1 GiB of memory or of growth of its home. Returns
/// the run and how much the home grew at most.
fn install_fat(context: &TestContext, name: &str) -> (Measured, u64) {
    let mut command: Command = context.kpack_get(&[
        "--no-progress",
        "--layout",
        "fat",
        "--target",
        TARGET,
        "install",
        name,
    ]);
    let home = context.home();
    let before = disk_use(home);
    let watch = DiskWatch {
        dir: home,
        limit: before + 1024 * MIB,
    };
    let run = run_watched_on_disk(
        &mut command,
        Duration::from_secs(300),
        1024 * MIB,
        Some(watch),
    );
    let grown = run.peak_disk.saturating_sub(before);
    (run, grown)
}

/// Publishes `bomb` 1.0.0 with the real `kpack-repo add`: rocm-rand's host
/// tree and `rocrand_gfx90a.kpack`, a 9 KiB archive whose TOC lists the
/// nine feature variants of gfx90a for the library's bundle, each pointing
/// at one zstd frame of 256 MiB of zeros (2.25 GiB in all).
fn publish_bomb(context: &TestContext) {
    let work = context.home().join("work");
    fs_err::create_dir_all(&work).unwrap();
    let pool_file = |file: &str| context.repo.dir.join(pool(file));
    let real = rocm_kpack::Archive::from_bytes(
        "rocrand_gfx90a.kpack",
        &crate::common::installed_bytes(&context.repo.dir, crate::common::ENCODED_ARCHIVE),
    )
    .unwrap();
    let keys: Vec<&str> = real.binaries().collect();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let bomb = zero_bomb_archive(keys[0], &GFX90A_VARIANTS, 256 * MIB);
    assert!(bomb.len() < 16 << 10, "{}", bomb.len());
    fs_err::write(work.join("rocrand_gfx90a.kpack"), &bomb).unwrap();
    let host = work.join(crate::common::HOST_TREE);
    fs_err::copy(pool_file(crate::common::HOST_TREE), &host).unwrap();
    kpack_test_support::run(
        Command::new(kpack_repo_exe())
            .arg("add")
            .arg(&context.repo.dir)
            .args(["bomb", "1.0.0"])
            // Served as it is: what kpack-get does with the archive is
            // under test, not the publisher's decoding of it.
            .arg("--no-transport-encoding")
            .arg(&host)
            .arg(work.join("rocrand_gfx90a.kpack"))
            .arg("--key")
            .arg(&context.repo.secret_key),
    );
}

/// The kpack artifact's `unpacked-size` set to `declared`, or removed (a
/// shard written before it existed).
fn declare(context: &TestContext, declared: Option<u64>) {
    edit_published(&context.repo, "bomb", |artifact| {
        if artifact["kind"].as_str() != Some("kpack") {
            return;
        }
        match declared {
            Some(size) => artifact.insert("unpacked-size".into(), (size as i64).into()),
            None => artifact.remove("unpacked-size"),
        };
    });
}

/// The prefix, made if need be, without kpack-get's lock.
fn bookkept(context: &TestContext) -> std::collections::BTreeMap<String, String> {
    fs_err::create_dir_all(&context.env.prefix).unwrap();
    let mut tree = snapshot(&context.env.prefix);
    tree.remove(".kpack/.lock");
    tree.remove(".kpack");
    tree
}

#[test]
fn a_materialization_bomb_is_refused_in_the_fat_layout_by_its_declared_size() {
    let good = TestContext::new();
    let (good_run, good_disk) = install_fat(&good, "rocm-rand");
    assert!(
        good_run.output.status.success(),
        "{}",
        describe(&good_run.output)
    );

    let context = TestContext::private();
    publish_bomb(&context);
    let archive = "pool/bomb/1.0.0/rocrand_gfx90a.kpack";
    let lists = (9 * 256 * MIB).to_string();
    // A publisher declaring what the index showed (21 MB), and a shard
    // written before archives declared their size.
    for (declared, limit) in [(Some(21 * MIB), 21 * MIB), (None, 64 * MIB)] {
        declare(&context, declared);
        crate::common::success(&mut context.kpack_get(&["update"]));
        let prefix = bookkept(&context);
        let (run, disk) = install_fat(&context, "bomb");
        let out = &run.output;
        let case = format!("declared {declared:?}");
        let growth = run.peak_rss.saturating_sub(good_run.peak_rss);
        eprintln!(
            "{case}: peak RSS {} MiB ({} MiB over a good run), home grew {} MiB (a good run {} MiB)",
            run.peak_rss / MIB,
            growth / MIB,
            disk / MIB,
            good_disk / MIB
        );
        assert_eq!(run.killed, None, "{case}: {}", describe(out));
        assert_eq!(out.status.code(), Some(5), "{case}: {}", describe(out));
        let text = stderr(out);
        for mention in [archive, &lists, &limit.to_string()] {
            assert!(text.contains(mention), "{case}: no {mention:?} in {text}");
        }
        assert!(!text.contains("panicked"), "{case}: {text}");
        assert_eq!(bookkept(&context), prefix, "{case}: the prefix changed");
        assert!(
            !context.env.prefix.join(".kpack/staging").exists(),
            "{case}"
        );
        assert!(growth < 64 * MIB, "{case}: memory grew {growth} bytes");
        assert!(
            disk < good_disk + 64 * MIB,
            "{case}: the home grew {disk} bytes"
        );
    }
}

/// The split library `lib/librocrand.so.1.1` of rocm-rand's host tree.
fn split_library(context: &TestContext) -> Vec<u8> {
    let tree = fs_err::read(context.repo.dir.join(pool(crate::common::HOST_TREE))).unwrap();
    let tar = zstd::decode_all(&tree[..]).unwrap();
    let mut archive = tar::Archive::new(&tar[..]);
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().display().to_string();
        if path.ends_with("lib/librocrand.so.1.1") && entry.header().entry_type().is_file() {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
            return bytes;
        }
    }
    panic!("no lib/librocrand.so.1.1 in the host tree");
}

/// Publishes `copies` 1.0.0 with the real `kpack-repo add`: a host tree of
/// `count` copies of the split library (one marker, so one TOC key), and
/// an archive whose TOC lists one code object of `size` bytes for TARGET,
/// which `kpack-repo` declares honestly (`unpacked-size` = `size`).
fn publish_copies(context: &TestContext, count: usize, size: u64) {
    use crate::common::hostile::{tree, Entry};
    let work = context.home().join("work");
    fs_err::create_dir_all(&work).unwrap();
    let library = split_library(context);
    let mut entries = vec![Entry::dir("lib/")];
    for index in 0..count {
        entries.push(Entry::file(&format!("lib/copy-{index}.so"), &library).with_mode(0o755));
    }
    let host = work.join("copies-1.0.0-host.tar.zst");
    fs_err::write(&host, tree(&entries)).unwrap();
    let archive = zero_bomb_archive("lib/librocrand.so.1.1#0", &[TARGET], size);
    fs_err::write(work.join("rocrand_gfx90a.kpack"), &archive).unwrap();
    kpack_test_support::run(
        Command::new(kpack_repo_exe())
            .arg("add")
            .arg(&context.repo.dir)
            .args(["copies", "1.0.0"])
            .arg("--no-transport-encoding")
            .arg(&host)
            .arg(work.join("rocrand_gfx90a.kpack"))
            .arg("--key")
            .arg(&context.repo.secret_key),
    );
}

/// Copies of one split binary share one marker, so each materializes the
/// same TOC entry: sixteen copies and a code object of 2 MiB, honestly
/// declared, would write 32 MiB, sixteen times what the package declares.
/// One budget per package: refused by name before anything is committed;
/// the same package declaring what its sixteen binaries take installs.
#[test]
fn copies_of_one_split_binary_share_one_budget_in_the_fat_layout() {
    const COPIES: usize = 16;
    const CODE: u64 = 2 * MIB;
    let context = TestContext::private();
    publish_copies(&context, COPIES, CODE);
    crate::common::success(&mut context.kpack_get(&["update"]));
    let prefix = bookkept(&context);
    let (run, _) = install_fat(&context, "copies");
    let out = &run.output;
    assert_eq!(run.killed, None, "{}", describe(out));
    assert_eq!(out.status.code(), Some(5), "{}", describe(out));
    let text = stderr(out);
    let needed = (COPIES as u64 * CODE).to_string();
    for mention in ["copies", "16 split binaries", &needed, &CODE.to_string()] {
        assert!(text.contains(mention), "no {mention:?} in {text}");
    }
    assert_eq!(bookkept(&context), prefix, "the prefix changed");
    assert!(!context.env.prefix.join(".kpack/staging").exists());

    // Declaring what the sixteen take, the package is within its budget.
    edit_published(&context.repo, "copies", |artifact| {
        if artifact["kind"].as_str() == Some("kpack") {
            artifact.insert(
                "unpacked-size".into(),
                ((COPIES as u64 * CODE) as i64).into(),
            );
        }
    });
    crate::common::success(&mut context.kpack_get(&["update"]));
    let (run, _) = install_fat(&context, "copies");
    assert!(run.output.status.success(), "{}", describe(&run.output));
    for index in 0..COPIES {
        let path = context.env.prefix.join(format!("lib/copy-{index}.so"));
        assert_eq!(
            crate::common::fat_targets(&path),
            Some(vec![TARGET.to_owned()]),
            "{path:?}"
        );
    }
}

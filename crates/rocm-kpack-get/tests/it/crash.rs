//! Killing kpack-get at any moment leaves the prefix as it was or as it
//! will be once the next run recovers, never in between; two kpack-get
//! runs on one prefix never interleave.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::common::server::Fault;
use crate::common::{
    describe, output, pool, pool_gets, snapshot, stderr, success, Env, ENCODED_ARCHIVE, HOST_TREE,
};
use kpack_test_support::context::TestContext;
use kpack_test_support::measure::{limit_open_files, run_watched};

const TARGET: &str = "gfx90a:sramecc+:xnack-";
const LIBRARY: &str = "lib/librocrand.so.1.1";
const LINK: &str = "lib/librocrand.so.1";
const ARCHIVE: &str = ".kpack/rocrand_gfx90a.kpack";
const JOURNAL: &str = ".kpack/transaction.toml";
const RECORD: &str = ".kpack/installed.toml";

/// SplitMix64: small, deterministic, good enough to spread delays.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max`.
    fn below(&mut self, max: Duration) -> Duration {
        let micros = u64::try_from(max.as_micros()).unwrap();
        Duration::from_micros(self.next() % (micros + 1))
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

type Tree = BTreeMap<String, String>;

/// The prefix without what may be left of kpack-get's own bookkeeping
/// while no change is decided: the lock file, staging directories, and a
/// `.kpack` directory with nothing else in it.
fn settled(mut tree: Tree, ignore_staging: bool) -> Tree {
    tree.remove(".kpack/.lock");
    if ignore_staging {
        tree.retain(|path, _| path != ".kpack/staging" && !path.starts_with(".kpack/staging/"));
    }
    if !tree.keys().any(|path| path.starts_with(".kpack/")) {
        tree.remove(".kpack");
    }
    tree
}

fn differences(actual: &Tree, expected: &Tree) -> String {
    let mut lines = Vec::new();
    for (path, what) in actual {
        match expected.get(path) {
            None => lines.push(format!("  extra   {path} ({what})")),
            Some(other) if other != what => {
                lines.push(format!("  changed {path} ({what}, expected {other})"))
            }
            Some(_) => {}
        }
    }
    for path in expected.keys() {
        if !actual.contains_key(path) {
            lines.push(format!("  missing {path}"));
        }
    }
    lines.join("\n")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    Install,
    Remove,
    /// Install rocm-rand in this layout for these targets.
    InstallAs(&'static str, &'static str),
}

/// Where the kill lands: a delay after the start, or a delay after the
/// staging directory appeared (aims at staging and the commit).
#[derive(Debug, Clone, Copy)]
enum Aim {
    FromStart(Duration),
    FromStaging(Duration),
}

/// A test context that runs operations to be killed.
struct Rig(TestContext);

impl std::ops::Deref for Rig {
    type Target = TestContext;

    fn deref(&self) -> &TestContext {
        &self.0
    }
}

impl Rig {
    /// A new prefix and the rocRAND repository served over loopback.
    fn new() -> Rig {
        Rig(TestContext::new())
    }

    fn op(&self, op: Op) -> Command {
        match op {
            Op::Install => {
                self.kpack_get(&["--no-progress", "--target", TARGET, "install", "rocm-rand"])
            }
            Op::Remove => {
                let mut command = self.env.command();
                command.args(["--no-progress", "remove", "rocm-rand"]);
                command
            }
            Op::InstallAs(layout, targets) => self.kpack_get(&[
                "--no-progress",
                "--layout",
                layout,
                "--target",
                targets,
                "install",
                "rocm-rand",
            ]),
        }
    }

    /// `kpack-get ARGS` with no repository: for commands on the prefix.
    fn local(&self, args: &[&str]) -> Command {
        let mut command = self.env.command();
        command.args(args);
        command
    }

    fn tree(&self) -> Tree {
        snapshot(&self.env.prefix)
    }

    fn clean_cache(&self) {
        let _ = fs_err::remove_dir_all(&self.env.cache);
    }

    /// Runs `op` to the end; how long it took.
    fn timed(&self, op: Op) -> Duration {
        let started = Instant::now();
        success(&mut self.op(op));
        started.elapsed()
    }

    /// Runs `op`, killing it as `aim` says; how it ended and when.
    fn interrupted(&self, op: Op, aim: Aim) -> (ExitStatus, Duration) {
        let mut child = self
            .op(op)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let staging = self.env.prefix.join(".kpack/staging");
        let mut deadline = match aim {
            Aim::FromStart(delay) => Some(started + delay),
            Aim::FromStaging(_) => None,
        };
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return (status, started.elapsed());
            }
            let now = Instant::now();
            match (deadline, aim) {
                (Some(at), _) if now >= at => break,
                (None, Aim::FromStaging(delay)) if staging.exists() => {
                    deadline = Some(now + delay);
                    continue;
                }
                (None, _) if now > started + Duration::from_secs(60) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("{op:?} never staged anything in a minute")
                }
                _ => {}
            }
            let left = deadline.map_or(Duration::from_micros(100), |at| {
                at.saturating_duration_since(now)
                    .min(Duration::from_micros(500))
            });
            std::thread::sleep(left);
        }
        child.kill().unwrap();
        (child.wait().unwrap(), started.elapsed())
    }
}

/// After an interrupted run, the prefix is as before, as after, or holds a
/// committed change; a reading command reports a decided change and leaves
/// it, and the next command that may write completes it (then the prefix
/// is as after) or discards what was undecided (as before). Which of the
/// three it was.
fn recovered_state(rig: &Rig, before: &Tree, after: &Tree, context: &str) -> &'static str {
    let prefix = &rig.env.prefix;
    let committed = prefix.join(JOURNAL).exists();
    let tree = settled(rig.tree(), true);
    let state = if committed {
        "committed"
    } else if &tree == before {
        "as before"
    } else if &tree == after {
        "as after"
    } else {
        panic!(
            "{context}: neither as before nor as after nor committed:\n\
             against before:\n{}\nagainst after:\n{}",
            differences(&tree, before),
            differences(&tree, after)
        );
    };
    let listed = rig.local(&["list"]).output().unwrap();
    assert!(listed.status.success(), "{context}: list: {listed:?}");
    assert_eq!(
        prefix.join(JOURNAL).exists(),
        committed,
        "{context}: list changed the journal"
    );
    assert_eq!(
        stderr(&listed).contains("interrupted change"),
        committed,
        "{context}: list: {}",
        stderr(&listed)
    );
    // This one then finds nothing to remove.
    let recovering = rig.local(&["remove", "no-such-package"]).output().unwrap();
    assert_eq!(
        recovering.status.code(),
        Some(6),
        "{context}: remove: {}",
        stderr(&recovering)
    );
    let tree = rig.tree();
    assert!(
        !tree.contains_key(".kpack/staging") && !tree.contains_key(JOURNAL),
        "{context}: left after recovery:\n{tree:#?}"
    );
    let recovered = settled(tree, false);
    let expected = if state == "as before" { before } else { after };
    assert_eq!(
        &recovered,
        expected,
        "{context}: {state} after the kill, after recovery:\n{}",
        differences(&recovered, expected)
    );
    state
}

/// How a run ended, for the tally.
fn outcome(killed: bool, state: &str) -> &'static str {
    match (killed, state) {
        (false, _) => "finished before the kill",
        (true, "committed") => "killed: committed, not carried out",
        (true, "as before") => "killed: as before",
        (true, _) => "killed: as after",
    }
}

/// Runs a command that must succeed; `context` says which run it was.
fn must(command: &mut Command, context: &str) {
    let out = output(command);
    assert!(
        out.status.success(),
        "{context}: {command:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The tests of this file one at a time: the kill timings are measured on
/// a machine not also running the other tests' processes.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Installs and removes rocm-rand over and over, killing each run at a
/// different moment; after each kill the prefix is as before, or the change
/// is committed, or it is done; the next command completes or discards it.
#[test]
fn a_killed_install_or_remove_leaves_the_prefix_as_before_or_as_after() {
    let _serial = serial();
    let rig = Rig::new();
    let prefix = &rig.env.prefix;
    fs_err::create_dir_all(prefix.join("lib")).unwrap();
    fs_err::write(prefix.join("lib/user-library.so"), b"not kpack-get's").unwrap();

    // Uninterrupted runs: the states to compare with, and how long each
    // kind of run takes, to spread the kills over.
    let empty = settled(rig.tree(), false);
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    let mut removes = Vec::new();
    for round in 0..3 {
        rig.clean_cache();
        cold.push(rig.timed(Op::Install));
        removes.push(rig.timed(Op::Remove));
        warm.push(rig.timed(Op::Install));
        if round < 2 {
            removes.push(rig.timed(Op::Remove));
        }
    }
    let installed = settled(rig.tree(), false);
    for path in [LIBRARY, ARCHIVE, RECORD] {
        assert!(
            installed.contains_key(path),
            "{path} installed: {installed:#?}"
        );
    }
    assert_eq!(installed[LINK], "-> librocrand.so.1.1");
    assert_eq!(
        installed["lib/user-library.so"],
        empty["lib/user-library.so"]
    );
    success(&mut rig.local(&["verify"]));
    let (cold, warm, remove) = (median(cold), median(warm), median(removes));
    eprintln!("uninterrupted: cold install {cold:?}, warm install {warm:?}, remove {remove:?}");
    // How long each kind of run takes, corrected by the runs that finish
    // before their kill (the machine may be busier or idler than it was).
    let mut durations: BTreeMap<(Op, bool), Duration> = BTreeMap::new();
    durations.insert((Op::Install, false), cold);
    durations.insert((Op::Install, true), warm);
    durations.insert((Op::Remove, true), remove);

    const RUNS: u64 = 40;
    let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
    let started = Instant::now();
    // Installed now: the runs alternate remove, install, remove, ...
    for run in 0..RUNS {
        let seed = 0x6b70_6163_6b00_0000 + run;
        let mut rng = Rng::new(seed);
        let op = if run % 2 == 0 {
            Op::Remove
        } else {
            Op::Install
        };
        let warm_cache = op == Op::Remove || rng.chance(60);
        if !warm_cache {
            rig.clean_cache();
        }
        let kind = (op, warm_cache);
        let took = durations[&kind];
        let aim = if rng.chance(40) {
            Aim::FromStaging(rng.below(Duration::from_millis(25)))
        } else if warm_cache && rng.chance(50) {
            // Around the end, where staging and the commit are.
            let from = took / 2;
            Aim::FromStart(from + rng.below(took * 3 / 4))
        } else {
            Aim::FromStart(rng.below(took * 6 / 5))
        };
        let (before, after) = match op {
            Op::Remove => (&installed, &empty),
            _ => (&empty, &installed),
        };
        let context = format!(
            "run {run} (seed {seed:#x}): {op:?}, {} cache, kill {aim:?}",
            if warm_cache { "warm" } else { "cold" }
        );
        assert_eq!(&settled(rig.tree(), false), before, "{context}: start");

        let (status, elapsed) = rig.interrupted(op, aim);
        let killed = status.signal() == Some(libc::SIGKILL);
        if !killed {
            durations.insert(kind, (took + elapsed) / 2);
        }
        assert!(killed || status.success(), "{context}: ended with {status}");
        let state = recovered_state(&rig, before, after, &context);
        *outcomes.entry(outcome(killed, state)).or_default() += 1;

        // And finishing the job works.
        match op {
            Op::Remove => {
                if prefix.join(RECORD).exists() {
                    must(&mut rig.op(Op::Remove), &context);
                }
            }
            _ => {
                must(&mut rig.op(op), &context);
                must(&mut rig.local(&["verify"]), &context);
            }
        }
        let done = settled(rig.tree(), false);
        assert_eq!(
            &done,
            after,
            "{context}: finishing:\n{}",
            differences(&done, after)
        );
    }
    eprintln!(
        "{RUNS} interrupted runs in {:?}: {outcomes:#?}",
        started.elapsed()
    );
    assert!(
        outcomes.keys().filter(|k| k.starts_with("killed")).count() >= 2,
        "the kills landed somewhere: {outcomes:#?}"
    );
}

/// Moves an installed rocm-rand round the states a prefix goes through
/// when its GPUs or its layout change (fat for one GPU, fat for two, the
/// kpack layout), killing each change at a different moment: every
/// rewrite of materialized binaries is as crash-safe as any install.
#[test]
fn a_killed_change_of_gpus_or_layout_leaves_the_prefix_as_before_or_as_after() {
    let _serial = serial();
    let rig = Rig::new();
    let two = "gfx90a:sramecc+:xnack-,gfx1030";
    let ops = [
        Op::InstallAs("fat", TARGET),
        Op::InstallAs("fat", two),
        Op::InstallAs("kpack", TARGET),
    ];
    let mut states = Vec::new();
    let mut took = Vec::new();
    for op in ops {
        took.push(rig.timed(op));
        success(&mut rig.local(&["verify"]));
        states.push(settled(rig.tree(), false));
    }
    assert!(!states[0].contains_key(ARCHIVE) && states[2].contains_key(ARCHIVE));
    assert_ne!(
        states[0][LIBRARY], states[1][LIBRARY],
        "a second GPU rewrites"
    );
    assert_ne!(
        states[1][LIBRARY], states[2][LIBRARY],
        "the kpack layout rewrites"
    );
    // Back to the first state: the same bytes as the first time.
    rig.timed(ops[0]);
    assert_eq!(settled(rig.tree(), false), states[0]);

    const RUNS: usize = 24;
    let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
    let mut in_staging = 0;
    for run in 0..RUNS {
        let seed = 0x6661_7400_0000_0000 + run as u64;
        let mut rng = Rng::new(seed);
        let (from, to) = (run % 3, (run + 1) % 3);
        let (before, after) = (&states[from], &states[to]);
        // Mostly around the end, where materializing and the commit are.
        let aim = if rng.chance(40) {
            Aim::FromStaging(rng.below(took[to] / 3))
        } else {
            Aim::FromStart(took[to] / 2 + rng.below(took[to] * 3 / 4))
        };
        let context = format!("run {run} (seed {seed:#x}): {:?}, kill {aim:?}", ops[to]);
        assert_eq!(&settled(rig.tree(), false), before, "{context}: start");
        let (status, elapsed) = rig.interrupted(ops[to], aim);
        let killed = status.signal() == Some(libc::SIGKILL);
        assert!(killed || status.success(), "{context}: ended with {status}");
        if !killed {
            took[to] = (took[to] + elapsed) / 2;
        }
        // Materializing happens in staging: a kill there is one mid-rewrite.
        if killed && rig.env.prefix.join(".kpack/staging").exists() {
            in_staging += 1;
        }
        let state = recovered_state(&rig, before, after, &context);
        *outcomes.entry(outcome(killed, state)).or_default() += 1;
        must(&mut rig.op(ops[to]), &context);
        must(&mut rig.local(&["verify"]), &context);
        let done = settled(rig.tree(), false);
        assert_eq!(
            &done,
            after,
            "{context}: finishing:\n{}",
            differences(&done, after)
        );
    }
    eprintln!("{RUNS} interrupted changes, {in_staging} killed while staging: {outcomes:#?}");
    assert!(
        in_staging >= 2,
        "the kills landed in the rewrites: {in_staging} in staging, {outcomes:#?}"
    );
}

/// `kpack-get list` names rocm-rand once, and every installed file checks.
fn installed_once(env: &Env) {
    let list = success(env.command().arg("list"));
    assert_eq!(
        list.lines().filter(|l| l.starts_with("rocm-rand ")).count(),
        1,
        "{list}"
    );
    let record = fs_err::read_to_string(env.prefix.join(RECORD)).unwrap();
    assert_eq!(
        record.matches("[packages.rocm-rand]").count(),
        1,
        "{record}"
    );
    success(env.command().arg("verify"));
}

fn spawn_install(context: &TestContext, extra: &[&str]) -> std::process::Child {
    let mut args = vec!["--no-progress", "--target", TARGET];
    args.extend_from_slice(extra);
    args.extend(["install", "rocm-rand"]);
    context
        .kpack_get(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Long enough that the other process, started at the same time, reaches
/// the lock while the first holds it.
const HOLD: Duration = Duration::from_millis(1500);

/// Two installs at once: the second waits for the first, then finds the
/// package installed; nothing is downloaded twice or installed twice.
#[test]
fn two_installs_at_once_take_turns() {
    let _serial = serial();
    let context = TestContext::new();
    let (env, server) = (&context.env, &context.server);
    server.fault("pool/", Fault::Stall { stall: HOLD });
    let first = spawn_install(&context, &[]);
    let second = spawn_install(&context, &[]);
    let outs = [
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    ];
    for out in &outs {
        assert!(
            out.status.success(),
            "{}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            stderr(out)
        );
    }
    // One installs; the other waits, then finds it done.
    insta::assert_snapshot!(both(&context, &outs));
    // The one that waited planned after the other had installed.
    assert_eq!(pool_gets(server), [pool(HOST_TREE), pool(ENCODED_ARCHIVE)]);
    installed_once(env);
}

/// The transcripts of two commands run at once, in sorted order (which ran
/// first varies).
fn both(context: &TestContext, outs: &[std::process::Output; 2]) -> String {
    let mut transcripts = outs.each_ref().map(|o| context.transcript(o));
    transcripts.sort();
    transcripts.join("\n")
}

/// With --no-wait, the install that finds the prefix locked says so and
/// exits 7; the other installs.
#[test]
fn two_installs_at_once_with_no_wait_one_is_refused() {
    let _serial = serial();
    let context = TestContext::new();
    let (env, server) = (&context.env, &context.server);
    server.fault("pool/", Fault::Stall { stall: HOLD });
    let first = spawn_install(&context, &["--no-wait"]);
    let second = spawn_install(&context, &["--no-wait"]);
    let outs = [
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    ];
    let (ok, refused): (Vec<_>, Vec<_>) = outs.iter().partition(|o| o.status.success());
    assert_eq!(
        (ok.len(), refused.len()),
        (1, 1),
        "{:#?}",
        outs.iter().map(stderr).collect::<Vec<_>>()
    );
    insta::assert_snapshot!("no_wait_both", both(&context, &outs));
    installed_once(env);
    // The refused one changed nothing: a later install finds it done.
    let later = context.run(&mut context.kpack_get(&["--target", TARGET, "install", "rocm-rand"]));
    insta::assert_snapshot!("no_wait_later", later);
}

/// A remove started while an install holds the prefix waits for it, then
/// removes what it installed: it decides on the record as it is once it
/// has the lock, not as it was when it started.
#[test]
fn a_remove_started_during_an_install_waits_and_then_removes() {
    let _serial = serial();
    let context = TestContext::new();
    let (env, server) = (&context.env, &context.server);
    server.fault(
        "pool/",
        Fault::Stall {
            stall: Duration::from_secs(1),
        },
    );
    let install = spawn_install(&context, &[]);
    // The install takes the lock before it downloads anything.
    let waiting_since = Instant::now();
    while pool_gets(server).is_empty() {
        assert!(
            waiting_since.elapsed() < Duration::from_secs(60),
            "the install never started downloading"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let remove = output(env.command().args(["--no-progress", "remove", "rocm-rand"]));
    let install = install.wait_with_output().unwrap();
    assert!(install.status.success(), "{}", stderr(&install));
    insta::assert_snapshot!("remove_waited", context.transcript(&remove));
    let left = settled(snapshot(&env.prefix), false);
    assert!(left.is_empty(), "{left:#?}");
    let list = context.run(env.command().arg("list"));
    insta::assert_snapshot!("list_after_remove", list);
}

/// Builds `tests/c/fsync_log.c` into a library to preload (once per test
/// process, to a private name and then renamed).
fn fsync_logger() -> &'static Path {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/fsync_log.c");
        let directory = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fsync-log");
        fs_err::create_dir_all(&directory).unwrap();
        let building = directory.join(format!("libfsync_log.so.{}", std::process::id()));
        let out = kpack_test_support::tool("cc")
            .args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
            .arg(&building)
            .arg(&source)
            .arg("-ldl")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cc failed on {}:\n{}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let library = directory.join("libfsync_log.so");
        fs_err::rename(&building, &library).unwrap();
        library
    })
}

/// What `kpack-get ARGS` fsyncs, in order (through the preloaded logger),
/// with the cache's `partial/` prefix and its `blobs` directory.
fn fsyncs_of(args: &[&str]) -> (Vec<String>, String, String) {
    let context = TestContext::new();
    let env = &context.env;
    let log = env.home.path().join("fsync.log");
    success(
        context
            .kpack_get(args)
            .env("LD_PRELOAD", fsync_logger())
            .env("KPACK_TEST_FSYNC_LOG", &log),
    );
    let text = fs_err::read_to_string(&log)
        .unwrap_or_else(|e| panic!("{}: the preloaded logger wrote nothing: {e}", log.display()));
    let synced = text
        .lines()
        .filter_map(|l| l.strip_prefix("fsync "))
        .map(str::to_owned)
        .collect();
    let cache = fs_err::canonicalize(&env.cache).unwrap();
    let partial = format!("{}/", cache.join("partial").display());
    let blobs = cache.join("blobs").display().to_string();
    (synced, partial, blobs)
}

/// Shards are cached unsynced (a resolution may fetch thousands), apart
/// from the blobs that are trusted by size: one torn by a crash is checked
/// at its next read and fetched again, never used.
#[test]
fn a_torn_shard_in_the_cache_is_fetched_again() {
    let context = TestContext::new();
    let env = &context.env;
    let info = || success(&mut context.kpack_get(&["--target", TARGET, "info", "rocm-rand"]));
    let first = info();
    let shards = env.cache.join("shards");
    let cached: Vec<_> = fs_err::read_dir(&shards)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert!(
        !env.cache.join("blobs").exists()
            || fs_err::read_dir(env.cache.join("blobs")).unwrap().count() == 0,
        "a shard went into blobs/"
    );
    // What a crash before the data reached the disk can leave: the name,
    // with the right length and the wrong bytes.
    let length = fs_err::metadata(&cached[0]).unwrap().len();
    fs_err::write(&cached[0], vec![0u8; length as usize]).unwrap();
    let shard_gets = |context: &TestContext| {
        context
            .server
            .requests()
            .iter()
            .filter(|r| r.path.starts_with("packages/"))
            .count()
    };
    let before = shard_gets(&context);
    assert_eq!(info(), first);
    assert_eq!(
        shard_gets(&context),
        before + 1,
        "the torn shard was not fetched again"
    );
    assert_ne!(
        fs_err::read(&cached[0]).unwrap(),
        vec![0u8; length as usize]
    );
}

#[test]
fn a_downloaded_artifact_is_named_durably_in_the_cache() {
    let (synced, partial, blobs) = fsyncs_of(&["--target", TARGET, "install", "rocm-rand"]);
    // The last download synced in `partial/` is renamed into `blobs/`, and
    // that directory is synced after it.
    let last_download = synced
        .iter()
        .rposition(|path| path.starts_with(&partial))
        .unwrap_or_else(|| panic!("no download synced: {synced:#?}"));
    assert!(
        synced[last_download..].contains(&blobs),
        "{blobs} synced after the last download: {synced:#?}"
    );
}

/// Makes `levels` directories named `d`, one in the other, under `dir`,
/// one handle at a time (the path soon passes what one call can name).
fn nest(dir: &Path, levels: usize) {
    fs_err::create_dir_all(dir).unwrap();
    let mut at = kpack_fs::confined::ConfinedDir::open(dir).unwrap();
    for _ in 0..levels {
        at = at.create_dir_all(Path::new("d")).unwrap();
    }
}

/// A staging directory 1,100 levels deep, as an interrupted kpack-get of
/// before left it, is removed by the next run with a user's usual limit of
/// 1,024 open files (it once made every later run fail); 30,000 levels
/// cost the run no more memory than a good run, plus 64 MiB.
#[test]
fn a_leftover_staging_directory_however_deep_is_removed_with_few_handles() {
    const MIB: u64 = 1 << 20;
    let good = {
        let rig = Rig::new();
        let mut command = rig.op(Op::Install);
        let run = run_watched(
            limit_open_files(&mut command, 1024),
            Duration::from_secs(120),
            1 << 30,
        );
        assert!(run.output.status.success(), "{}", describe(&run.output));
        run.peak_rss
    };
    for levels in [1100, 30_000] {
        let rig = Rig::new();
        nest(&rig.env.prefix.join(".kpack/staging/1-1/package-0"), levels);
        let mut command = rig.op(Op::Install);
        let run = run_watched(
            limit_open_files(&mut command, 1024),
            Duration::from_secs(120),
            1 << 30,
        );
        assert!(
            run.output.status.success(),
            "{levels}: {}",
            describe(&run.output)
        );
        assert!(!rig.env.prefix.join(".kpack/staging").exists(), "{levels}");
        installed_once(&rig.env);
        eprintln!(
            "{levels} levels: peak {} MiB, a good run {} MiB, {:?}",
            run.peak_rss / MIB,
            good / MIB,
            run.elapsed
        );
        assert!(
            run.peak_rss < good + 64 * MIB,
            "{levels} levels: {} MiB, a good run {} MiB",
            run.peak_rss / MIB,
            good / MIB
        );
    }
}

/// A directory made immutable (`chattr +i`) until dropped.
struct Immutable(std::path::PathBuf);

impl Immutable {
    fn new(path: &Path) -> Immutable {
        let out = output(Command::new("chattr").arg("+i").arg(path));
        assert!(
            out.status.success(),
            "this test needs chattr +i on {} (a file system with attributes, as root): {}",
            path.display(),
            describe(&out)
        );
        Immutable(path.to_owned())
    }
}

impl Immutable {
    /// The directory is now at `path`.
    fn moved_to(&mut self, path: &Path) {
        self.0 = path.to_owned();
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

/// A leftover staging directory that cannot be removed (a directory in it
/// is immutable) no longer stops every later run: it is moved aside to
/// `.kpack/trash-<id>` with a warning, the change goes on, and the first
/// run after it can be removed empties it.
#[test]
fn a_leftover_staging_directory_that_cannot_be_removed_is_moved_aside_and_emptied_later() {
    let rig = Rig::new();
    let stuck = rig.env.prefix.join(".kpack/staging/1-1/root/stuck");
    fs_err::create_dir_all(&stuck).unwrap();
    fs_err::write(stuck.join("file"), b"left\n").unwrap();
    let mut immutable = Immutable::new(&stuck);
    let out = output(&mut rig.op(Op::Install));
    assert!(out.status.success(), "{}", describe(&out));
    let err = stderr(&out);
    assert!(err.contains("moved aside to .kpack/trash-1-1"), "{err}");
    let trash = rig.env.prefix.join(".kpack/trash-1-1");
    assert!(trash.join("root/stuck/file").exists());
    assert!(!rig.env.prefix.join(".kpack/staging").exists());
    installed_once(&rig.env);
    // Still stuck: later runs go on, and leave it.
    must(&mut rig.op(Op::Remove), "remove while the trash is stuck");
    assert!(trash.exists());
    immutable.moved_to(&trash.join("root/stuck"));
    drop(immutable);
    must(&mut rig.op(Op::Install), "install once it can be removed");
    assert!(!trash.exists(), "the trash is emptied");
    installed_once(&rig.env);
}

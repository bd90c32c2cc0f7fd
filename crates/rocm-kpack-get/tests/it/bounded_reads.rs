//! Every read from a mirror is bounded in bytes and in time: a mirror
//! serving the root, its signature, a shard or an artifact as a body
//! without end, larger than its cap or pin (with and without
//! `Content-Length`), or one byte every few seconds, is refused quickly,
//! with an `error:` naming the URL (and the cap), and kpack-get's own
//! memory stays within 64 MiB of a good run's.

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::common::server::Fault;
use crate::common::{describe, pool, shared_rocrand_repo, stderr, HOST_TREE};
use kpack_test_support::context::TestContext;
use kpack_test_support::hostile_toml::WORST_TOML_SHAPES;
use kpack_test_support::measure::{run_watched, Measured};

const TARGET: &str = "gfx90a:sramecc+:xnack-";
const MIB: u64 = 1 << 20;
/// The default cap on the root index.
const INDEX_CAP: u64 = 16 * MIB;
/// How long a refusal may take, however loaded the machine.
const DEADLINE: Duration = Duration::from_secs(20);

/// `kpack-get` in `context` with short time bounds (from the environment,
/// so the same test runs against any build), one attempt.
fn kpack_get(context: &TestContext, args: &[&str]) -> Command {
    let mut command = context.kpack_get(args);
    command
        .env("KPACK_GET_ATTEMPTS", "1")
        .env("KPACK_GET_READ_TIMEOUT", "10")
        .env("KPACK_GET_LOW_SPEED_LIMIT", "1024")
        .env("KPACK_GET_LOW_SPEED_TIME", "1")
        .env("KPACK_GET_INDEX_TIMEOUT", "5");
    command
}

fn update_args() -> Vec<&'static str> {
    vec!["update"]
}

fn install_args() -> Vec<&'static str> {
    vec!["--target", TARGET, "install", "rocm-rand"]
}

/// Runs under watch: killed past the deadline or 1 GiB of memory.
fn watched(mut command: Command) -> Measured {
    run_watched(&mut command, Duration::from_secs(60), 1024 * MIB)
}

/// The peak memory of a good run of `args` (update, or install).
fn baseline(args: &[&str]) -> u64 {
    static BASELINES: OnceLock<(u64, u64)> = OnceLock::new();
    let (update, install) = *BASELINES.get_or_init(|| {
        let good = |args: &[&str]| {
            let run = watched(kpack_get(&TestContext::new(), args));
            assert!(run.output.status.success(), "{}", describe(&run.output));
            run.peak_rss
        };
        (good(&update_args()), good(&install_args()))
    });
    if args.contains(&"install") {
        install
    } else {
        update
    }
}

/// Serves the repository with `fault` on paths containing `pattern`, runs
/// `args`, and checks the refusal: within the deadline, under 64 MiB more
/// memory than a good run, an `error:` line, no panic, the URL of `path`
/// and each of `mentions` named; nothing installed.
fn assert_refused(pattern: &str, fault: Fault, args: &[&str], path: &str, mentions: &[&str]) {
    let context = TestContext::new();
    let (env, server) = (&context.env, &context.server);
    server.fault(pattern, fault.clone());
    let run = watched(kpack_get(&context, args));
    let out = &run.output;
    let case = format!("{fault:?} on {pattern}");
    assert_eq!(run.killed, None, "{case}: {}", describe(out));
    let growth = run.peak_rss.saturating_sub(baseline(args));
    eprintln!(
        "{case}: refused in {:?}, peak RSS {} MiB ({} MiB over a good run)",
        run.elapsed,
        run.peak_rss / MIB,
        growth / MIB
    );
    assert!(run.elapsed < DEADLINE, "{case}: {:?}", run.elapsed);
    assert!(growth < 64 * MIB, "{case}: grew {growth} bytes");
    assert!(
        matches!(out.status.code(), Some(4 | 5)),
        "{case}: {}",
        describe(out)
    );
    let text = stderr(out);
    assert!(
        text.lines().any(|l| l.starts_with("error:")),
        "{case}: {text}"
    );
    assert!(!text.contains("panicked"), "{case}: {text}");
    let url = format!("{}/{path}", server.url());
    assert!(text.contains(&url), "{case}: no {url} in {text}");
    for mention in mentions {
        assert!(text.contains(mention), "{case}: no {mention:?} in {text}");
    }
    assert!(!env.prefix.join("lib").exists(), "{case}: installed");
}

fn oversized(size: u64, declared: bool) -> Fault {
    Fault::Oversized { size, declared }
}

fn drip() -> Fault {
    Fault::Drip {
        every: Duration::from_secs(5),
    }
}

#[test]
fn a_root_without_end_or_over_its_cap_is_refused_at_the_cap() {
    let cap = INDEX_CAP.to_string();
    let beyond = 4 * INDEX_CAP;
    for fault in [
        Fault::Endless,
        oversized(beyond, true),
        oversized(beyond, false),
    ] {
        assert_refused(
            "index.toml",
            fault,
            &update_args(),
            "index.toml",
            &[&cap, "max-index-size"],
        );
    }
}

#[test]
fn a_signature_without_end_or_over_its_cap_is_refused_at_the_cap() {
    let cap = (64 << 10).to_string();
    for fault in [Fault::Endless, oversized(8 * MIB, false)] {
        assert_refused(
            "index.toml.minisig",
            fault,
            &update_args(),
            "index.toml.minisig",
            &[&cap],
        );
    }
}

/// The path of rocm-rand's shard in the shared repository.
fn shard_path() -> String {
    let dir = shared_rocrand_repo().dir.join("packages/rocm-rand");
    let entry = fs_err::read_dir(&dir).unwrap().next().unwrap().unwrap();
    format!("packages/rocm-rand/{}", entry.file_name().to_string_lossy())
}

#[test]
fn a_shard_longer_than_the_root_pins_is_refused_at_the_pin() {
    let shard = shard_path();
    let size = fs_err::metadata(shared_rocrand_repo().dir.join(&shard))
        .unwrap()
        .len();
    let pins = format!("{size} bytes");
    for fault in [
        Fault::Endless,
        oversized(64 * MIB, true),
        oversized(64 * MIB, false),
    ] {
        assert_refused("packages/", fault, &install_args(), &shard, &[&pins]);
    }
}

#[test]
fn an_artifact_longer_than_its_shard_pins_is_refused_at_the_pin() {
    let host = pool(HOST_TREE);
    for fault in [Fault::Endless, oversized(1 << 30, false)] {
        assert_refused(&host, fault, &install_args(), &host, &["pins"]);
    }
}

#[test]
fn a_body_dripping_below_the_minimum_rate_is_given_up() {
    let shard = shard_path();
    let host = pool(HOST_TREE);
    for (pattern, args, path) in [
        ("index.toml", update_args(), "index.toml"),
        ("index.toml.minisig", update_args(), "index.toml.minisig"),
        ("packages/", install_args(), shard.as_str()),
        (host.as_str(), install_args(), host.as_str()),
    ] {
        assert_refused(pattern, drip(), &args, path, &["bytes"]);
    }
}

/// A mirror without the key serving, in place of the root, 16 MiB (the
/// cap) of the TOML shapes that cost a parser the most, beside the real
/// signature: refused as a bad signature without being parsed, in little
/// memory.
#[test]
fn a_root_of_the_worst_toml_shapes_is_refused_unparsed_for_its_signature() {
    let good = baseline(&update_args());
    for shape in WORST_TOML_SHAPES {
        let context = TestContext::private();
        shape.write(&context.repo.dir.join("index.toml"), INDEX_CAP as usize);
        let shape = shape.name;
        let run = watched(kpack_get(&context, &update_args()));
        let out = &run.output;
        assert_eq!(run.killed, None, "{shape}: {}", describe(out));
        let growth = run.peak_rss.saturating_sub(good);
        eprintln!(
            "{shape}: refused in {:?}, peak RSS {} MiB ({} MiB over a good run)",
            run.elapsed,
            run.peak_rss / MIB,
            growth / MIB
        );
        assert!(growth < 64 * MIB, "{shape}: grew {growth} bytes");
        let text = stderr(out);
        assert!(
            !out.status.success() && text.contains("signature does not verify"),
            "{shape}: {}",
            describe(out)
        );
        assert!(!text.contains("panicked"), "{shape}: {text}");
    }
}

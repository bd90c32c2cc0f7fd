//! Download progress as a user on a terminal sees it: through a slow link,
//! resuming a file an earlier run left partial, the total counts only the
//! bytes this run fetches and never passes its end, every line fits 80
//! columns, files are named as users think of them; Ctrl-C says what the
//! cache keeps, and the next run resumes from it.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::server::Fault;
use crate::common::{describe, output, pool, shared_rocrand_repo, HOST_TREE};
use kpack_test_support::context::TestContext;

const TARGET: &str = "gfx90a:sramecc+:xnack-";

/// Bytes the first run receives of the host tree before the link drops.
const KEPT: u64 = 3_000_000;

/// `kpack-get ARGS` in a pseudo-terminal of 80 columns (util-linux
/// `script`), its output as the terminal received it.
fn in_terminal(context: &TestContext, args: &[&str]) -> Output {
    let command = context.kpack_get(args);
    let quoted: Vec<String> = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|part| format!("'{}'", part.to_string_lossy().replace('\'', "'\\''")))
        .collect();
    let mut script = Command::new("script");
    script
        .args(["--quiet", "--return", "--command"])
        .arg(format!("stty cols 80 rows 24; exec {}", quoted.join(" ")))
        .arg("/dev/null")
        .stdin(Stdio::null());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => script.env(key, value),
            None => script.env_remove(key),
        };
    }
    output(&mut script)
}

/// Bytes from a size as the bars print it (`3.1 MiB`, `512 B`).
fn bytes(text: &str) -> f64 {
    let (number, unit) = text.trim().split_once(' ').unwrap();
    let scale = match unit {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        other => panic!("unit {other:?} in {text:?}"),
    };
    number.parse::<f64>().unwrap() * scale
}

/// The rows an 80-column terminal showed, each redraw its own, escapes
/// removed: text past the 80th column wraps onto a row of its own (the
/// bars, padded to the terminal's width, rely on that instead of line
/// breaks).
fn rows(raw: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(raw);
    let mut plain = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            plain.push(c);
            continue;
        }
        // A CSI sequence, ESC [ parameters final-byte, moves the cursor
        // or clears: what follows starts a row.
        if chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    break;
                }
            }
        }
        plain.push('\n');
    }
    let mut rows = Vec::new();
    for line in plain.split(['\r', '\n']) {
        let chars: Vec<char> = line.chars().collect();
        for row in chars.chunks(80) {
            let row: String = row.iter().collect();
            if !row.trim().is_empty() {
                rows.push(row);
            }
        }
    }
    rows
}

/// The progress rows of `rows`, from the first bar on: each must be a
/// whole bar (a bar wider than the terminal leaves its tail on a row of
/// its own), a note and its wrapped text, or the closing summary.
fn bar_rows(rows: &[String]) -> Vec<&str> {
    let is_bar = |row: &str| {
        row.starts_with("total [") || (row.starts_with("rocm-rand ") && row.contains(" ["))
    };
    let mut bars = Vec::new();
    let mut in_note = false;
    for row in rows.iter().skip_while(|row| !is_bar(row)) {
        if row.starts_with("note: ") {
            in_note = true;
        } else if is_bar(row) {
            in_note = false;
            bars.push(row.as_str());
        } else if !in_note && !row.starts_with("installed ") && !row.contains(" files into ") {
            panic!(
                "a bar wider than 80 columns wrapped: {row:?} in\n{}",
                rows.join("\n")
            );
        }
    }
    bars
}

/// Leaves the host tree partial in the cache: the link drops after
/// [`KEPT`] bytes and the run gives up.
fn leave_partial(context: &TestContext) {
    context.server.fault(
        &pool(HOST_TREE),
        Fault::ResetAfter {
            after: KEPT,
            times: 1,
        },
    );
    let out = output(&mut context.kpack_get(&[
        "--no-progress",
        "--attempts",
        "1",
        "--target",
        TARGET,
        "install",
        "rocm-rand",
    ]));
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    context.server.clear_faults();
}

#[test]
fn the_total_counts_this_runs_bytes_and_never_passes_its_end() {
    let context = TestContext::new();
    leave_partial(&context);
    context.server.fault(
        "pool/",
        Fault::Throttle {
            bytes_per_second: 2 << 20,
        },
    );
    let out = in_terminal(&context, &["--target", TARGET, "install", "rocm-rand"]);
    assert!(out.status.success(), "{}", describe(&out));
    let rows = rows(&out.stdout);
    if let Ok(dump) = std::env::var("KPACK_TEST_DUMP") {
        fs_err::write(dump, &out.stdout).unwrap();
    }
    let host_size = fs_err::metadata(shared_rocrand_repo().dir.join(pool(HOST_TREE)))
        .unwrap()
        .len();
    let mut totals = 0;
    for line in bar_rows(&rows) {
        let Some(rest) = line.strip_prefix("total [") else {
            continue;
        };
        totals += 1;
        let figures = rest.split_once("] ").unwrap().1;
        // `3.1 MiB/5.2 MiB 2.0 MiB/s, 1s left`
        let (done, rest) = figures.split_once('/').unwrap();
        let total: Vec<&str> = rest.split(' ').take(2).collect();
        let (done, total) = (bytes(done), bytes(&total.join(" ")));
        assert!(done <= total, "the total passed its end: {line:?}");
        // What this run fetches: the host tree's rest and the archive, not
        // the bytes the earlier run kept.
        assert!(
            total < (host_size - KEPT) as f64 + 1024.0 * 1024.0,
            "the total counts kept bytes: {line:?}"
        );
        assert!(line.contains(" left"), "the ETA is not labelled: {line:?}");
    }
    assert!(totals > 0, "no total was drawn:\n{}", rows.join("\n"));
    assert!(
        rows.iter().any(|l| l.starts_with("rocm-rand host part")),
        "files are not named as users think of them:\n{}",
        rows.join("\n")
    );
    // The earlier run's bytes were kept: the host tree was resumed.
    let host_gets: Vec<_> = context
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.ends_with(HOST_TREE))
        .collect();
    assert_eq!(
        host_gets.last().and_then(|r| r.range.clone()),
        Some(format!("bytes={KEPT}-"))
    );
}

#[test]
fn ctrl_c_says_what_the_cache_keeps_and_the_next_run_resumes() {
    let context = TestContext::new();
    context.server.fault(
        &pool(HOST_TREE),
        Fault::Throttle {
            bytes_per_second: 1 << 20,
        },
    );
    let child = context
        .kpack_get(&["--no-progress", "--target", TARGET, "install", "rocm-rand"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupted once some of the host tree has come.
    let deadline = Instant::now() + Duration::from_secs(60);
    while context.server.bytes_sent(&pool(HOST_TREE)) < 1 << 20 {
        assert!(Instant::now() < deadline, "the download never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let interrupt = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupt.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("interrupted: the files being downloaded are kept in the cache (")
            && stderr.contains("fetched in this run); the same command resumes them"),
        "{stderr}"
    );
    assert!(
        !context.env.prefix.join("lib").exists(),
        "something was installed"
    );

    context.server.clear_faults();
    let kept = context.server.bytes_sent(&pool(HOST_TREE));
    let out = output(&mut context.kpack_get(&[
        "--no-progress",
        "--target",
        TARGET,
        "install",
        "rocm-rand",
    ]));
    assert!(out.status.success(), "{}", describe(&out));
    let last = context
        .server
        .requests()
        .into_iter()
        .rfind(|r| r.method == "GET" && r.path.ends_with(HOST_TREE))
        .unwrap();
    let resumed_from: u64 = last
        .range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not resumed: {last:?}"));
    assert!(
        resumed_from > 0 && resumed_from <= kept,
        "{last:?}, {kept} sent"
    );
}

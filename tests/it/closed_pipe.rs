//! Every tool's output into a pipe its reader has closed (`| head` having
//! read enough): the command ends quietly with status 0, as a reader that
//! stopped reading expects, never a panic or an error about the pipe.

use std::path::Path;
use std::process::{Command, Stdio};

use kpack_test_support::chain::{kpack_pack_exe, kpack_repo_exe, success};
use kpack_test_support::context::TestContext;

/// Runs `command` with its stdout a pipe whose read end is already
/// closed; checks it ends with status 0 and says nothing on stderr.
fn assert_quiet_on_a_closed_pipe(what: &str, command: &mut Command) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let output = command
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stderr.is_empty(),
        "{what}: {} with stderr {stderr:?}",
        output.status
    );
}

#[test]
fn every_tool_ends_quietly_when_its_reader_closes_the_pipe() {
    let context = TestContext::new();
    let prefix = &context.env.prefix;
    let target = ["--layout", "kpack", "--target", "gfx90a:sramecc+:xnack-"];
    success(&mut context.kpack_get(&[&target[..], &["install", "rocm-rand"]].concat()));
    let archive = prefix.join(".kpack/rocrand_gfx90a.kpack");
    assert!(archive.is_file(), "{}", archive.display());

    for args in [
        &["list"][..],
        &["info", "rocm-rand"],
        &["search", "rand"],
        &["verify"],
        &[&target[..], &["detect"]].concat(),
        &["list", "--json"],
    ] {
        let what = format!("kpack-get {}", args.join(" "));
        assert_quiet_on_a_closed_pipe(&what, &mut context.kpack_get(args));
    }
    let pack: [&[&Path]; 3] = [
        &[Path::new("inspect"), &archive],
        &[Path::new("deps"), prefix],
        &[Path::new("verify"), prefix],
    ];
    for args in pack {
        let what = format!("kpack-pack {}", args[0].display());
        assert_quiet_on_a_closed_pipe(&what, Command::new(kpack_pack_exe()).args(args));
    }
    assert_quiet_on_a_closed_pipe(
        "kpack-repo verify",
        Command::new(kpack_repo_exe())
            .arg("verify")
            .arg(&context.repo.dir)
            .arg("--key")
            .arg(&context.repo.public_key),
    );
}

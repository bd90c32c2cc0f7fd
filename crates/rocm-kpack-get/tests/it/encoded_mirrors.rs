//! A mirror serving wrong bytes of the right length for a
//! transport-encoded archive (random bytes, a zstd bomb, a frame whose
//! window is past the bound, a 206 whose body is the file's start) leaves
//! nothing of them in the cache: the next mirror serves the archive in the
//! same run, a later run against a good mirror alone succeeds, and only
//! the mirror whose bytes failed is blamed.

use std::io::{Read, Write};
use std::process::Output;

use crate::common::server::{Fault, TestServer};
use crate::common::{
    copy_dir, describe, installed_bytes, output, pool, shared_rocrand_repo, stderr, success,
    ENCODED_ARCHIVE,
};
use kpack_test_support::context::TestContext;

const TARGET: &str = "gfx90a:sramecc+:xnack-";
const INSTALLED: &str = ".kpack/rocrand_gfx90a.kpack";

/// One download at a time, retries without a long wait.
const INSTALL: &[&str] = &[
    "--no-progress",
    "--concurrency",
    "1",
    "--attempts",
    "2",
    "--target",
    TARGET,
    "install",
    "rocm-rand",
];

/// The archive as the repository serves it (zstd-encoded).
fn served() -> Vec<u8> {
    fs_err::read(shared_rocrand_repo().dir.join(pool(ENCODED_ARCHIVE))).unwrap()
}

/// What the archive decodes to.
fn decoded() -> Vec<u8> {
    installed_bytes(&shared_rocrand_repo().dir, ENCODED_ARCHIVE)
}

/// `bytes` cut or padded with zeros to the served archive's length.
fn of_served_length(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.resize(served().len(), 0);
    bytes
}

/// Pseudo-random bytes (xorshift), the served archive's length.
fn random_bytes() -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let bytes = (0..served().len())
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    of_served_length(bytes)
}

/// One zstd frame of zeros decoding far past the pinned size.
fn bomb() -> Vec<u8> {
    let size = decoded().len() as u64 * 4 + (16 << 20);
    let bomb = zstd::encode_all(std::io::repeat(0).take(size), 3).unwrap();
    assert!(bomb.len() < served().len(), "{}", bomb.len());
    of_served_length(bomb)
}

/// The archive encoded with a window past the 16 MiB bound.
fn too_large_window() -> Vec<u8> {
    let mut encoder = zstd::stream::raw::Encoder::new(3).unwrap();
    encoder
        .set_parameter(zstd::zstd_safe::CParameter::WindowLog(25))
        .unwrap();
    let mut frame = Vec::new();
    let mut writer = zstd::stream::write::Encoder::with_encoder(&mut frame, encoder);
    writer.write_all(&decoded()).unwrap();
    writer.finish().unwrap();
    of_served_length(frame)
}

/// A mirror serving `bytes` in place of the archive (kept alive with it),
/// in pieces of 20 KB as a link slower than the disk brings them.
fn serving(bytes: &[u8]) -> (TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&shared_rocrand_repo().dir, dir.path());
    fs_err::write(dir.path().join(pool(ENCODED_ARCHIVE)), bytes).unwrap();
    let server = TestServer::start(dir.path());
    let bytes_per_second = 400_000;
    server.fault(&pool(ENCODED_ARCHIVE), Fault::Throttle { bytes_per_second });
    (server, dir)
}

/// A mirror that cuts every whole download and answers every resume with
/// the archive's first bytes.
fn resuming_from_the_start() -> TestServer {
    let server = TestServer::start(&shared_rocrand_repo().dir);
    let cut_after = served().len() as u64 / 3;
    server.fault(&pool(ENCODED_ARCHIVE), Fault::RangeFromStart { cut_after });
    server
}

/// The archive installed, as it decodes.
fn assert_installed(context: &TestContext) {
    let installed = fs_err::read(context.env.prefix.join(INSTALLED)).unwrap();
    assert!(installed == decoded(), "the installed archive differs");
}

/// `kpack-get --repo rocm=<mirror> install rocm-rand`.
fn install_from(context: &TestContext, mirror: &TestServer) -> Output {
    let key = &context.repo.public_key;
    output(&mut context.env.with_repo(&mirror.url(), key, INSTALL))
}

/// The hostile mirror first, the good one second: one run installs, and
/// only the hostile mirror is named.
fn then_a_good_mirror(hostile: &TestServer) {
    let context = TestContext::new();
    let good = &context.server;
    let env = &context.env;
    env.configure(&[hostile.url(), good.url()], &context.repo.public_key);
    let out = output(env.command().args(INSTALL));
    assert!(out.status.success(), "{}", describe(&out));
    let text = stderr(&out);
    assert!(text.contains(&hostile.url()), "{text}");
    assert!(
        !text.contains(&good.url()),
        "the good mirror is blamed: {text}"
    );
    assert_installed(&context);
    success(env.command().arg("verify"));
}

/// The hostile mirror alone fails, naming it; then the good mirror alone
/// installs, with nothing of the hostile one's bytes in its way.
fn alone_then_a_good_mirror(hostile: &TestServer) {
    let context = TestContext::new();
    let out = install_from(&context, hostile);
    assert!(!out.status.success(), "{}", describe(&out));
    let text = stderr(&out);
    assert!(text.contains(&hostile.url()), "{text}");
    assert!(!text.contains("panicked"), "{text}");

    let good = &context.server;
    let out = install_from(&context, good);
    assert!(out.status.success(), "{}", describe(&out));
    let text = stderr(&out);
    assert!(
        !text.contains(&good.url()),
        "the good mirror is blamed: {text}"
    );
    assert_installed(&context);
}

#[test]
fn random_bytes_of_the_right_length_give_way_to_the_next_mirror() {
    let (hostile, _dir) = serving(&random_bytes());
    then_a_good_mirror(&hostile);
}

#[test]
fn random_bytes_of_the_right_length_leave_nothing_behind() {
    let (hostile, _dir) = serving(&random_bytes());
    alone_then_a_good_mirror(&hostile);
}

#[test]
fn a_bomb_gives_way_to_the_next_mirror() {
    let (hostile, _dir) = serving(&bomb());
    then_a_good_mirror(&hostile);
}

#[test]
fn a_bomb_leaves_nothing_behind() {
    let (hostile, _dir) = serving(&bomb());
    alone_then_a_good_mirror(&hostile);
}

#[test]
fn a_window_past_the_bound_gives_way_to_the_next_mirror() {
    let (hostile, _dir) = serving(&too_large_window());
    then_a_good_mirror(&hostile);
}

#[test]
fn a_window_past_the_bound_leaves_nothing_behind() {
    let (hostile, _dir) = serving(&too_large_window());
    alone_then_a_good_mirror(&hostile);
}

#[test]
fn a_resume_answered_with_the_file_start_gives_way_to_the_next_mirror() {
    then_a_good_mirror(&resuming_from_the_start());
}

#[test]
fn a_resume_answered_with_the_file_start_leaves_nothing_behind() {
    alone_then_a_good_mirror(&resuming_from_the_start());
}

#[test]
fn kept_bytes_that_do_not_decode_are_fetched_again_from_the_same_mirror() {
    let context = TestContext::new();
    let env = &context.env;
    // What an older kpack-get left after a mirror's random bytes: a partial
    // download whose first bytes do not decode, with its resume record.
    let served = served();
    let sha256 = kpack_repo_index::Sha256::of(&served).to_string();
    let partial = env.cache.join("partial");
    fs_err::create_dir_all(&partial).unwrap();
    fs_err::write(partial.join(&sha256), &random_bytes()[..100_000]).unwrap();
    let from = format!("http://127.0.0.1:9/{}\n\n", pool(ENCODED_ARCHIVE));
    fs_err::write(partial.join(format!("{sha256}.from")), from).unwrap();

    let out = output(&mut context.kpack_get(INSTALL));
    assert!(out.status.success(), "{}", describe(&out));
    let text = stderr(&out);
    assert!(text.contains("do not decode"), "{text}");
    assert!(!text.contains("trying the next mirror"), "{text}");
    assert_installed(&context);
    // Asked for the rest, then for the whole file.
    let gets: Vec<_> = context
        .server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == pool(ENCODED_ARCHIVE))
        .map(|r| (r.range, r.status))
        .collect();
    assert_eq!(
        gets,
        [(Some("bytes=100000-".to_owned()), 206), (None, 200)],
        "{text}"
    );
}

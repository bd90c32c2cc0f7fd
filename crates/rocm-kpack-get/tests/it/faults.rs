//! Downloads against misbehaving servers: 500s are retried with backoff, a
//! connection cut mid-body is resumed from the bytes received, a server
//! that ignores the range restarts the file, a stalled or tampered mirror
//! or one serving a file of another size gives way to the next one, a
//! resumed file that fails its hash is fetched whole before the mirror is
//! blamed, and when every mirror is down nothing is installed and the
//! error says which file, from where, and what to do.

use std::process::Output;
use std::time::Duration;

use crate::common::server::{Fault, Request, TestServer};
use crate::common::{describe, output, pool, shared_rocrand_repo, stderr, success, Env, HOST_TREE};
use kpack_test_support::context::TestContext;
use sha2::Digest;

const TARGET: &str = "gfx90a:sramecc+:xnack-";
/// The archive's pool file (transport-encoded) and its name installed.
const ARCHIVE: &str = crate::common::ENCODED_ARCHIVE;
const INSTALLED: &str = "rocrand_gfx90a.kpack";

fn repo_bytes(file: &str) -> Vec<u8> {
    fs_err::read(shared_rocrand_repo().dir.join(pool(file))).unwrap()
}

fn repo_size(file: &str) -> u64 {
    fs_err::metadata(shared_rocrand_repo().dir.join(pool(file)))
        .unwrap()
        .len()
}

/// The GETs of paths containing `pattern`, in arrival order.
fn gets(server: &TestServer, pattern: &str) -> Vec<Request> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.contains(pattern))
        .collect()
}

/// The arguments of an install for a gfx90a with `extra`; one download at
/// a time, so what is told of retries comes in a fixed order.
fn install_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--no-progress", "--concurrency", "1", "--target", TARGET];
    args.extend(extra);
    args.extend(["install", "rocm-rand"]);
    args
}

/// `kpack-get --repo rocm=SERVER ... EXTRA... install rocm-rand`.
fn install(context: &TestContext, extra: &[&str]) -> Output {
    output(&mut context.kpack_get(&install_args(extra)))
}

/// `install rocm-rand` with the mirrors of the configuration file.
fn install_configured(env: &Env, extra: &[&str]) -> Output {
    output(env.command().args(install_args(extra)))
}

/// The transcript of `out` with the two mirrors' addresses masked.
fn with_mirrors(context: &TestContext, out: &Output, mirrors: [&TestServer; 2]) -> String {
    let (first, second) = (mirrors[0].url(), mirrors[1].url());
    context.transcript_masking(out, &[(&first, "<FIRST>"), (&second, "<SECOND>")])
}

/// Two servers of the same repository, configured as mirrors in that order.
fn two_mirrors(env: &Env) -> (TestServer, TestServer) {
    let repo = shared_rocrand_repo();
    let first = TestServer::start(&repo.dir);
    let second = TestServer::start(&repo.dir);
    env.configure(&[first.url(), second.url()], &repo.public_key);
    (first, second)
}

/// A copy of the repository with one pool file's bytes replaced.
fn mirror_with(file: &str, bytes: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    crate::common::copy_dir(&shared_rocrand_repo().dir, dir.path());
    fs_err::write(dir.path().join(pool(file)), bytes).unwrap();
    dir
}

/// What an install leaves in the prefix: the library and the archive, and
/// files that match the record.
fn assert_installed(env: &Env) {
    assert!(env.prefix.join("lib/librocrand.so.1.1").is_file());
    assert_eq!(
        fs_err::read(env.prefix.join(".kpack").join(INSTALLED)).unwrap(),
        crate::common::installed_bytes(&shared_rocrand_repo().dir, ARCHIVE)
    );
    success(env.command().arg("verify"));
}

fn assert_nothing_installed(env: &Env) {
    assert!(!env.prefix.join("lib").exists(), "lib/ was installed");
    assert!(
        !env.prefix.join(".kpack/installed.toml").exists(),
        "a record was written"
    );
    assert!(!env.prefix.join(".kpack").join(INSTALLED).exists());
}

#[test]
fn server_errors_are_retried_with_backoff_until_the_file_comes() {
    let context = TestContext::new();
    let server = &context.server;
    server.fault(&pool(HOST_TREE), Fault::Status500 { times: 2 });
    let env = &context.env;
    let out = install(&context, &[]);
    assert!(out.status.success(), "{}", describe(&out));

    let statuses: Vec<u16> = gets(server, &pool(HOST_TREE))
        .iter()
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [500, 500, 200]);
    assert_eq!(server.bytes_sent(&pool(HOST_TREE)), repo_size(HOST_TREE));
    insta::assert_snapshot!(context.transcript(&out));
    assert_installed(env);
}

#[test]
fn a_connection_reset_mid_body_is_resumed_from_the_bytes_received() {
    let context = TestContext::new();
    let server = &context.server;
    server.fault(
        &pool(HOST_TREE),
        Fault::ResetAfter {
            after: 3_000_000,
            times: 1,
        },
    );
    let env = &context.env;
    let out = install(&context, &[]);
    assert!(out.status.success(), "{}", describe(&out));

    let host = gets(server, &pool(HOST_TREE));
    assert_eq!(host.len(), 2, "{host:?}");
    let (first, second) = (&host[0], &host[1]);
    assert_eq!(first.status, 200);
    assert_eq!(first.range, None);
    assert_eq!(first.body_bytes, 3_000_000);
    assert_eq!(
        second.range.as_deref(),
        Some(format!("bytes={}-", first.body_bytes).as_str())
    );
    // The validator the first response carried, so a changed file would
    // come whole.
    assert!(
        second
            .if_range
            .as_deref()
            .is_some_and(|v| v.starts_with('"')),
        "{second:?}"
    );
    assert_eq!(second.status, 206);
    // Nothing was sent twice.
    assert_eq!(server.bytes_sent(&pool(HOST_TREE)), repo_size(HOST_TREE));
    assert_installed(env);
}

#[test]
fn a_server_ignoring_the_range_restarts_the_file_from_the_start() {
    let context = TestContext::new();
    let (env, server) = (&context.env, &context.server);
    server.fault(
        &pool(HOST_TREE),
        Fault::ResetAfter {
            after: 3_000_000,
            times: 1,
        },
    );
    let out = install(&context, &["--attempts", "1"]);
    assert_eq!(out.status.code(), Some(4), "{}", describe(&out));
    assert_nothing_installed(env);
    let sha256 = format!("{:x}", sha2::Sha256::digest(repo_bytes(HOST_TREE)));
    let partial = env.cache.join("partial").join(&sha256);
    assert_eq!(fs_err::metadata(&partial).unwrap().len(), 3_000_000);

    server.clear_faults();
    server.clear_requests();
    server.fault(&pool(HOST_TREE), Fault::IgnoreRange);
    let out = install(&context, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let host = gets(server, &pool(HOST_TREE));
    assert_eq!(host.len(), 1, "{host:?}");
    assert_eq!(host[0].range.as_deref(), Some("bytes=3000000-"));
    assert_eq!(host[0].status, 200);
    assert_eq!(host[0].body_bytes, repo_size(HOST_TREE));
    insta::assert_snapshot!(context.transcript(&out));
    assert!(!partial.exists());
    assert_eq!(
        fs_err::read(env.cache.join("blobs").join(&sha256)).unwrap(),
        repo_bytes(HOST_TREE)
    );
    assert_installed(env);
}

#[test]
fn a_stalled_mirror_times_out_and_the_next_mirror_serves() {
    let context = TestContext::new();
    let env = &context.env;
    let (first, second) = two_mirrors(env);
    let stall = Duration::from_secs(20);
    first.fault("pool/", Fault::Stall { stall });
    // Served by the second mirror: the first would only have answered
    // after its stall, once the install was over.
    let out = install_configured(env, &["--read-timeout", "1", "--attempts", "1"]);
    assert!(out.status.success(), "{}", describe(&out));

    assert_eq!(gets(&first, &pool(HOST_TREE)).len(), 1);
    assert_eq!(gets(&first, &pool(ARCHIVE)).len(), 1);
    assert_eq!(
        second.bytes_sent("pool/"),
        repo_size(HOST_TREE) + repo_size(ARCHIVE)
    );
    insta::assert_snapshot!(with_mirrors(&context, &out, [&first, &second]));
    assert_installed(env);
}

#[test]
fn a_tampered_mirror_is_discarded_for_the_next_one() {
    let context = TestContext::new();
    let env = &context.env;
    let (first, second) = two_mirrors(env);
    first.fault(&pool(ARCHIVE), Fault::Tamper);
    let out = install_configured(env, &[]);
    assert!(out.status.success(), "{}", describe(&out));

    // The tampered copy came whole, was discarded, and the second mirror
    // served the archive (only the archive).
    assert_eq!(first.bytes_sent(&pool(ARCHIVE)), repo_size(ARCHIVE));
    assert_eq!(second.bytes_sent(&pool(ARCHIVE)), repo_size(ARCHIVE));
    assert!(gets(&second, &pool(HOST_TREE)).is_empty());
    insta::assert_snapshot!(with_mirrors(&context, &out, [&first, &second]));
    assert_installed(env);
}

#[test]
fn every_mirror_down_fails_with_exit_4_naming_file_and_mirrors_and_installs_nothing() {
    let context = TestContext::new();
    let env = &context.env;
    let (first, second) = two_mirrors(env);
    first.fault("pool/", Fault::Down);
    second.fault("pool/", Fault::Down);
    let out = install_configured(env, &["--attempts", "2"]);
    // The error names the file and each mirror; the last mirror is not
    // followed by "trying the next mirror".
    insta::assert_snapshot!(with_mirrors(&context, &out, [&first, &second]));
    assert!(!gets(&first, "pool/").is_empty());
    assert!(!gets(&second, "pool/").is_empty());
    assert_nothing_installed(env);

    first.clear_faults();
    second.clear_faults();
    let out = install_configured(env, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_installed(env);
}

#[test]
fn an_update_no_mirror_serves_names_every_mirror() {
    let context = TestContext::new();
    let env = &context.env;
    let (first, second) = two_mirrors(env);
    first.fault("index.toml", Fault::Down);
    second.fault("index.toml", Fault::Down);
    let out = output(env.command().args(["update", "--attempts", "1"]));
    // Each mirror's failure is told, not only the first one's.
    insta::assert_snapshot!(with_mirrors(&context, &out, [&first, &second]));
    assert!(!gets(&first, "index.toml").is_empty());
    assert!(!gets(&second, "index.toml").is_empty());
}

#[test]
fn offline_with_nothing_fetched_fails_with_exit_4() {
    let context = TestContext::new();
    let server = &context.server;
    let env = &context.env;
    let out = install(&context, &["--offline"]);
    insta::assert_snapshot!(context.transcript(&out));
    assert!(server.requests().is_empty(), "{:?}", server.requests());
    assert_nothing_installed(env);
}

#[test]
fn offline_with_the_index_but_not_the_artifacts_fails_with_exit_4() {
    let context = TestContext::new();
    let (env, server) = (&context.env, &context.server);
    // The root and the shard are fetched and kept; no artifact is.
    success(&mut context.kpack_get(&["info", "rocm-rand"]));
    server.clear_requests();
    let out = install(&context, &["--offline"]);
    insta::assert_snapshot!(context.transcript(&out));
    assert!(server.requests().is_empty(), "{:?}", server.requests());
    assert_nothing_installed(env);
}

#[test]
fn a_resumed_download_that_fails_its_hash_is_fetched_whole_before_the_mirror_is_blamed() {
    let context = TestContext::new();
    let (env, server) = (&context.env, &context.server);
    // What a download interrupted on a tampered mirror leaves: the first
    // bytes of the file, one of them wrong.
    let mut kept = repo_bytes(HOST_TREE)[..3_000_000].to_vec();
    kept[1_000_000] ^= 0xff;
    let sha256 = format!("{:x}", sha2::Sha256::digest(repo_bytes(HOST_TREE)));
    fs_err::create_dir_all(env.cache.join("partial")).unwrap();
    fs_err::write(env.cache.join("partial").join(&sha256), kept).unwrap();

    let out = install(&context, &["--attempts", "1"]);
    assert!(out.status.success(), "{}", describe(&out));
    let host = gets(server, &pool(HOST_TREE));
    assert_eq!(host.len(), 2, "{host:?}");
    assert_eq!(host[0].range.as_deref(), Some("bytes=3000000-"));
    assert_eq!(host[0].status, 206);
    assert_eq!(host[1].range, None);
    assert_eq!(host[1].status, 200);
    assert_eq!(host[1].body_bytes, repo_size(HOST_TREE));
    insta::assert_snapshot!(context.transcript(&out));
    assert_installed(env);
}

#[test]
fn a_mirror_serving_a_file_of_another_size_is_refused_without_retrying() {
    let whole = repo_bytes(HOST_TREE);
    let short = mirror_with(HOST_TREE, &whole[..whole.len() - 100]);
    let bad = TestServer::start(short.path());
    let good = TestServer::start(&shared_rocrand_repo().dir);
    let pins = format!(
        "{} bytes, but the index pins {}",
        whole.len() - 100,
        whole.len()
    );

    // Only that mirror: a verification failure, found from the length the
    // server declares, so asked for once.
    let context = TestContext::new();
    let key = &context.repo.public_key;
    let out = output(&mut context.env.with_repo(&bad.url(), key, &install_args(&[])));
    assert!(stderr(&out).contains(&pins), "{}", describe(&out));
    let text = with_mirrors(&context, &out, [&bad, &good]);
    insta::assert_snapshot!("another_size_only_mirror", text);
    assert_eq!(gets(&bad, &pool(HOST_TREE)).len(), 1);
    assert_nothing_installed(&context.env);

    // With a good mirror after it, the install takes the file from there.
    bad.clear_requests();
    let context = TestContext::new();
    let env = &context.env;
    env.configure(&[bad.url(), good.url()], &context.repo.public_key);
    let out = install_configured(env, &[]);
    let text = with_mirrors(&context, &out, [&bad, &good]);
    insta::assert_snapshot!("another_size_then_good_mirror", text);
    assert_eq!(gets(&bad, &pool(HOST_TREE)).len(), 1);
    assert_eq!(good.bytes_sent(&pool(HOST_TREE)), repo_size(HOST_TREE));
    assert_installed(env);
}

//! Transport-encoded artifacts (04-repo-index.md): decoded while they
//! download, installed as the runtime reads them, resumed where a cut
//! transfer stopped, and refused, with nothing installed, when they decode
//! to anything but what the signed index pins or use an encoding this
//! build does not know.

use crate::common::hostile::edit_published;
use crate::common::server::Fault;
use crate::common::{describe, installed_bytes, output, pool, stderr, success, ENCODED_ARCHIVE};
use kpack_test_support::context::TestContext;

const TARGET: &str = "gfx90a:sramecc+:xnack-";
const INSTALLED: &str = ".kpack/rocrand_gfx90a.kpack";

fn install(context: &TestContext) -> std::process::Output {
    output(&mut context.kpack_get(&["--no-progress", "--target", TARGET, "install", "rocm-rand"]))
}

/// Files the cache keeps for downloads in progress.
fn partial_files(context: &TestContext) -> Vec<String> {
    let dir = context.env.cache.join("partial");
    let mut names: Vec<String> = fs_err::read_dir(&dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The encoded archive's entry in the published shard, edited by `edit`
/// (and the shard signed again, as a hostile but trusted publisher would).
fn edit_encoded(context: &TestContext, edit: impl Fn(&mut toml::Table)) {
    edit_published(&context.repo, "rocm-rand", |artifact| {
        if artifact.contains_key("encoding")
            && artifact["path"].as_str().unwrap().contains("gfx90a")
        {
            edit(artifact);
        }
    });
    success(&mut context.kpack_get(&["update"]));
}

/// A refused install: the exit code of bytes that fail verification,
/// `mentions` in its message, and no file in the prefix.
fn assert_refused(context: &TestContext, out: &std::process::Output, mentions: &[&str]) {
    assert_eq!(out.status.code(), Some(5), "{}", describe(out));
    let text = stderr(out);
    for mention in mentions {
        assert!(text.contains(mention), "no {mention:?} in {text}");
    }
    assert!(!text.contains("panicked"), "{text}");
    assert!(
        !context.env.prefix.join("lib").exists(),
        "lib/ was installed"
    );
    assert!(!context.env.prefix.join(INSTALLED).exists());
}

#[test]
fn an_encoded_archive_is_installed_decoded_and_cached_once() {
    let context = TestContext::new();
    let repo = &context.repo;
    let out = install(&context);
    assert!(out.status.success(), "{}", describe(&out));
    let served = fs_err::metadata(repo.dir.join(pool(ENCODED_ARCHIVE)))
        .unwrap()
        .len();
    assert_eq!(context.server.bytes_sent(&pool(ENCODED_ARCHIVE)), served);
    let decoded = installed_bytes(&repo.dir, ENCODED_ARCHIVE);
    assert!(decoded.len() as u64 > served, "{} {served}", decoded.len());
    assert_eq!(
        fs_err::read(context.env.prefix.join(INSTALLED)).unwrap(),
        decoded
    );
    // The cache holds what was decoded, under its own hash, and nothing of
    // the download.
    let sha256 = kpack_repo_index::Sha256::of(&decoded).to_string();
    assert!(context.env.cache.join("blobs").join(&sha256).is_file());
    assert_eq!(partial_files(&context), Vec::<String>::new());
    success(context.env.command().arg("verify"));

    // A second prefix takes it from the cache: nothing is fetched again.
    context.server.clear_requests();
    let other = context.home().join("other");
    success(
        context
            .kpack_get(&["--target", TARGET, "--prefix"])
            .arg(&other)
            .args(["install", "rocm-rand"]),
    );
    assert_eq!(context.pool_gets(), Vec::<String>::new());
    assert_eq!(fs_err::read(other.join(INSTALLED)).unwrap(), decoded);
}

#[test]
fn a_cut_encoded_download_resumes_and_decodes_whole() {
    let context = TestContext::new();
    let served = fs_err::metadata(context.repo.dir.join(pool(ENCODED_ARCHIVE)))
        .unwrap()
        .len();
    context.server.fault(
        &pool(ENCODED_ARCHIVE),
        Fault::ResetAfter {
            after: served / 2,
            times: 1,
        },
    );
    let out = install(&context);
    assert!(out.status.success(), "{}", describe(&out));
    // The second request asked for the rest only.
    assert_eq!(context.server.bytes_sent(&pool(ENCODED_ARCHIVE)), served);
    assert_eq!(
        fs_err::read(context.env.prefix.join(INSTALLED)).unwrap(),
        installed_bytes(&context.repo.dir, ENCODED_ARCHIVE)
    );
    success(context.env.command().arg("verify"));
}

#[test]
fn a_tampered_encoded_archive_is_refused_and_nothing_is_installed() {
    let context = TestContext::new();
    context.server.fault(&pool(ENCODED_ARCHIVE), Fault::Tamper);
    let out = install(&context);
    assert_refused(&context, &out, &[ENCODED_ARCHIVE, "sha256"]);
    // Neither the tampered bytes nor what they decoded to are kept.
    let served = kpack_repo_index::Sha256::of(
        &fs_err::read(context.repo.dir.join(pool(ENCODED_ARCHIVE))).unwrap(),
    )
    .to_string();
    let partial = context.env.cache.join("partial").join(&served);
    assert_eq!(fs_err::metadata(partial).unwrap().len(), 0);
    let decoded: Vec<String> = partial_files(&context)
        .into_iter()
        .filter(|name| name.ends_with(".decoded"))
        .collect();
    assert_eq!(decoded, Vec::<String>::new());
}

#[test]
fn an_archive_that_decodes_to_other_bytes_is_refused() {
    let context = TestContext::private();
    let other = "0".repeat(64);
    edit_encoded(&context, |artifact| {
        artifact.insert("decoded-sha256".into(), other.clone().into());
    });
    let out = install(&context);
    assert_refused(
        &context,
        &out,
        &[ENCODED_ARCHIVE, "decodes to sha256", &other],
    );
}

#[test]
fn an_archive_decoding_past_its_pinned_size_stops_there() {
    let context = TestContext::private();
    edit_encoded(&context, |artifact| {
        artifact.insert("decoded-size".into(), 4096.into());
    });
    let out = install(&context);
    assert_refused(
        &context,
        &out,
        &[
            ENCODED_ARCHIVE,
            "decodes to more than the 4096 bytes pinned",
        ],
    );
}

#[test]
fn an_encoding_this_build_does_not_know_is_refused_by_name_before_any_download() {
    let context = TestContext::private();
    edit_encoded(&context, |artifact| {
        artifact.insert("encoding".into(), "br".into());
    });
    context.server.clear_requests();
    let out = install(&context);
    assert!(!out.status.success(), "{}", describe(&out));
    let text = stderr(&out);
    assert!(
        text.contains(&format!(
            "rocm-rand 5.3.3: {} is stored with the transport encoding \"br\", which kpack-get {} cannot decode; upgrade kpack-get to install it",
            pool(ENCODED_ARCHIVE),
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    assert_eq!(context.pool_gets(), Vec::<String>::new());
    assert!(!context.env.prefix.join("lib").exists());
}

#[test]
fn a_version_with_an_encoded_archive_is_refused_by_clients_that_cannot_decode() {
    let context = TestContext::private();
    let read = |path: &str| fs_err::read_to_string(context.repo.dir.join(path)).unwrap();
    let root = kpack_repo_index::RootIndex::parse("index.toml", &read("index.toml")).unwrap();
    let name = "rocm-rand".parse().unwrap();
    let shard_path = root.packages[&name].shard_path(&name);
    let shard = kpack_repo_index::Shard::parse("shard", &read(shard_path.as_str())).unwrap();
    let version = &shard.versions[0];
    assert!(version.artifacts.iter().any(|a| a.encoding.is_some()));
    assert_eq!(
        version.requires_client,
        Some(kpack_repo_index::ENCODING_CLIENT)
    );
    // Clients older than that (0.2) know `requires-client` and stop there.
    assert!(kpack_repo_index::ENCODING_CLIENT > kpack_repo_index::OWNER_CLIENT);
}

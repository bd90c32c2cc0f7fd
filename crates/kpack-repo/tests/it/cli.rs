//! `kpack-repo` as an operator runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{
    archive, build_rocm_rand, host_tree, kpack_repo, published_shard, refused, rocm_rand_artifacts,
    tree, TestContext,
};
use fs_err as fs;
use kpack_test_support::run;

#[test]
fn keygen_add_verify_sign_and_index() {
    let context = TestContext::new();
    let added = context.transcript(
        context
            .add("rocm-rand", "5.3.3", &rocm_rand_artifacts(&context.inputs))
            .args(["--depends", "rocm-core >=5.3, <6", "--summary", "rocRAND"]),
        &[],
    );
    insta::assert_snapshot!("add", added);
    let verified = context.transcript(&mut context.verify(&context.repo), &[]);
    insta::assert_snapshot!("verify_after_add", verified);

    // A directory becomes a tree artifact; --targets marks it device code.
    let db = context.inputs.join("rocrand-db-gfx90a");
    fs::create_dir_all(db.join("share")).unwrap();
    fs::write(db.join("share/kernels.db"), b"tuning data").unwrap();
    run(context
        .add("rocm-rand-db", "5.3.3", &[db])
        .args(["--targets", "gfx90a"]));
    assert!(context
        .repo
        .join("pool/rocm-rand-db/5.3.3/rocrand-db-gfx90a.tar.zst")
        .exists());
    let shard = published_shard(&context.repo, "rocm-rand-db");
    assert_eq!(
        shard.versions[0].artifacts[0].targets.as_deref().unwrap(),
        ["gfx90a".parse::<kpack_repo_index::Listed>().unwrap()]
    );

    // Unsigned index, then signed: verify needs the signature.
    run(kpack_repo().arg("index").arg(&context.repo));
    let unsigned = context.transcript(&mut context.verify(&context.repo), &[]);
    insta::assert_snapshot!("verify_unsigned", unsigned);
    run(&mut context.sign());
    let verified = context.transcript(&mut context.verify(&context.repo), &[]);
    insta::assert_snapshot!("verify_signed_again", verified);
}

/// `kpack-repo` run under the common umask 022, whatever the test's own.
fn kpack_repo_under_umask_022() -> Command {
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", "umask 022 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_kpack-repo"))
        .env_remove("KPACK_REPO_PASSWORD");
    command
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// Every file and directory under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path));
        }
        found.push(path);
    }
    found
}

#[test]
fn an_operators_stock_minisign_key_publishes_a_repository_a_web_server_can_read() {
    let context = TestContext::new();
    let work = context.dir.path();
    let (public, secret) = (work.join("op.pub"), work.join("op.key"));
    let keygen = kpack_test_support::tool("minisign")
        .args(["-G", "-W", "-p"])
        .arg(&public)
        .arg("-s")
        .arg(&secret)
        .output()
        .unwrap();
    assert!(keygen.status.success());
    let (repo, inputs) = (&context.repo, &context.inputs);

    run(kpack_repo_under_umask_022()
        .arg("add")
        .arg(repo)
        .args(["rocm-rand", "5.3.3"])
        .args(rocm_rand_artifacts(inputs))
        .arg("--key")
        .arg(&secret));
    run(kpack_repo_under_umask_022()
        .arg("sign")
        .arg(repo)
        .arg("--key")
        .arg(&secret));
    let verified = context.transcript(
        kpack_repo()
            .arg("verify")
            .arg(repo)
            .arg("--pubkey")
            .arg(&public),
        &[],
    );
    insta::assert_snapshot!(verified);
    // The stock tool verifies the root with its own key file too.
    let stock = kpack_test_support::tool("minisign")
        .arg("-Vm")
        .arg(repo.join("index.toml"))
        .arg("-p")
        .arg(&public)
        .output()
        .unwrap();
    assert!(
        stock.status.success(),
        "{}",
        String::from_utf8_lossy(&stock.stderr)
    );

    // Everything published is readable by a web server's own user.
    let published = walk(repo);
    assert!(published.len() >= 8, "{published:?}");
    for path in published {
        let expected = if path.is_dir() { 0o755 } else { 0o644 };
        assert_eq!(mode(&path), expected, "{}", path.display());
    }
}

#[test]
fn reindex_refuses_changed_bytes_at_a_published_path() {
    let context = TestContext::new();
    let repo = &context.repo;
    run(&mut context.add("rocm-rand", "5.3.3", &rocm_rand_artifacts(&context.inputs)));
    // Unchanged bytes: a new root, signed, that still verifies.
    run(&mut context.index());
    let verified = context.transcript(&mut context.verify(repo), &[]);
    insta::assert_snapshot!("verify_after_reindex", verified);

    let root_before = fs::read(repo.join("index.toml")).unwrap();
    let pool_file = repo.join("pool/rocm-rand/5.3.3/rocm_gfx90a.kpack.zst");
    fs::write(&pool_file, b"other bytes").unwrap();
    insta::assert_snapshot!(context.transcript(&mut context.index(), &[]));
    assert_eq!(fs::read(repo.join("index.toml")).unwrap(), root_before);
}

#[test]
fn a_password_protected_key_needs_its_password() {
    let context = TestContext::new();
    let key = context.dir.path().join("locked");
    let unset = context.transcript(kpack_repo().arg("keygen").arg(&key), &[]);
    insta::assert_snapshot!("keygen_without_password", unset);
    run(kpack_repo()
        .arg("keygen")
        .arg(&key)
        .env("KPACK_REPO_PASSWORD", "hunter2"));
    let locked = context.transcript(
        kpack_repo()
            .arg("sign")
            .arg(context.dir.path())
            .arg("--key")
            .arg(key.with_extension("key")),
        &[],
    );
    insta::assert_snapshot!("sign_without_password", locked);
}

/// The rocRAND manifest, from Debian's package, to a verified repository
/// whose shard lists a host tree and one archive per processor.
#[test]
fn builds_the_rocrand_manifest() {
    let context = TestContext::new();
    let repo = &context.repo;
    build_and_verify_rocm_rand(&context, Path::new(env!("CARGO_BIN_EXE_kpack-repo")));

    let shard = published_shard(repo, "rocm-rand");
    let paths: Vec<&str> = shard.versions[0]
        .artifacts
        .iter()
        .map(|a| a.path.as_str())
        .collect();
    assert_eq!(
        paths,
        [
            "pool/rocm-rand/5.3.3/rocm-rand-5.3.3-host.tar.zst",
            // Every archive is smaller compressed whole, its code objects
            // stored as they are, so each is served so.
            "pool/rocm-rand/5.3.3/rocrand_gfx1030.kpack.zst",
            "pool/rocm-rand/5.3.3/rocrand_gfx803.kpack.zst",
            "pool/rocm-rand/5.3.3/rocrand_gfx900.kpack.zst",
            "pool/rocm-rand/5.3.3/rocrand_gfx906.kpack.zst",
            "pool/rocm-rand/5.3.3/rocrand_gfx908.kpack.zst",
            "pool/rocm-rand/5.3.3/rocrand_gfx90a.kpack.zst"
        ]
    );
    // The host tree holds the split library and its symlink, not .kpack/.
    let host = fs::read(repo.join(paths[0])).unwrap();
    let tar = zstd::decode_all(&host[..]).unwrap();
    let mut archive = tar::Archive::new(&tar[..]);
    let entries: Vec<(String, tar::EntryType)> = archive
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.path().unwrap().to_string_lossy().into_owned(),
                e.header().entry_type(),
            )
        })
        .collect();
    let names: Vec<&str> = entries.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["lib", "lib/librocrand.so.1", "lib/librocrand.so.1.1"]
    );
    assert_eq!(entries[1].1, tar::EntryType::Symlink);

    // A mirror for gfx90a carries the host tree and the gfx90a archive
    // only, and verifies with the upstream key as a partial mirror.
    let mirror = context.dir.path().join("mirror");
    let mirrored = context.transcript(
        context.mirror(repo, &mirror).args(["--targets", "gfx90a"]),
        &[],
    );
    insta::assert_snapshot!("mirror_of_gfx90a", mirrored);
    assert_eq!(
        file_names(&mirror.join("pool/rocm-rand/5.3.3")),
        ["rocm-rand-5.3.3-host.tar.zst", "rocrand_gfx90a.kpack.zst"]
    );
    assert_eq!(
        fs::read(mirror.join("index.toml")).unwrap(),
        fs::read(repo.join("index.toml")).unwrap()
    );
    let verified = context.transcript(context.verify(&mirror).arg("--partial"), &[]);
    insta::assert_snapshot!("partial_verify_of_gfx90a", verified);
    // Without --partial the missing artifacts are errors.
    refused(&mut context.verify(&mirror));
}

/// `pip install kpack-repo`: the maturin wheel, installed into a fresh
/// environment, builds the rocRAND repository, which the context's
/// kpack-repo verifies.
#[test]
fn the_maturin_wheel_installs_a_kpack_repo_that_publishes_the_rocrand_repository() {
    use kpack_test_support::wheels::{build_wheel, install_fresh};
    let context = TestContext::new();
    let wheel = build_wheel("kpack-repo", &context.dir.path().join("wheels"));
    assert_eq!(
        wheel.file_name().unwrap().to_string_lossy(),
        format!(
            "kpack_repo-{}-py3-none-manylinux_2_28_{}.whl",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::ARCH
        )
    );
    let exe = install_fresh(&wheel, &context.dir.path().join("venv")).join("kpack-repo");
    build_and_verify_rocm_rand(&context, &exe);
}

/// Builds the rocRAND repository with the kpack-repo `program`; the
/// context's kpack-repo verifies it.
fn build_and_verify_rocm_rand(context: &TestContext, program: &Path) {
    let template = build_rocm_rand(&context.repo, &context.secret_key());
    let built = context.transcript(
        Command::new(program)
            .args(template.get_args())
            .env_remove("KPACK_REPO_PASSWORD"),
        &[],
    );
    insta::assert_snapshot!("rocrand_build", built);
    let verified = context.transcript(&mut context.verify(&context.repo), &[]);
    insta::assert_snapshot!("rocrand_verify", verified);
}

/// The names of the files in `dir`, sorted.
fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `add --component`: the trees --targets marks are of that component, the
/// archives beside them of the default one, left unsaid.
#[test]
fn add_marks_device_trees_with_their_component() {
    let context = TestContext::new();
    let payload = context.inputs.join("rocblas-tensile-gfx90a");
    fs::create_dir_all(payload.join("lib/rocblas/library")).unwrap();
    fs::write(
        payload.join("lib/rocblas/library/TensileLibrary_gfx90a.dat"),
        b"tuning data",
    )
    .unwrap();
    let archive = archive(&context.inputs, "gfx90a", &["gfx90a:xnack-"]);
    run(context
        .add("rocm-blas", "5.5.1", &[archive, payload])
        .args(["--targets", "gfx90a", "--component", "tensile"]));
    let shard = published_shard(&context.repo, "rocm-blas");
    let artifacts = &shard.versions[0].artifacts;
    let tensile: kpack_repo_index::Component = "tensile".parse().unwrap();
    assert_eq!(artifacts[0].component, None);
    assert_eq!(
        artifacts[0].component(),
        Some(&kpack_repo_index::Component::KERNELS)
    );
    assert_eq!(artifacts[1].component.as_ref(), Some(&tensile));
    assert_eq!(
        artifacts[1].path.as_str(),
        "pool/rocm-blas/5.5.1/rocblas-tensile-gfx90a.tar.zst"
    );
    let shard_text = fs::read_to_string(
        fs::read_dir(context.repo.join("packages/rocm-blas"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path(),
    )
    .unwrap();
    assert_eq!(
        shard_text.matches("component = ").count(),
        1,
        "{shard_text}"
    );

    // A component without targets, or not spelt as a name, is bad usage.
    for args in [
        &["--component", "tensile"][..],
        &["--targets", "gfx90a", "--component", "Tensile"],
    ] {
        let output = context
            .add("rocm-blas", "5.5.2", &[host_tree(&context.inputs)])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
    }
}

/// A mirror for one target keeps its artifact of every component: the
/// archive and the Tensile payload, and nothing for other targets.
#[test]
fn a_mirror_for_a_target_keeps_each_component_of_it() {
    use kpack_repo::publish::{NewArtifact, NewVersion, Publisher};
    let context = TestContext::new();
    let inputs = &context.inputs;
    let tensile = |target: &str| NewArtifact {
        owner: None,
        file: tree(
            inputs,
            &format!("tensile-{target}.tar.zst"),
            &format!("lib/rocblas/library/TensileLibrary_{target}.dat"),
            target.as_bytes(),
        ),
        targets: Some(vec![target.parse().unwrap()]),
        component: Some("tensile".parse().unwrap()),
        unpacked_size: None,
    };
    let kernels = |file| NewArtifact {
        owner: None,
        file,
        targets: None,
        component: None,
        unpacked_size: None,
    };
    let key = kpack_sign::SecretKey::load(&context.secret_key(), None).unwrap();
    Publisher::open(&context.repo)
        .unwrap()
        .add(
            &NewVersion::new(
                &"rocm-blas".parse().unwrap(),
                &semver::Version::new(5, 5, 1),
            ),
            &[
                kernels(host_tree(inputs)),
                kernels(archive(inputs, "gfx90a", &["gfx90a:xnack-"])),
                kernels(archive(inputs, "gfx1100", &["gfx1100"])),
                tensile("gfx90a"),
                tensile("gfx1100"),
            ],
            Some(&key),
        )
        .unwrap();
    let mirror = context.dir.path().join("mirror");
    let mut mirror_command = context.mirror(&context.repo, &mirror);
    mirror_command.args(["--targets", "gfx90a:sramecc+:xnack-"]);
    insta::assert_snapshot!(
        "mirror_of_components",
        context.transcript(&mut mirror_command, &[])
    );
    assert_eq!(
        file_names(&mirror.join("pool/rocm-blas/5.5.1")),
        [
            "rocm-rand-host.tar.zst",
            "rocm_gfx90a.kpack.zst",
            "tensile-gfx90a.tar.zst"
        ]
    );
    run(context.verify(&mirror).arg("--partial"));
}

/// A static HTTP server on loopback serving `dir` (Python's http.server),
/// stopped when dropped.
struct Server {
    child: std::process::Child,
    url: String,
}

impl Server {
    fn start(dir: &Path) -> Server {
        use std::io::BufRead;
        let mut child = kpack_test_support::tool("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "0",
                "--bind",
                "127.0.0.1",
                "--directory",
            ])
            .arg(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("python3 for a loopback HTTP server");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
        let port: u16 = line
            .split_whitespace()
            .nth(5)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        Server {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn verifies_and_mirrors_over_http() {
    let context = TestContext::new();
    let (dir, repo, inputs) = (context.dir.path(), &context.repo, &context.inputs);
    run(&mut context.add(
        "rocm-rand",
        "5.3.3",
        &[
            host_tree(inputs),
            archive(inputs, "gfx90a", &["gfx90a:xnack-"]),
            archive(inputs, "gfx1030", &["gfx1030"]),
        ],
    ));
    let server = Server::start(repo);

    let server_mask = [(server.url.as_str(), "<SERVER>")];
    let verified = context.transcript(&mut context.verify(&server.url), &server_mask);
    insta::assert_snapshot!("verify_over_http", verified);

    let mirror = dir.join("mirror");
    let mut mirror_command = context.mirror(&server.url, &mirror);
    mirror_command.args(["--targets", "gfx1030"]);
    let mirrored = context.transcript(&mut mirror_command, &server_mask);
    insta::assert_snapshot!("mirror_over_http", mirrored);
    assert!(mirror
        .join("pool/rocm-rand/5.3.3/rocm_gfx1030.kpack.zst")
        .exists());
    assert!(!mirror
        .join("pool/rocm-rand/5.3.3/rocm_gfx90a.kpack.zst")
        .exists());
    run(context.verify(&mirror).arg("--partial"));

    // A served archive with a flipped byte is caught, naming its URL.
    let archive_path = repo.join("pool/rocm-rand/5.3.3/rocm_gfx1030.kpack.zst");
    let mut bytes = fs::read(&archive_path).unwrap();
    bytes[70] ^= 1;
    fs::write(&archive_path, bytes).unwrap();
    let masks = [(server.url.as_str(), "<SERVER>")];
    let verify = context.transcript(&mut context.verify(&server.url), &masks);
    insta::assert_snapshot!("tampered_upstream_verify", verify);

    // A mirror of the tampered upstream refuses the archive before writing
    // it, and publishes nothing: no root names it.
    let refused_mirror = dir.join("refused");
    let mirror = context.transcript(
        context
            .mirror(&server.url, &refused_mirror)
            .args(["--targets", "gfx1030"]),
        &masks,
    );
    insta::assert_snapshot!("tampered_upstream_mirror", mirror);
    assert!(!refused_mirror.join("index.toml").exists());
    assert!(!refused_mirror
        .join("pool/rocm-rand/5.3.3/rocm_gfx1030.kpack.zst")
        .exists());

    // An upstream signed by another key is refused before anything is
    // read past its root.
    let other = dir.join("other");
    run(kpack_repo().arg("keygen").arg(&other).arg("--unencrypted"));
    let wrong_key = dir.join("wrong-key");
    let mirror = context.transcript(
        kpack_repo()
            .arg("mirror")
            .arg(&server.url)
            .arg(&wrong_key)
            .arg("--pubkey")
            .arg(other.with_extension("pub")),
        &masks,
    );
    insta::assert_snapshot!("upstream_of_another_key_mirror", mirror);
    assert!(!wrong_key.exists());

    // A shard that does not match the hash the root pins is refused too,
    // before any artifact is looked at.
    let shard = walk(&repo.join("packages"))
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "toml"))
        .unwrap();
    let text = fs::read_to_string(&shard).unwrap();
    // The same length, other bytes: caught by the pinned hash.
    let changed = text.replacen("name = \"rocm-rand\"", "name = \"rocm-rane\"", 1);
    assert_ne!(changed, text);
    fs::write(&shard, changed).unwrap();
    let shard_refused = dir.join("shard-refused");
    let mirror = context.transcript(&mut context.mirror(&server.url, &shard_refused), &masks);
    insta::assert_snapshot!("tampered_shard_mirror", mirror);
    assert!(!dir.join("shard-refused/index.toml").exists());
}

/// Three `kpack-repo add` processes on one repository at once: every
/// version ends up published (none lost to a concurrent swap of the root),
/// the index verifies.
#[test]
fn concurrent_adds_both_publish() {
    let context = TestContext::new();
    run(&mut context.add("rocm-core", "6.0.0", &[host_tree(&context.inputs)]));
    let children: Vec<_> = ["rocm-blas", "rocm-rand", "rocm-fft"]
        .iter()
        .map(|name| {
            let own = context.inputs.join(name);
            fs::create_dir_all(&own).unwrap();
            context
                .add(name, "6.0.0", &[archive(&own, "gfx1100", &["gfx1100"])])
                .args(["--depends", "rocm-core >=6"])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let verified = run(&mut context.verify(&context.repo));
    assert!(verified.contains("4 packages"), "{verified}");
    // Versions only increase; a publisher that lost a race may step over one.
    let version: u64 = verified
        .split("rocm version ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(version >= 4, "{verified}");
}

#[test]
fn a_url_other_than_s3_is_never_taken_for_a_repository() {
    let work = tempfile::tempdir().unwrap();
    let manifest = kpack_test_support::workspace().join("manifests/rocm-rand.toml");
    for args in [
        vec![
            "build",
            "gs://bucket/rocm",
            manifest.to_str().unwrap(),
            "--unsigned",
        ],
        vec![
            "add",
            "gs://bucket/rocm",
            "rocm-rand",
            "1.0.0",
            "host.tar.zst",
            "--unsigned",
        ],
        vec!["index", "gs://bucket/rocm"],
        vec!["sign", "gs://bucket/rocm", "--key", "k.key"],
        vec![
            "mirror",
            "https://example.org/rocm",
            "gs://bucket/rocm",
            "--pubkey",
            "k.pub",
        ],
    ] {
        let out = kpack_repo()
            .args(&args)
            .current_dir(work.path())
            .output()
            .unwrap();
        let name = format!("gs_url_{}", args[0]);
        insta::assert_snapshot!(name, kpack_test_support::transcript(&out, &[]));
    }
    let out = kpack_repo()
        .args(["verify", "gs://bucket/rocm", "--pubkey", "k.pub"])
        .current_dir(work.path())
        .output()
        .unwrap();
    insta::assert_snapshot!("gs_url_verify", kpack_test_support::transcript(&out, &[]));
    // Nothing was made of the URL: no `s3:` directory.
    assert_eq!(fs::read_dir(work.path()).unwrap().count(), 0);
}

/// Writes a zstd tar at `path` whose one file holds `size` zeros (a few KiB
/// that unpack to far more: a decompression bomb when `size` is large);
/// the length of its tar stream.
fn zero_tree(path: &Path, size: u64) -> u64 {
    fs::write(path, kpack_test_support::zero_bomb(size)).unwrap();
    kpack_test_support::zero_bomb_tar_len(size)
}

/// The text of the shard of `package` the repository's root names.
fn shard_text(repo: &Path, package: &str) -> (String, PathBuf) {
    let root = fs::read_to_string(repo.join("index.toml")).unwrap();
    let root = kpack_repo_index::RootIndex::parse("index.toml", &root).unwrap();
    let name = package.parse().unwrap();
    let path = repo.join(root.packages[&name].shard_path(&name).as_str());
    (fs::read_to_string(&path).unwrap(), path)
}

/// Every publish of a tree says how far it unpacks (the length of its tar
/// stream), so an installer can stop a bomb: a `.tar.zst` file given to
/// `add` (counted by decoding it), a directory packed by `add`, and the
/// trees `build` packs.
#[test]
fn trees_are_published_with_their_unpacked_size() {
    let context = TestContext::new();
    let bomb = context.inputs.join("bomb.tar.zst");
    let unpacked = zero_tree(&bomb, 256 << 20);
    assert!(fs::metadata(&bomb).unwrap().len() < 64 << 10);
    run(&mut context.add("bomb", "1.0.0", std::slice::from_ref(&bomb)));
    let (text, _) = shard_text(&context.repo, "bomb");
    assert!(
        text.contains(&format!("\nunpacked-size = {unpacked}\n")),
        "{text}"
    );

    let dir = context.inputs.join("data");
    fs::create_dir_all(dir.join("share")).unwrap();
    fs::write(dir.join("share/table.db"), vec![7u8; 5000]).unwrap();
    run(&mut context.add("data", "1.0.0", &[dir]));
    let packed = fs::read(context.repo.join("pool/data/1.0.0/data.tar.zst")).unwrap();
    let tar_length = zstd::decode_all(&packed[..]).unwrap().len();
    let (text, _) = shard_text(&context.repo, "data");
    assert!(
        text.contains(&format!("\nunpacked-size = {tar_length}\n")),
        "{text}"
    );

    run(&mut build_rocm_rand(&context.repo, &context.secret_key()));
    let (text, _) = shard_text(&context.repo, "rocm-rand");
    let host = "pool/rocm-rand/5.3.3/rocm-rand-5.3.3-host.tar.zst";
    let packed = fs::read(context.repo.join(host)).unwrap();
    let tar_length = zstd::decode_all(&packed[..]).unwrap().len();
    let entry = text
        .split("[[versions.artifacts]]")
        .find(|e| e.contains(host));
    assert!(
        entry
            .unwrap()
            .contains(&format!("\nunpacked-size = {tar_length}\n")),
        "{text}"
    );
    // Each archive declares what its code objects decode to.
    for entry in text
        .split("[[versions.artifacts]]")
        .filter(|e| e.contains(".kpack"))
    {
        let path = entry
            .lines()
            .find_map(|l| l.strip_prefix("path = "))
            .unwrap();
        let served = fs::read(context.repo.join(path.trim_matches('"'))).unwrap();
        // A transport-encoded archive is decoded first, as a client does.
        let decoded = match path.ends_with(".zst\"") {
            true => zstd::decode_all(&served[..]).unwrap(),
            false => served,
        };
        let file = context.dir.path().join("archive.kpack");
        fs::write(&file, decoded).unwrap();
        let archive = rocm_kpack::Archive::open(&file).unwrap();
        let declared = format!("\nunpacked-size = {}\n", archive.decoded_size());
        assert!(entry.contains(&declared), "{entry}");
    }
}

/// A published archive declares what its code objects decode to, every
/// TOC entry counted: nine entries sharing one stored frame of 1 MiB
/// declare 9 MiB, the most materializing may take from it.
#[test]
fn archives_are_published_with_what_their_code_objects_decode_to() {
    let context = TestContext::new();
    let shared = context.inputs.join("shared_gfx90a.kpack");
    let archive = kpack_test_support::zero_bomb_archive(
        "lib/libshared.so#0",
        &kpack_test_support::GFX90A_VARIANTS,
        1 << 20,
    );
    fs::write(&shared, archive).unwrap();
    run(&mut context.add("shared", "1.0.0", &[shared]));
    let (text, _) = shard_text(&context.repo, "shared");
    assert!(
        text.contains(&format!("\nunpacked-size = {}\n", 9u64 << 20)),
        "{text}"
    );
}

/// An archive that is smaller compressed whole is published so: its code
/// objects stored as they are and compressed with zstd (`.kpack.zst`),
/// the archive as installed pinned beside what is served, and the version
/// asking for a client that decodes. `--no-transport-encoding`, or a
/// saving the archive does not reach, leaves it as it is.
#[test]
fn archives_are_published_transport_encoded_when_that_saves_enough() {
    let context = TestContext::new();
    let input = archive(
        &context.inputs,
        "gfx90a",
        &["gfx90a:xnack-", "gfx90a:xnack+"],
    );
    let original = rocm_kpack::Archive::open(&input).unwrap();
    let entries = |archive: &rocm_kpack::Archive| -> Vec<(String, String, Vec<u8>)> {
        let mut entries = Vec::new();
        for binary in archive.binaries() {
            for target in archive.targets_of(binary).unwrap() {
                let code = archive.kernel(binary, target).unwrap().into_owned();
                entries.push((binary.to_owned(), target.to_string(), code));
            }
        }
        entries
    };
    let publish = |repo: &str, extra: &[&str]| {
        let repo = context.dir.path().join(repo);
        run(kpack_repo()
            .arg("add")
            .arg(&repo)
            .args(["rocm", "1.0.0"])
            .arg(&input)
            .args(extra)
            .arg("--key")
            .arg(context.secret_key()));
        let shard = published_shard(&repo, "rocm");
        (repo, shard.versions[0].clone())
    };

    let (repo, version) = publish("encoded", &[]);
    let artifact = &version.artifacts[0];
    assert_eq!(
        artifact.path.as_str(),
        "pool/rocm/1.0.0/rocm_gfx90a.kpack.zst"
    );
    assert_eq!(
        artifact.install_as.as_ref().unwrap().as_str(),
        ".kpack/rocm_gfx90a.kpack"
    );
    assert_eq!(artifact.encoding, Some(kpack_repo_index::Encoding::Zstd));
    assert_eq!(
        version.requires_client,
        Some(kpack_repo_index::ENCODING_CLIENT)
    );
    let served = fs::read(repo.join(artifact.path.as_str())).unwrap();
    assert!(served.len() * 100 <= fs::metadata(&input).unwrap().len() as usize * 98);
    let decoded = zstd::decode_all(&served[..]).unwrap();
    // The stock zstd tool, an operator's way to look inside, agrees.
    let stock = kpack_test_support::tool("zstd")
        .args(["-d", "-c"])
        .arg(repo.join(artifact.path.as_str()))
        .output()
        .unwrap();
    assert!(stock.status.success(), "{stock:?}");
    assert_eq!(stock.stdout, decoded);
    let installed = artifact.installed();
    assert_eq!(
        (kpack_repo_index::Sha256::of(&decoded), decoded.len() as u64),
        (installed.sha256, installed.size)
    );
    let recoded = rocm_kpack::Archive::from_bytes("decoded", &decoded).unwrap();
    assert_eq!(recoded.scheme(), rocm_kpack::Scheme::None);
    assert_eq!(entries(&recoded), entries(&original));
    assert_eq!(artifact.unpacked_size, Some(original.decoded_size()));
    run(&mut context.verify(&repo));

    for (name, extra) in [
        ("plain", &["--no-transport-encoding"][..]),
        ("not-worth-it", &["--transport-min-saving", "100"][..]),
    ] {
        let (repo, version) = publish(name, extra);
        let artifact = &version.artifacts[0];
        assert_eq!(
            artifact.path.as_str(),
            "pool/rocm/1.0.0/rocm_gfx90a.kpack",
            "{name}"
        );
        assert_eq!(
            (artifact.encoding.as_ref(), version.requires_client.as_ref()),
            (None, None)
        );
        let bytes = fs::read(repo.join(artifact.path.as_str())).unwrap();
        assert_eq!(bytes, fs::read(&input).unwrap(), "{name}");
    }
}

/// `verify` decodes each tree that declares its unpacked size and refuses
/// one that unpacks to more (stopping there, not at the end of a bomb) or
/// to less, naming the tree, the shard and both sizes.
#[test]
fn verify_refuses_a_tree_that_unpacks_to_other_than_it_declares() {
    let context = TestContext::new();
    let bomb = context.inputs.join("bomb.tar.zst");
    let unpacked = zero_tree(&bomb, 256 << 20);
    run(&mut context.add("bomb", "1.0.0", &[bomb]));
    run(&mut context.verify(&context.repo));
    for (declared, case) in [
        (1024, "bomb_declared_small"),
        (unpacked + 1, "bomb_declared_large"),
    ] {
        declare_unpacked_size(&context, "bomb", declared);
        let refusal = context.transcript(&mut context.verify(&context.repo), &[]);
        insta::assert_snapshot!(case, refusal);
    }
}

/// Rewrites the shard of `package` so that its one artifact declares
/// `declared` as its unpacked size, points the root at it and signs it: a
/// lying publisher.
fn declare_unpacked_size(context: &TestContext, package: &str, declared: u64) {
    let (text, old_path) = shard_text(&context.repo, package);
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with("unpacked-size"))
        .map(str::to_owned)
        .collect();
    let size = lines.iter().position(|l| l.starts_with("size = ")).unwrap();
    lines.insert(size + 1, format!("unpacked-size = {declared}"));
    let lie = lines.join("\n") + "\n";
    let name = package.parse().unwrap();
    let new_path = context
        .repo
        .join(kpack_repo_index::Shard::path_for(&name, lie.as_bytes()));
    fs::write(&new_path, &lie).unwrap();
    let old_hash = old_path.file_stem().unwrap().to_str().unwrap().to_owned();
    let new_hash = new_path.file_stem().unwrap().to_str().unwrap().to_owned();
    let root = fs::read_to_string(context.repo.join("index.toml")).unwrap();
    assert!(root.contains(&old_hash));
    fs::write(
        context.repo.join("index.toml"),
        root.replace(&old_hash, &new_hash),
    )
    .unwrap();
    run(&mut context.sign());
}

/// What `kpack-repo verify` and `mirror` of a misbehaving server did.
struct Bounded {
    context: TestContext,
    server: kpack_test_support::server::TestServer,
    /// Peak memory of a good verify and a good mirror.
    baseline: (u64, u64),
}

const MIB: u64 = 1 << 20;

impl Bounded {
    /// A small published repository served over loopback, and how much
    /// memory verifying and mirroring it take.
    fn new() -> Bounded {
        let context = TestContext::new();
        run(&mut context.add("rocm-rand", "5.3.3", &rocm_rand_artifacts(&context.inputs)));
        let server = kpack_test_support::server::TestServer::start(&context.repo);
        let mut bounded = Bounded {
            context,
            server,
            baseline: (0, 0),
        };
        let verify = bounded.watched(bounded.context.verify(bounded.server.url()));
        assert!(verify.output.status.success(), "{verify:?}");
        let mirror = bounded.mirror("good");
        assert!(mirror.output.status.success(), "{mirror:?}");
        bounded.baseline = (verify.peak_rss, mirror.peak_rss);
        bounded
    }

    /// Runs `command` with short time bounds (from the environment, so the
    /// same test runs against any build) and its spool files in the
    /// context, killed past 20 s or 1 GiB.
    fn watched(&self, mut command: Command) -> kpack_test_support::measure::Measured {
        let tmp = self.context.dir.path().join("tmp");
        fs::create_dir_all(&tmp).unwrap();
        command
            .env("TMPDIR", &tmp)
            .env("KPACK_REPO_LOW_SPEED_LIMIT", "1024")
            .env("KPACK_REPO_LOW_SPEED_TIME", "1")
            .env("KPACK_REPO_INDEX_TIMEOUT", "5");
        kpack_test_support::measure::run_watched(
            &mut command,
            std::time::Duration::from_secs(20),
            1024 * MIB,
        )
    }

    fn mirror(&self, name: &str) -> kpack_test_support::measure::Measured {
        let dest = self.context.dir.path().join("mirrors").join(name);
        self.watched(self.context.mirror(self.server.url(), &dest))
    }

    /// With `fault` on `path`, verify and mirror each fail quickly, in
    /// little memory, naming the URL and each of `mentions`; at most
    /// `pinned` bytes (and what socket buffers hold) are taken from the
    /// server.
    fn assert_refused(&self, path: &str, fault: Fault, pinned: u64, mentions: &[&str]) {
        for (tool, baseline) in [("verify", self.baseline.0), ("mirror", self.baseline.1)] {
            self.server.clear_faults();
            self.server.clear_requests();
            self.server.fault(path, fault.clone());
            let run = if tool == "verify" {
                self.watched(self.context.verify(self.server.url()))
            } else {
                self.mirror(&format!("{}-{}", path.replace('/', "-"), tool))
            };
            let case = format!("{tool}: {fault:?} on {path}");
            let text = String::from_utf8_lossy(&run.output.stderr).into_owned();
            assert_eq!(run.killed, None, "{case}: {text}");
            let growth = run.peak_rss.saturating_sub(baseline);
            let taken = self.server.bytes_sent(path);
            eprintln!(
                "{case}: refused in {:?}, peak RSS {} MiB ({} MiB over a good run), {taken} bytes taken",
                run.elapsed,
                run.peak_rss / MIB,
                growth / MIB
            );
            assert_eq!(run.output.status.code(), Some(1), "{case}: {text}");
            assert!(growth < 64 * MIB, "{case}: grew {growth} bytes");
            assert!(taken < pinned + 64 * MIB, "{case}: {taken} bytes taken");
            // Retries are told first, as notes; then the error.
            let notes = text.find("error:").map(|at| &text[..at]);
            assert!(
                notes.is_some_and(|notes| notes.lines().all(|line| line.starts_with("note: ")))
                    && !text.contains("panicked"),
                "{case}: {text}"
            );
            let url = format!("{}/{path}", self.server.url());
            assert!(text.contains(&url), "{case}: no {url} in {text}");
            for mention in mentions {
                assert!(text.contains(mention), "{case}: no {mention:?} in {text}");
            }
        }
        self.server.clear_faults();
    }

    fn size(&self, path: &str) -> u64 {
        fs::metadata(self.context.repo.join(path)).unwrap().len()
    }

    fn shard(&self) -> String {
        let dir = self.context.repo.join("packages/rocm-rand");
        let entry = fs::read_dir(dir).unwrap().next().unwrap().unwrap();
        format!("packages/rocm-rand/{}", entry.file_name().to_string_lossy())
    }
}

use kpack_test_support::server::Fault;

#[test]
fn verify_and_mirror_stop_an_endless_or_oversized_root_at_its_cap() {
    let bounded = Bounded::new();
    let cap = (16 * MIB).to_string();
    for fault in [
        Fault::Endless,
        Fault::Oversized {
            size: 64 * MIB,
            declared: true,
        },
    ] {
        bounded.assert_refused("index.toml", fault, 16 * MIB, &[&cap, "max-index-size"]);
    }
}

#[test]
fn verify_and_mirror_stop_a_shard_and_an_artifact_at_their_pinned_size() {
    let bounded = Bounded::new();
    let shard = bounded.shard();
    let size = bounded.size(&shard);
    bounded.assert_refused(&shard, Fault::Endless, size, &[&format!("{size} bytes")]);
    let archive = "pool/rocm-rand/5.3.3/rocm_gfx90a.kpack.zst";
    let size = bounded.size(archive);
    let oversized = Fault::Oversized {
        size: 1 << 30,
        declared: false,
    };
    bounded.assert_refused(archive, oversized, size, &[&format!("{size} bytes")]);
}

#[test]
fn verify_and_mirror_give_up_a_body_dripping_below_the_minimum_rate() {
    let bounded = Bounded::new();
    let drip = Fault::Drip {
        every: std::time::Duration::from_secs(5),
    };
    let shard = bounded.shard();
    for path in [
        "index.toml",
        shard.as_str(),
        "pool/rocm-rand/5.3.3/rocm_gfx90a.kpack.zst",
    ] {
        bounded.assert_refused(path, drip.clone(), bounded.size(path), &[]);
    }
}

/// An upstream whose root is 16 MiB (the cap) of the TOML shapes that cost
/// a parser the most, beside its real signature: `verify` and `mirror`
/// refuse it as a bad signature without parsing it, in little memory.
#[test]
fn verify_and_mirror_refuse_a_root_of_the_worst_toml_shapes_unparsed() {
    let bounded = Bounded::new();
    let root = bounded.context.repo.join("index.toml");
    let good = fs::read(&root).unwrap();
    for shape in kpack_test_support::hostile_toml::WORST_TOML_SHAPES {
        shape.write(&root, 16 * MIB as usize);
        let shape = shape.name;
        for (tool, baseline) in [
            ("verify", bounded.baseline.0),
            ("mirror", bounded.baseline.1),
        ] {
            let run = if tool == "verify" {
                bounded.watched(bounded.context.verify(bounded.server.url()))
            } else {
                bounded.mirror(&format!("{}-{tool}", shape.replace(' ', "-")))
            };
            let case = format!("{tool}: {shape}");
            let text = String::from_utf8_lossy(&run.output.stderr).into_owned();
            assert_eq!(run.killed, None, "{case}: {text}");
            let growth = run.peak_rss.saturating_sub(baseline);
            eprintln!(
                "{case}: refused in {:?}, peak RSS {} MiB ({} MiB over a good run)",
                run.elapsed,
                run.peak_rss / MIB,
                growth / MIB
            );
            assert!(growth < 64 * MIB, "{case}: grew {growth} bytes");
            assert_eq!(run.output.status.code(), Some(1), "{case}: {text}");
            assert!(
                text.contains("bad signature") && !text.contains("panicked"),
                "{case}: {text}"
            );
        }
    }
    fs::write(&root, good).unwrap();
}

/// An upstream that fails now and then: `verify` and `mirror` retry as
/// kpack-get does, resume a transfer cut halfway from where it stopped
/// (taking no byte twice), say so on stderr, and the mirror verifies.
#[test]
fn verify_and_mirror_retry_a_failing_upstream_and_resume_a_cut_transfer() {
    let bounded = Bounded::new();
    let archive = "pool/rocm-rand/5.3.3/rocm_gfx90a.kpack.zst";
    let size = bounded.size(archive);
    let shard = bounded.shard();
    let url = bounded.server.url();
    let dir = bounded.context.dir.path().display().to_string();
    for tool in ["verify", "mirror"] {
        bounded.server.clear_requests();
        bounded
            .server
            .fault("index.toml.minisig", Fault::Status500 { times: 1 });
        bounded.server.fault(&shard, Fault::Status500 { times: 2 });
        let cut = Fault::ResetAfter {
            after: size / 2,
            times: 1,
        };
        bounded.server.fault(archive, cut);
        let run = if tool == "verify" {
            bounded.watched(bounded.context.verify(&url))
        } else {
            bounded.mirror("flaky")
        };
        let masks = [
            (url.as_str(), "<SERVER>"),
            (shard.as_str(), "<SHARD>"),
            (dir.as_str(), "<DIR>"),
        ];
        let text = kpack_test_support::transcript(&run.output, &masks);
        insta::assert_snapshot!(format!("flaky_upstream_{tool}"), text);
        let ranges: Vec<_> = bounded
            .server
            .requests()
            .into_iter()
            .filter(|request| request.path == archive)
            .map(|request| request.range)
            .collect();
        assert_eq!(
            ranges,
            [None, Some(format!("bytes={}-", size / 2))],
            "{tool}"
        );
        assert_eq!(bounded.server.bytes_sent(archive), size, "{tool}");
    }
    let mirrored = bounded.context.dir.path().join("mirrors/flaky");
    run(&mut bounded.context.verify(&mirrored));
}

/// A manifest set with one manifest: rocRAND (Debian 12's) under `name`,
/// with `extra` lines in its `[package]` table and its .deb found by
/// `pattern`.
fn one_manifest_set(dir: &Path, name: &str, extra: &str, pattern: &str) -> PathBuf {
    let set = dir.join("set");
    fs::create_dir_all(&set).unwrap();
    fs::write(
        set.join("names.toml"),
        format!("[debian]\nlibrocrand1 = \"{name}\"\n"),
    )
    .unwrap();
    fs::write(
        set.join(format!("{name}.toml")),
        format!(
            "[package]\nname = \"{name}\"\n{extra}\n[source]\ndebian = \"{pattern}\"\n\
             [source.map]\n\"usr/lib/x86_64-linux-gnu\" = \"lib\"\n"
        ),
    )
    .unwrap();
    set
}

fn build_set(context: &TestContext, set: &Path) -> Command {
    let mut command = kpack_repo();
    command
        .arg("build")
        .arg(&context.repo)
        .arg(set)
        .arg("--sources")
        .arg(kpack_test_support::fixtures().join("debian"))
        .arg("--key")
        .arg(context.secret_key());
    command
}

/// A set whose dependency nothing provides, or whose glob matches no
/// .deb, is refused before anything is built, naming what and where.
#[test]
fn a_set_with_an_unmet_dependency_or_a_missing_deb_publishes_nothing() {
    let context = TestContext::new();
    let set = one_manifest_set(
        context.dir.path(),
        "rocm-rand",
        "depends = [\"rocm-core >=5\"]",
        "librocrand1_*_amd64.deb",
    );
    let unmet = context.transcript(&mut build_set(&context, &set), &[]);
    insta::assert_snapshot!("set_with_unmet_dependency", unmet);
    assert!(!context.repo.exists(), "nothing written");

    let other = context.dir.path().join("other");
    let set = one_manifest_set(&other, "rocm-rand", "", "librocrand9_*_amd64.deb");
    let fixtures = kpack_test_support::fixtures().display().to_string();
    let missing = context.transcript(
        &mut build_set(&context, &set),
        &[(fixtures.as_str(), "<FIXTURES>")],
    );
    insta::assert_snapshot!("set_with_missing_deb", missing);
    assert!(!context.repo.exists(), "nothing written");
}

/// Versions and system requirements come from the control data: Debian
/// 12's rocRAND 5.3.3-4 is 5.3.3+deb.4, needing the system's libc6 and
/// HIP runtime.
#[test]
fn a_set_takes_version_and_system_requirements_from_the_deb() {
    let context = TestContext::new();
    let set = one_manifest_set(context.dir.path(), "rocm-rand", "", "librocrand1_*.deb");
    let built = context.transcript(&mut build_set(&context, &set), &[]);
    insta::assert_snapshot!(built);
    let shard = published_shard(&context.repo, "rocm-rand");
    let version = &shard.versions[0];
    assert_eq!(version.version.to_string(), "5.3.3+deb.4");
    assert!(version.depends.is_empty());
    assert!(
        version
            .system_requires
            .iter()
            .any(|r| r.starts_with("libc6 (>= ")),
        "{:?}",
        version.system_requires
    );
    assert!(
        version
            .system_requires
            .iter()
            .any(|r| r.starts_with("libamdhip64-5")),
        "{:?}",
        version.system_requires
    );
}

/// A `file://` URL names an absolute directory, as in kpack-get: a
/// relative one is refused, saying to write a plain path, which works.
#[test]
fn a_relative_file_url_is_refused_as_kpack_get_refuses_it() {
    let context = TestContext::new();
    run(&mut context.add("rocm-rand", "5.3.3", &rocm_rand_artifacts(&context.inputs)));
    let mut verify = context.verify("file://rocm");
    verify.current_dir(context.dir.path());
    insta::assert_snapshot!(context.transcript(&mut verify, &[]));
    let mut plain = context.verify("rocm");
    plain.current_dir(context.dir.path());
    insta::assert_snapshot!(
        "verify_plain_relative_path",
        context.transcript(&mut plain, &[])
    );
}

#[test]
fn add_publishes_a_tree_a_family_owns_and_mirrors_keep_it_for_member_targets() {
    let context = TestContext::new();
    let gfx1100 = archive(&context.inputs, "gfx1100", &["gfx1100"]);
    let owned = tree(
        &context.inputs,
        "torch-gfx11-aotriton.tar.zst",
        "lib/aotriton.images/amd-gfx11xx/__signature__",
        b"gfx11",
    );
    let added = context.transcript(
        context.add("torch", "2.9.0", &[gfx1100, owned]).args([
            "--owner",
            "gfx11",
            "--component",
            "aotriton",
        ]),
        &[],
    );
    insta::assert_snapshot!("add_owned", added);
    let shard = published_shard(&context.repo, "torch");
    let version = &shard.versions[0];
    // Its archive is transport-encoded, which needs a newer client than
    // owners do.
    assert_eq!(
        version.requires_client,
        Some(kpack_repo_index::ENCODING_CLIENT)
    );
    let owners: Vec<Option<String>> = version
        .artifacts
        .iter()
        .map(|a| a.owner.as_ref().map(ToString::to_string))
        .collect();
    assert_eq!(owners, [None, Some("gfx11".to_owned())]);

    // A mirror for a member of gfx11 carries the owned tree; one for
    // another GPU does not.
    let for_target = |target: &str| {
        let dest = context.dir.path().join(format!("mirror-{target}"));
        run(context
            .mirror(&context.repo, &dest)
            .args(["--targets", target]));
        dest.join("pool/torch/2.9.0/torch-gfx11-aotriton.tar.zst")
            .exists()
    };
    assert!(for_target("gfx1151"));
    assert!(!for_target("gfx942"));

    let refused_owner = context.transcript(
        context
            .add("torch", "2.9.1", &[host_tree(&context.inputs)])
            .args(["--owner", "gfx1100"]),
        &[],
    );
    insta::assert_snapshot!("add_owner_target_refused", refused_owner);
}

/// A repository is published signed: `build` and `add` without a secret
/// key are usage errors naming `--secret-key` and `--unsigned`; with
/// `--unsigned` the repository is published without a signature (which
/// kpack-get refuses: its trust tests).
#[test]
fn publishing_unsigned_takes_saying_so() {
    let work = tempfile::tempdir().unwrap();
    let repo = work.path().join("repo");
    let manifest = kpack_test_support::workspace().join("manifests/rocm-rand.toml");
    let debian = kpack_test_support::fixtures().join("debian");
    let refused = kpack_repo()
        .arg("build")
        .arg(&repo)
        .arg(&manifest)
        .arg("--sources")
        .arg(&debian)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--secret-key") && stderr.contains("--unsigned"),
        "{stderr}"
    );
    assert!(!repo.exists());
    let added = kpack_repo()
        .args(["add"])
        .arg(&repo)
        .args(["rocm-rand", "1.0.0", "host.tar.zst"])
        .output()
        .unwrap();
    assert_eq!(added.status.code(), Some(2));

    kpack_test_support::run(
        kpack_repo()
            .arg("build")
            .arg(&repo)
            .arg(&manifest)
            .arg("--sources")
            .arg(&debian)
            .arg("--unsigned"),
    );
    assert!(repo.join("index.toml").is_file());
    assert!(!repo.join("index.toml.minisig").exists());
}

#[test]
fn each_version_records_the_fat_packages_it_was_built_from() {
    let context = TestContext::new();
    run(&mut build_rocm_rand(&context.repo, &context.secret_key()));
    let deb = kpack_test_support::fixtures().join("debian/librocrand1_5.3.3-4_amd64.deb");
    let shard = published_shard(&context.repo, "rocm-rand");
    let built = &shard.versions[0].built_from;
    assert_eq!(built.len(), 1, "{built:?}");
    assert_eq!(built[0].file, "librocrand1_5.3.3-4_amd64.deb");
    assert_eq!(built[0].size, fs::metadata(&deb).unwrap().len());
    assert_eq!(built[0].package.as_deref(), Some("librocrand1"));
    assert_eq!(built[0].kind, kpack_repo_index::schema::SourceKind::Deb);
    // The root names the Debian package, for a user who types it.
    let root: kpack_repo_index::RootIndex =
        toml::from_str(&fs::read_to_string(context.repo.join("index.toml")).unwrap()).unwrap();
    assert_eq!(
        root.packages[&"rocm-rand".parse().unwrap()].built_from,
        ["librocrand1"]
    );

    // `add --built-from` records a file given by hand: a fat wheel here.
    let wheel = context.inputs.join("demo-1.0-py3-none-any.whl");
    fs::write(&wheel, vec![0u8; 12_345]).unwrap();
    let host = host_tree(&context.inputs);
    run(context
        .add("demo", "1.0.0", &[host])
        .arg("--built-from")
        .arg(&wheel));
    let built = published_shard(&context.repo, "demo").versions[0]
        .built_from
        .clone();
    assert_eq!(built.len(), 1, "{built:?}");
    assert_eq!(
        (built[0].file.as_str(), built[0].size, built[0].kind),
        (
            "demo-1.0-py3-none-any.whl",
            12_345,
            kpack_repo_index::schema::SourceKind::Wheel
        )
    );
}

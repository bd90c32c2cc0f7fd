//! Keeping a repository tidy, on a directory and on a bucket (moto on
//! loopback): `kpack-repo prune --keep 1` drops old versions from the index
//! but not one a kept version pins exactly; `kpack-repo gc` deletes only
//! what no root a reader may still hold pins and what is older than the
//! grace period. After each step the repository verifies and kpack-get
//! installs every version the index still lists.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kpack_test_support::chain::{kpack_repo_exe, success, Env};
use kpack_test_support::run;
use kpack_test_support::s3::S3Server;
use kpack_test_support::server::TestServer;

/// The grace period the tests give gc, in seconds.
const GRACE: u64 = 4;

/// Where the repository is.
enum Place {
    Dir { dir: PathBuf },
    Bucket { server: S3Server },
}

impl Place {
    fn location(&self) -> String {
        match self {
            Place::Dir { dir } => dir.display().to_string(),
            Place::Bucket { .. } => "s3://kpack/rocm".into(),
        }
    }

    fn kpack_repo(&self, args: &[&str]) -> Command {
        let mut command = Command::new(kpack_repo_exe());
        if let Place::Bucket { server } = self {
            server.env(&mut command);
        }
        command.args(args);
        command
    }

    /// Runs `command`: its transcript, with the repository's location
    /// masked as `<REPO>`.
    fn transcript(&self, command: &mut Command) -> String {
        let output = command.output().unwrap();
        let location = self.location();
        kpack_test_support::transcript(&output, &[(location.as_str(), "<REPO>")])
    }

    /// Every key of the repository, sorted.
    fn keys(&self) -> Vec<String> {
        match self {
            Place::Dir { dir } => {
                let mut keys = Vec::new();
                let mut pending = vec![dir.clone()];
                while let Some(at) = pending.pop() {
                    for entry in fs_err::read_dir(&at).unwrap() {
                        let path = entry.unwrap().path();
                        if path.is_dir() {
                            pending.push(path);
                        } else {
                            let key = path.strip_prefix(dir).unwrap();
                            keys.push(key.to_string_lossy().into_owned());
                        }
                    }
                }
                keys.retain(|k| k != ".lock");
                keys.sort();
                keys
            }
            Place::Bucket { server } => server
                .keys("kpack", "rocm/")
                .into_iter()
                .map(|k| k.trim_start_matches("rocm/").to_owned())
                .collect(),
        }
    }

    /// Writes a file no root pins, as a killed publisher leaves one.
    fn plant(&self, key: &str) {
        match self {
            Place::Dir { dir } => {
                let path = dir.join(key);
                fs_err::create_dir_all(path.parent().unwrap()).unwrap();
                fs_err::write(path, b"left behind").unwrap();
            }
            Place::Bucket { server } => {
                let (status, _) =
                    server.request("PUT", &format!("/kpack/rocm/{key}"), b"left behind");
                assert_eq!(status, 200, "PUT {key}");
            }
        }
    }

    /// Installs each of `requests` (`name@version`) into a fresh prefix
    /// over HTTP; the versions installed.
    fn install_each(&self, keys: &Path, requests: &[&str]) -> Vec<String> {
        let (url, _server) = match self {
            Place::Dir { dir } => {
                let server = TestServer::start(dir);
                (server.url(), Some(server))
            }
            Place::Bucket { server } => (server.http_url("kpack", "rocm"), None),
        };
        let mut installed = Vec::new();
        for request in requests {
            let env = Env::new();
            let stdout = success(&mut env.with_repo(
                &url,
                &keys.join("key.pub"),
                &["--target", "gfx1100", "install", request],
            ));
            installed.extend(
                stdout
                    .lines()
                    .filter_map(|l| l.strip_prefix("installed "))
                    .map(str::to_owned),
            );
        }
        installed
    }
}

/// A tree artifact of `name` `version`: one file saying which it is.
fn tree(inputs: &Path, name: &str, version: &str) -> PathBuf {
    let dir = inputs.join(format!("{name}-{version}"));
    fs_err::create_dir_all(dir.join("share")).unwrap();
    fs_err::write(
        dir.join("share").join(format!("{name}.txt")),
        format!("{name} {version}"),
    )
    .unwrap();
    dir
}

fn tidy_flow(place: &Place) {
    let work = tempfile::tempdir().unwrap();
    run(Command::new(kpack_repo_exe())
        .args(["keygen", "key", "--unencrypted"])
        .current_dir(work.path()));
    let secret = work.path().join("key.key");
    let secret = secret.to_str().unwrap();
    let repo = place.location();
    // Roots 1-5: lib 2.0.0 is newest, tool 2.0.0 pins lib 1.0.0 exactly.
    for (name, version, depends) in [
        ("tool", "1.0.0", None),
        ("lib", "1.0.0", None),
        ("tool", "1.1.0", None),
        ("lib", "2.0.0", None),
        ("tool", "2.0.0", Some("lib =1.0.0")),
    ] {
        let artifact = tree(work.path(), name, version);
        let mut add = place.kpack_repo(&["add", &repo, name, version]);
        add.arg(&artifact).args(["--key", secret]);
        if let Some(depends) = depends {
            add.args(["--depends", depends]);
        }
        success(&mut add);
    }
    place.plant("pool/orphan/1.0.0/orphan-old.tar.zst");
    std::thread::sleep(Duration::from_secs(GRACE + 1));

    // lib 1.0.0 stays: tool 2.0.0 pins it. The same output on a
    // directory and on a bucket.
    let pruned =
        place.transcript(&mut place.kpack_repo(&["prune", &repo, "--keep", "1", "--key", secret]));
    insta::assert_snapshot!("prune", pruned);
    place.plant("pool/orphan/1.0.0/orphan-young.tar.zst");
    let tool_1 = "pool/tool/1.0.0/tool-1.0.0.tar.zst";
    let grace = format!("{GRACE}s");

    // Root 5 was current until a moment ago: its files stay, as do files
    // younger than the grace period; roots 1-4 and the old orphan go.
    let dry = place.transcript(&mut place.kpack_repo(&["gc", &repo, "--grace", &grace]));
    insta::assert_snapshot!("gc_dry_run", dry);
    let before = place.keys();
    assert!(before.iter().any(|k| k.ends_with("orphan-old.tar.zst")));
    let deleted =
        place.transcript(&mut place.kpack_repo(&["gc", &repo, "--grace", &grace, "--yes"]));
    insta::assert_snapshot!("gc_deleted", deleted);
    let after = place.keys();
    assert!(!after.iter().any(|k| k.ends_with("orphan-old.tar.zst")));
    assert!(!after.contains(&"roots/1.toml".to_owned()), "{after:?}");
    for kept in [
        tool_1,
        "pool/orphan/1.0.0/orphan-young.tar.zst",
        "roots/5.toml",
    ] {
        assert!(after.contains(&kept.to_owned()), "{kept}: {after:?}");
    }
    check(place, work.path());

    // A grace period later, root 5 and what only it pinned go too.
    std::thread::sleep(Duration::from_secs(GRACE + 1));
    success(&mut place.kpack_repo(&["gc", &repo, "--grace", &grace, "--yes"]));
    let last = place.keys();
    for gone in [
        tool_1,
        "pool/orphan/1.0.0/orphan-young.tar.zst",
        "roots/5.toml",
    ] {
        assert!(!last.contains(&gone.to_owned()), "{gone}: {last:?}");
    }
    let roots: Vec<&String> = last.iter().filter(|k| k.starts_with("roots/")).collect();
    assert_eq!(roots, ["roots/6.toml", "roots/6.toml.minisig"]);
    let again = place.transcript(&mut place.kpack_repo(&["gc", &repo, "--grace", &grace]));
    insta::assert_snapshot!("gc_with_nothing_left", again);
    check(place, work.path());
}

/// The repository verifies, and every version the index lists installs.
fn check(place: &Place, keys: &Path) {
    let pubkey = keys.join("key.pub");
    let verified = place.transcript(&mut place.kpack_repo(&[
        "verify",
        &place.location(),
        "--pubkey",
        pubkey.to_str().unwrap(),
    ]));
    insta::assert_snapshot!("verify_after_gc", verified);
    let installed = place.install_each(keys, &["tool@2.0.0", "lib@1.0.0", "lib@2.0.0"]);
    assert_eq!(
        installed,
        ["lib 1.0.0", "tool 2.0.0", "lib 1.0.0", "lib 2.0.0"]
    );
}

#[test]
fn prune_and_gc_keep_a_directory_repository_tidy() {
    let dir = tempfile::tempdir().unwrap();
    tidy_flow(&Place::Dir {
        dir: dir.path().join("rocm"),
    });
}

#[test]
fn prune_and_gc_keep_a_bucket_tidy() {
    let server = S3Server::start();
    server.create_bucket("kpack");
    tidy_flow(&Place::Bucket { server });
}

//! `kpack-repo` publishing to a real S3-compatible server on loopback
//! (moto): create-only pool files and shards, the swap of the root under
//! concurrent and killed publishers, multipart uploads, mirroring.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{archive, build_rocm_rand, host_tree, kpack_repo, refused, tree, TestContext};
use fs_err as fs;
use kpack_repo_index::{RootIndex, Shard};
use kpack_test_support::run;
use kpack_test_support::s3::S3Server;

const BUCKET: &str = "kpack";

/// A key pair and inputs (`TestContext`), a server with a bucket, and the
/// repository `s3://kpack/rocm` in it.
struct Bucket {
    context: TestContext,
    server: S3Server,
}

impl Bucket {
    fn new() -> Bucket {
        let server = S3Server::start();
        server.create_bucket(BUCKET);
        Bucket {
            context: TestContext::new(),
            server,
        }
    }

    fn url(&self) -> String {
        format!("s3://{BUCKET}/rocm")
    }

    /// `kpack-repo ARGS` with this server's environment.
    fn kpack_repo(&self, args: &[&str]) -> Command {
        let mut command = kpack_repo();
        self.server.env(&mut command);
        command.args(args);
        command
    }

    /// `kpack-repo add` to the bucket, signed.
    fn add(&self, package: &str, version: &str, artifacts: &[PathBuf]) -> Command {
        let mut command = self.kpack_repo(&["add", &self.url(), package, version]);
        command
            .args(artifacts)
            .arg("--key")
            .arg(self.context.secret_key());
        command
    }

    fn verify(&self, repo: &str) -> Command {
        let mut command = self.kpack_repo(&["verify", repo, "--pubkey"]);
        command.arg(self.context.public_key());
        command
    }

    /// Runs `command` for a snapshot: [`TestContext::transcript`] with the
    /// server's endpoint masked too.
    fn transcript(&self, command: &mut Command) -> String {
        self.context
            .transcript(command, &[(&self.server.endpoint, "<ENDPOINT>")])
    }

    fn root(&self) -> RootIndex {
        let bytes = self.server.get(BUCKET, "rocm/index.toml").unwrap();
        RootIndex::parse("index.toml", &String::from_utf8(bytes).unwrap()).unwrap()
    }

    /// Every pool key the current root pins, by way of its shards.
    fn pinned(&self) -> Vec<String> {
        let root = self.root();
        let mut pinned = Vec::new();
        for (name, entry) in &root.packages {
            let key = format!("rocm/{}", entry.shard_path(name));
            let text = String::from_utf8(self.server.get(BUCKET, &key).unwrap()).unwrap();
            let shard = Shard::parse(&key, &text).unwrap();
            for artifact in shard.versions.iter().flat_map(|v| &v.artifacts) {
                pinned.push(format!("rocm/{}", artifact.path));
            }
        }
        pinned.sort();
        pinned
    }
}

/// `parent/name`, made.
fn dir(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn a_manifest_is_built_into_a_bucket_and_verifies() {
    let bucket = Bucket::new();
    let mut build = build_rocm_rand(Path::new(&bucket.url()), &bucket.context.secret_key());
    bucket.server.env(&mut build);
    insta::assert_snapshot!("bucket_build", bucket.transcript(&mut build));
    let verify = &mut bucket.verify(&bucket.url());
    insta::assert_snapshot!("bucket_verify", bucket.transcript(verify));
    // Read as a CDN serves it: plain HTTP, no credentials.
    let http = bucket.server.http_url(BUCKET, "rocm");
    let verify = &mut bucket.verify(&http);
    insta::assert_snapshot!("bucket_verify_over_http", bucket.transcript(verify));

    let pool = bucket.pinned();
    assert!(!pool.is_empty());
    let immutable = "public, max-age=31536000, immutable";
    for key in pool.iter().map(String::as_str).chain(["rocm/roots/1.toml"]) {
        let headers = bucket.server.head(BUCKET, key);
        assert_eq!(header(&headers, "cache-control"), Some(immutable), "{key}");
    }
    for key in ["rocm/index.toml", "rocm/index.toml.minisig"] {
        let headers = bucket.server.head(BUCKET, key);
        assert_eq!(header(&headers, "cache-control"), Some("no-cache"), "{key}");
    }
    // The probe leaves nothing behind.
    assert!(bucket.server.keys(BUCKET, "rocm/.kpack-probe").is_empty());
}

#[test]
fn concurrent_publishers_all_land() {
    let bucket = Bucket::new();
    let inputs = &bucket.context.inputs;
    run(&mut bucket.add("rocm-core", "6.0.0", &[host_tree(inputs)]));
    let children: Vec<_> = ["rocm-blas", "rocm-rand", "rocm-fft"]
        .iter()
        .map(|name| {
            let own = inputs.join(name);
            fs::create_dir_all(&own).unwrap();
            let file = archive(&own, "gfx1100", &["gfx1100"]);
            bucket.add(name, "6.0.0", &[file]).spawn().unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let root = bucket.root();
    let names: Vec<String> = root.packages.keys().map(|n| n.to_string()).collect();
    assert_eq!(names, ["rocm-blas", "rocm-core", "rocm-fft", "rocm-rand"]);
    // Four publishes landed; a publisher that lost a race and retried may
    // have taken a version number more, so the number is not the point.
    let version = root.repo.version;
    assert!(version >= 4, "version {version}");
    let verified = bucket.context.transcript(
        &mut bucket.verify(&bucket.url()),
        &[
            (&bucket.server.endpoint, "<ENDPOINT>"),
            (&format!("rocm version {version} "), "rocm version <N> "),
        ],
    );
    insta::assert_snapshot!(verified);
}

#[test]
fn of_two_publishers_of_one_version_exactly_one_wins() {
    let bucket = Bucket::new();
    let inputs = &bucket.context.inputs;
    run(&mut bucket.add("rocm-core", "6.0.0", &[host_tree(inputs)]));
    let children: Vec<_> = ["one", "two"]
        .iter()
        .map(|which| {
            let own = dir(inputs, which);
            let file = tree(
                &own,
                "rocm-blas.tar.zst",
                "lib/librocblas.so",
                which.as_bytes(),
            );
            bucket
                .add("rocm-blas", "5.5.1", &[file])
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let won = outputs.iter().filter(|o| o.status.success()).count();
    assert_eq!(won, 1, "{outputs:?}");
    let lost = outputs.iter().find(|o| !o.status.success()).unwrap();
    let stderr = String::from_utf8_lossy(&lost.stderr);
    assert!(
        stderr.contains("published files never change") || stderr.contains("already published"),
        "{stderr}"
    );
    if stderr.contains("published files never change") {
        assert!(
            stderr.contains("s3://kpack/rocm/pool/rocm-blas/5.5.1/rocm-blas.tar.zst"),
            "{stderr}"
        );
    }
    assert_eq!(bucket.server.keys(BUCKET, "rocm/pool/"), bucket.pinned());
    run(&mut bucket.verify(&bucket.url()));
}

/// A stand-in for a store that ignores `If-None-Match`: every write
/// succeeds. Records each request line.
fn careless_store() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || answer_carelessly(stream, &seen));
        }
    });
    (endpoint, requests)
}

fn answer_carelessly(mut stream: TcpStream, seen: &Mutex<Vec<String>>) {
    loop {
        let mut head = Vec::new();
        let mut byte = [0u8];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .unwrap_or(0);
        let mut body = vec![0; length];
        if stream.read_exact(&mut body).is_err() {
            return;
        }
        let line = head.lines().next().unwrap_or_default().to_owned();
        seen.lock().unwrap().push(line.clone());
        let response = match line.split(' ').next() {
            Some("PUT") => "HTTP/1.1 200 OK\r\nETag: \"1\"\r\nContent-Length: 0\r\n\r\n",
            Some("DELETE") => "HTTP/1.1 204 No Content\r\n\r\n",
            _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        };
        if stream.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

#[test]
fn a_store_that_ignores_conditional_writes_is_refused_before_anything_is_written() {
    let bucket = Bucket::new();
    let (endpoint, requests) = careless_store();
    let mut add = bucket.add("rocm-core", "6.0.0", &[host_tree(&bucket.context.inputs)]);
    add.args(["--endpoint", &endpoint]);
    let text = bucket
        .context
        .transcript(&mut add, &[(&endpoint, "<ENDPOINT>")]);
    insta::assert_snapshot!(text);
    let probed: Vec<String> = requests.lock().unwrap().drain(..).collect();
    assert!(!probed.is_empty());
    for request in &probed {
        assert!(request.contains("/.kpack-probe/"), "{probed:?}");
    }
    // An operator with a single publisher may say so: no probe, published.
    add.arg("--no-conditional-writes");
    run(&mut add);
    let published = requests.lock().unwrap();
    assert!(
        published.iter().all(|r| !r.contains("/.kpack-probe/")),
        "{published:?}"
    );
    assert!(
        published
            .iter()
            .any(|r| r.starts_with("PUT /kpack/rocm/index.toml ")),
        "{published:?}"
    );
}

/// A loopback proxy to `upstream` that cuts the first connection carrying
/// more than `limit` bytes to the server; later connections pass.
fn cutting_proxy(upstream: &str, limit: u64) -> (String, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_owned();
    let cut = Arc::new(AtomicBool::new(false));
    let done = cut.clone();
    let sent = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let server = TcpStream::connect(&upstream).unwrap();
            let (mut from_client, mut to_server) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (mut from_server, mut to_client) = (server, client);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from_server, &mut to_client);
                let _ = to_client.shutdown(Shutdown::Both);
            });
            let (sent, done) = (sent.clone(), done.clone());
            std::thread::spawn(move || {
                let mut buffer = vec![0; 64 << 10];
                while let Ok(n) = from_client.read(&mut buffer) {
                    if n == 0 {
                        break;
                    }
                    let total = sent.fetch_add(n as u64, Ordering::SeqCst) + n as u64;
                    if total > limit && !done.swap(true, Ordering::SeqCst) {
                        let _ = from_client.shutdown(Shutdown::Both);
                        let _ = to_server.shutdown(Shutdown::Both);
                        return;
                    }
                    if to_server.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                }
                let _ = to_server.shutdown(Shutdown::Write);
            });
        }
    });
    (endpoint, cut)
}

/// A tree of incompressible bytes, so the file's size is what goes up.
fn noise(path: &Path, size: usize) -> PathBuf {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut data = Vec::with_capacity(size);
    while data.len() < size {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        data.extend_from_slice(&state.to_le_bytes());
    }
    data.truncate(size);
    // A tree, as `add` takes only those: one file of noise, which zstd
    // cannot shrink.
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, "share/noise", &data[..])
        .unwrap();
    let tree = zstd::encode_all(&tar.into_inner().unwrap()[..], 1).unwrap();
    fs::write(path, tree).unwrap();
    path.to_owned()
}

#[test]
fn a_large_artifact_goes_up_in_parts_and_a_cut_upload_leaves_nothing() {
    let bucket = Bucket::new();
    let big = noise(&bucket.context.inputs.join("rocm-big.tar.zst"), 12 << 20);
    run(&mut bucket.add("rocm-core", "6.0.0", &[host_tree(&bucket.context.inputs)]));
    let before = bucket.root().repo.version;

    // Cut in the middle of the second 5 MiB part: the upload is aborted,
    // nothing appears at the key, no parts are left, the root is as it was.
    let (proxy, cut) = cutting_proxy(&bucket.server.endpoint, 7 << 20);
    let mut add = bucket.add("rocm-big", "1.0.0", std::slice::from_ref(&big));
    add.args(["--endpoint", &proxy, "--part-size", "5"]);
    let stderr = refused(&mut add);
    assert!(
        cut.load(Ordering::SeqCst),
        "the proxy cut nothing: {stderr}"
    );
    assert!(stderr.contains("rocm-big.tar.zst"), "{stderr}");
    let key = "rocm/pool/rocm-big/1.0.0/rocm-big.tar.zst";
    assert_eq!(bucket.server.get(BUCKET, key), None);
    assert_eq!(bucket.server.open_uploads(BUCKET), Vec::<String>::new());
    assert_eq!(bucket.root().repo.version, before);

    // Run again, it goes up in three parts and verifies.
    let mut add = bucket.add("rocm-big", "1.0.0", std::slice::from_ref(&big));
    add.args(["--part-size", "5"]);
    run(&mut add);
    assert_eq!(
        bucket.server.get(BUCKET, key).unwrap(),
        fs::read(&big).unwrap()
    );
    let headers = bucket.server.head(BUCKET, key);
    let etag = header(&headers, "etag").unwrap();
    assert!(etag.ends_with("-3\""), "a three-part upload's ETag: {etag}");
    let verified = bucket.transcript(&mut bucket.verify(&bucket.url()));
    insta::assert_snapshot!(verified);
}

#[test]
fn a_publisher_killed_at_any_point_leaves_a_repository_that_verifies() {
    let bucket = Bucket::new();
    let inputs = &bucket.context.inputs;
    run(&mut bucket.add("rocm-core", "6.0.0", &[host_tree(inputs)]));
    // How long one publish takes here, to spread the kills over it.
    let started = std::time::Instant::now();
    let file = archive(&dir(inputs, "timed"), "gfx1100", &["gfx1100"]);
    run(&mut bucket.add("rocm-timed", "1.0.0", &[file]));
    let span = started.elapsed().as_micros() as u64;
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    for run_number in 0..20 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let delay = Duration::from_micros(state % (span + 1));
        let own = dir(inputs, &format!("run-{run_number}"));
        let file = archive(&own, "gfx1100", &["gfx1100"]);
        let name = format!("rocm-killed-{run_number}");
        let mut child = bucket.add(&name, "1.0.0", &[file]).spawn().unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        child.wait().unwrap();
        let verified = bucket.verify(&bucket.url()).output().unwrap();
        assert!(
            verified.status.success(),
            "run {run_number}, killed after {delay:?}: {}",
            String::from_utf8_lossy(&verified.stderr)
        );
    }
    // And the next publish succeeds.
    let file = archive(&dir(inputs, "after"), "gfx1100", &["gfx1100"]);
    run(&mut bucket.add("rocm-after", "1.0.0", &[file]));
    let verified = run(&mut bucket.verify(&bucket.url()));
    assert!(verified.contains("signature good"), "{verified}");
    assert!(bucket
        .root()
        .packages
        .contains_key(&"rocm-after".parse().unwrap()));
}

#[test]
fn mirrors_go_from_a_directory_to_a_bucket_and_back() {
    let bucket = Bucket::new();
    let context = &bucket.context;
    run(&mut context.add(
        "rocm-rand",
        "5.3.3",
        &[
            host_tree(&context.inputs),
            archive(&context.inputs, "gfx90a", &["gfx90a:xnack-"]),
            archive(&context.inputs, "gfx1030", &["gfx1030"]),
        ],
    ));
    let mirror_url = format!("s3://{BUCKET}/mirror");
    let mut to_bucket = bucket.kpack_repo(&["mirror"]);
    to_bucket
        .arg(&context.repo)
        .arg(&mirror_url)
        .arg("--pubkey")
        .arg(context.public_key())
        .args(["--targets", "gfx1030"]);
    let mirrored = bucket.transcript(&mut to_bucket);
    insta::assert_snapshot!("mirror_to_bucket", mirrored);
    let verified = bucket.transcript(bucket.verify(&mirror_url).arg("--partial"));
    insta::assert_snapshot!("partial_verify_of_bucket", verified);

    let back = context.dir.path().join("back");
    let mut to_dir = bucket.kpack_repo(&["mirror", &mirror_url]);
    to_dir
        .arg(&back)
        .arg("--pubkey")
        .arg(context.public_key())
        .args(["--targets", "gfx1030"]);
    insta::assert_snapshot!("mirror_from_bucket", bucket.transcript(&mut to_dir));
    let verified = bucket.transcript(context.verify(&back).arg("--partial"));
    insta::assert_snapshot!("partial_verify_from_bucket", verified);
    assert!(back
        .join("pool/rocm-rand/5.3.3/rocm_gfx1030.kpack.zst")
        .exists());
}

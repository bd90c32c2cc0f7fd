//! A generated repository of 10,000 packages x 20 versions: time to read
//! and verify the signed root, time to resolve one package with its
//! dependencies once their shards are local, and the root's size.
//!
//! `cargo bench -p kpack-repo-index --bench index`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fs_err as fs;
use kpack_repo_index::sign::{sign_root, verify_root};
use kpack_repo_index::{
    resolve, Dependency, PackageEntry, PackageName, RepoInfo, RootIndex, Sha256, Shard, Timestamp,
};
use kpack_sign::{keygen, SecretKey};

const PACKAGES: usize = 10_000;
const VERSIONS: usize = 20;
const RUNS: usize = 30;

fn name(i: usize) -> PackageName {
    format!("rocm-pkg-{i:05}").parse().unwrap()
}

/// Package i depends on package i / 8 (a tree a few levels deep), like a
/// library on its runtime.
fn shard_text(i: usize) -> String {
    let mut text = format!("name = \"{}\"\n", name(i));
    for v in 0..VERSIONS {
        text.push_str(&format!("\n[[versions]]\nversion = \"1.{v}.0\"\n"));
        if i > 0 {
            text.push_str(&format!("depends = [\"{} >=1.{}\"]\n", name(i / 8), v / 2));
        }
        for (kind, file, targets) in [
            ("tree", "host.tar.zst", None),
            (
                "kpack",
                "rocm_gfx90a.kpack",
                Some("[\"gfx90a:xnack+\", \"gfx90a:xnack-\"]"),
            ),
            ("kpack", "rocm_gfx1100.kpack", Some("[\"gfx1100\"]")),
        ] {
            text.push_str(&format!(
                "\n[[versions.artifacts]]\nkind = \"{kind}\"\npath = \"pool/{}/1.{v}.0/{file}\"\n",
                name(i)
            ));
            if let Some(targets) = targets {
                text.push_str(&format!("targets = {targets}\n"));
            }
            text.push_str(&format!(
                "sha256 = \"{}\"\nsize = {}\n",
                Sha256::of(file.as_bytes()),
                1000 + v
            ));
        }
    }
    text
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut packages = BTreeMap::new();
    for i in 0..PACKAGES {
        let text = shard_text(i);
        let sha256 = Sha256::of(text.as_bytes());
        let path = kpack_repo_index::types::usual_shard(&name(i), &sha256);
        let file = dir.path().join(path.as_str());
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(&file, &text).unwrap();
        packages.insert(
            name(i),
            PackageEntry {
                shard: None,
                sha256,
                size: Some(text.len() as u64),
                latest: semver::Version::new(1, VERSIONS as u64 - 1, 0),
                summary: format!("package {i}"),
                built_from: Vec::new(),
            },
        );
    }
    let now = Timestamp::now();
    let root = RootIndex {
        format: 1,
        repo: RepoInfo {
            name: "bench".parse().unwrap(),
            version: 1,
            generated: Timestamp::from_second(now.as_second()).unwrap(),
            expires: Timestamp::from_second(now.as_second() + 86_400).unwrap(),
        },
        families: BTreeMap::new(),
        packages,
    };
    let text = root.to_toml().unwrap();
    keygen(&dir.path().join("k.key"), &dir.path().join("k.pub"), None).unwrap();
    let key = SecretKey::load(&dir.path().join("k.key"), None).unwrap();
    let public = kpack_sign::PublicKey::load(dir.path().join("k.pub").to_str().unwrap()).unwrap();
    let signature = sign_root(&key, text.as_bytes()).unwrap();
    fs::write(dir.path().join("index.toml"), &text).unwrap();
    fs::write(dir.path().join("index.toml.minisig"), &signature).unwrap();
    println!(
        "generated {PACKAGES} packages x {VERSIONS} versions in {:.1} s; root {} bytes ({:.2} MiB)",
        started.elapsed().as_secs_f64(),
        text.len(),
        text.len() as f64 / 1048576.0
    );

    // Root: read the files, verify the signature, parse.
    let times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            let bytes = fs::read(dir.path().join("index.toml")).unwrap();
            let signature = fs::read_to_string(dir.path().join("index.toml.minisig")).unwrap();
            let root = verify_root(&public, "index.toml", &bytes, &signature).unwrap();
            assert_eq!(root.packages.len(), PACKAGES);
            start.elapsed()
        })
        .collect();
    println!(
        "root read + signature check + parse: median {:.1} ms (goal < 100 ms)",
        median(times).as_secs_f64() * 1e3
    );

    // One package deep in the dependency tree, its shards local.
    let target = PACKAGES - 1;
    let root = verify_root(&public, "index.toml", text.as_bytes(), &signature).unwrap();
    let times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            let mut shards = BTreeMap::new();
            let mut pending = vec![name(target)];
            while let Some(next) = pending.pop() {
                if shards.contains_key(&next) {
                    continue;
                }
                let path = root.packages[&next].shard_path(&next);
                let text = fs::read_to_string(dir.path().join(path.as_str())).unwrap();
                let shard = Shard::parse(path.as_str(), &text).unwrap();
                for version in &shard.versions {
                    for dependency in &version.depends {
                        pending.push(dependency.name.clone());
                    }
                }
                shards.insert(next, shard);
            }
            let chosen = resolve(&shards, &[Dependency::any(name(target))]).unwrap();
            assert!(chosen.len() >= 4);
            start.elapsed()
        })
        .collect();
    println!(
        "resolve {} with its dependencies (reading and parsing their shards): median {:.2} ms (goal < 10 ms)",
        name(target),
        median(times).as_secs_f64() * 1e3
    );
    println!(
        "root size {:.2} MiB (goal < 2 MiB)",
        text.len() as f64 / 1048576.0
    );
}

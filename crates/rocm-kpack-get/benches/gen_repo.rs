//! Inputs for `benches/install.sh`, the install benchmark of kpack-get.
//!
//! ```text
//! gen_repo archive OUT.kpack TARGET BYTES [SEED]
//!     a real kpack archive for TARGET holding BYTES of incompressible
//!     code objects, stored uncompressed (scheme `none`), so its size is
//!     BYTES plus a few KiB of header and table of contents
//! gen_repo index DIR KEY.key PACKAGES VERSIONS
//!     a signed repository of PACKAGES packages x VERSIONS versions
//!     (index.toml, index.toml.minisig, packages/<name>/<sha256>.toml);
//!     the artifacts the shards pin are not written (a dry run does not
//!     download them)
//! gen_repo chain DIR KEY.key PACKAGES
//!     as index, one version each, package i depending on package i + 1
//! gen_repo fanout DIR KEY.key PACKAGES
//!     as index, one version each, package 0 depending on all the others
//! ```
//!
//! Run through cargo, which passes `--bench` first:
//! `cargo bench -p rocm-kpack-get --bench gen_repo -- archive ...`
//! (`benches/install.sh` and `benches/plan.sh` do).
//! Without a command it does nothing, so a plain `cargo bench` is harmless.
#![allow(clippy::print_stdout)]

use fs_err::File;
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use kpack_repo::publish::Publisher;
use kpack_repo_index::{
    Artifact, ArtifactKind, Dependency, PackageEntry, PackageName, RelativePath, RepoInfo,
    RootIndex, Sha256, Shard, Timestamp, VersionEntry,
};
use kpack_sign::SecretKey;
use rocm_kpack::{ArchiveOptions, ArchiveWriter, BinaryKey, Compression, Target};

/// Size of each code object in a generated archive.
const CODE_OBJECT: usize = 4 << 20;

/// xorshift64*: fast, deterministic, and incompressible enough for zstd
/// and for the page cache not to share anything.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn fill(&mut self, buffer: &mut [u8]) {
        for chunk in buffer.chunks_mut(8) {
            let value = self.next().to_le_bytes();
            chunk.copy_from_slice(&value[..chunk.len()]);
        }
    }
}

fn write_archive(out: &Path, target: &str, bytes: u64, seed: u64) -> Result<()> {
    let parsed = Target::parse(target).with_context(|| format!("target {target:?}"))?;
    let file = File::create(out).with_context(|| out.display().to_string())?;
    let options = ArchiveOptions {
        group: "bench".into(),
        family: target.into(),
        arches: vec![parsed.clone()],
        compression: Compression::None,
    };
    let mut writer = ArchiveWriter::new(BufWriter::with_capacity(1 << 20, file), options)?;
    let mut random = XorShift::new(seed);
    let mut buffer = vec![0u8; CODE_OBJECT];
    let mut left = bytes;
    let mut index = 0u32;
    while left > 0 {
        let n = usize::try_from(left.min(CODE_OBJECT as u64))?;
        random.fill(&mut buffer[..n]);
        let binary = BinaryKey::new(&format!("lib/libbench{index:05}.so"), 0);
        writer.add(&binary, &parsed, &buffer[..n])?;
        left -= n as u64;
        index += 1;
    }
    let mut sink = writer.finish()?;
    sink.flush()?;
    let size = fs_err::metadata(out)?.len();
    println!(
        "{}: {target}, {index} code objects, {size} bytes",
        out.display()
    );
    Ok(())
}

fn name(i: usize) -> Result<PackageName> {
    Ok(format!("rocm-pkg-{i:05}").parse()?)
}

/// How the packages of a generated repository depend on each other.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// Package `i` on package `i / 8`: a tree a few levels deep, like a
    /// library on its runtime.
    Tree,
    /// Package `i` on package `i + 1`.
    Chain,
    /// Package 0 on every other.
    FanOut,
}

impl Shape {
    /// What version `1.v.0` of package `i` of `packages` depends on.
    fn depends(self, i: usize, v: usize, packages: usize) -> Result<Vec<Dependency>> {
        let on: Vec<usize> = match self {
            Shape::Tree if i > 0 => vec![i / 8],
            Shape::Chain if i + 1 < packages => vec![i + 1],
            Shape::FanOut if i == 0 => (1..packages).collect(),
            _ => Vec::new(),
        };
        on.into_iter()
            .map(|d| Ok(format!("{} >=1.{}", name(d)?, v / 2).parse()?))
            .collect()
    }
}

/// Package `i` of `packages`, versions `1.v.0`, depending on others as
/// `shape` says; each has a host tree and two device archives, as in
/// `crates/kpack-repo-index/benches/index.rs`.
fn shard(i: usize, versions: usize, packages: usize, shape: Shape) -> Result<Shard> {
    let mut entries = Vec::with_capacity(versions);
    for v in 0..versions {
        let version = semver::Version::new(1, v as u64, 0);
        let depends = shape.depends(i, v, packages)?;
        let mut artifacts = Vec::new();
        for (kind, file, targets, size) in [
            (ArtifactKind::Tree, "host.tar.zst", &[][..], 20u64 << 20),
            (
                ArtifactKind::Kpack,
                "rocm_gfx90a.kpack",
                &["gfx90a:xnack+", "gfx90a:xnack-"][..],
                150 << 20,
            ),
            (
                ArtifactKind::Kpack,
                "rocm_gfx1100.kpack",
                &["gfx1100"][..],
                120 << 20,
            ),
        ] {
            let targets = match targets {
                [] => None,
                listed => Some(listed.iter().map(|t| t.parse()).collect::<Result<_, _>>()?),
            };
            let path: RelativePath = format!("pool/{}/{version}/{file}", name(i)?).parse()?;
            let install_as: Option<RelativePath> = match kind {
                ArtifactKind::Kpack => Some(format!(".kpack/{file}").parse()?),
                ArtifactKind::Tree => None,
            };
            artifacts.push(Artifact {
                kind,
                component: None,
                sha256: Sha256::of(path.as_str().as_bytes()),
                path,
                install_as,
                targets,
                owner: None,
                size: size + v as u64,
                encoding: None,
                decoded_sha256: None,
                decoded_size: None,
                // Trees say how far they unpack, as every publish now writes.
                unpacked_size: (kind == ArtifactKind::Tree).then(|| 4 * (size + v as u64)),
            });
        }
        entries.push(VersionEntry {
            version,
            depends,
            system_requires: Vec::new(),
            requires_client: None,
            artifacts,
            built_from: Vec::new(),
        });
    }
    Ok(Shard {
        name: name(i)?,
        versions: entries,
    })
}

fn write_index(
    dir: &Path,
    key: &Path,
    packages: usize,
    versions: usize,
    shape: Shape,
) -> Result<()> {
    if versions == 0 {
        bail!("VERSIONS must be at least 1");
    }
    let started = Instant::now();
    let repo = Publisher::open(dir)?;
    if repo.root_index()?.is_some() {
        bail!("{} already holds a repository", dir.display());
    }
    let key = SecretKey::load(key, None)?;
    let now = Timestamp::now();
    let mut root = RootIndex {
        format: 1,
        repo: RepoInfo {
            name: "bench-index".parse()?,
            // `publish_root` bumps the version and sets the dates.
            version: 0,
            generated: now,
            expires: now,
        },
        families: BTreeMap::new(),
        packages: BTreeMap::new(),
    };
    for i in 0..packages {
        let shard = shard(i, versions, packages, shape)?;
        let text = shard.to_toml()?;
        let sha256 = Sha256::of(text.as_bytes());
        let path = kpack_repo_index::types::usual_shard(&shard.name, &sha256);
        let file = dir.join(path.as_str());
        if let Some(parent) = file.parent() {
            fs_err::create_dir_all(parent)?;
        }
        // Shards are content-addressed: plain writes, the signed root last.
        fs_err::write(&file, &text).with_context(|| file.display().to_string())?;
        root.packages.insert(
            shard.name.clone(),
            PackageEntry {
                shard: None,
                sha256,
                size: Some(text.len() as u64),
                latest: semver::Version::new(1, versions as u64 - 1, 0),
                summary: format!("benchmark package {i}"),
                built_from: Vec::new(),
            },
        );
    }
    let root = repo.publish_root(root, Some(&key))?;
    let root_size = fs_err::metadata(dir.join("index.toml"))?.len();
    println!(
        "{}: {packages} packages x {versions} versions, root version {}, index.toml {root_size} bytes, in {:.1} s",
        dir.display(),
        root.repo.version,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T> {
    text.parse()
        .map_err(|_| anyhow::anyhow!("{what}: {text:?} is not a number"))
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("gen_repo: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] => {
            println!("gen_repo writes the inputs of benches/install.sh; run that script");
            Ok(())
        }
        ["archive", out, target, bytes] => {
            write_archive(Path::new(out), target, number(bytes, "BYTES")?, 1)
        }
        ["archive", out, target, bytes, seed] => write_archive(
            Path::new(out),
            target,
            number(bytes, "BYTES")?,
            number(seed, "SEED")?,
        ),
        ["index", dir, key, packages, versions] => write_index(
            Path::new(dir),
            Path::new(key),
            number(packages, "PACKAGES")?,
            number(versions, "VERSIONS")?,
            Shape::Tree,
        ),
        [shape @ ("chain" | "fanout"), dir, key, packages] => write_index(
            Path::new(dir),
            Path::new(key),
            number(packages, "PACKAGES")?,
            1,
            if *shape == "chain" {
                Shape::Chain
            } else {
                Shape::FanOut
            },
        ),
        _ => bail!(
            "usage: gen_repo archive OUT.kpack TARGET BYTES [SEED] | gen_repo index DIR KEY.key PACKAGES VERSIONS | gen_repo chain|fanout DIR KEY.key PACKAGES"
        ),
    }
}

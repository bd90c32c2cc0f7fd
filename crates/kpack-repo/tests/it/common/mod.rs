//! What the repository tests share: the test context (a temporary
//! directory with its own key pair, repository and inputs, and the filters
//! that make `kpack-repo`'s output a snapshot), small archives and host
//! trees as inputs.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use fs_err as fs;
use kpack_repo_index::{RootIndex, Shard};
use kpack_test_support::run;
use rocm_kpack::{ArchiveOptions, ArchiveWriter, BinaryKey, Compression, Target};

/// A small archive for `targets` of processor `name`.
pub fn archive(dir: &Path, name: &str, targets: &[&str]) -> PathBuf {
    let path = dir.join(format!("rocm_{name}.kpack"));
    let file = fs::File::create(&path).unwrap();
    let options = ArchiveOptions {
        group: "rocm".into(),
        family: name.into(),
        arches: targets.iter().map(|t| Target::parse(t).unwrap()).collect(),
        compression: Compression::DEFAULT,
    };
    let mut writer = ArchiveWriter::new(file, options).unwrap();
    for target in targets {
        writer
            .add(
                &BinaryKey::new("lib/librocrand.so.1.1", 0),
                &Target::parse(target).unwrap(),
                format!("code for {target}").as_bytes(),
            )
            .unwrap();
    }
    writer.finish().unwrap();
    path
}

/// A host tree artifact: a zstd-compressed tar with one file.
pub fn host_tree(dir: &Path) -> PathBuf {
    tree(dir, "rocm-rand-host.tar.zst", "lib/librocrand.so", b"hello")
}

/// A tree artifact `dir/file_name`: a zstd-compressed tar holding one file,
/// `entry` (under 100 bytes) with `contents` (under 512 bytes).
pub fn tree(dir: &Path, file_name: &str, entry: &str, contents: &[u8]) -> PathBuf {
    let path = dir.join(file_name);
    let mut tar = Vec::new();
    // A minimal ustar archive: one header and one block of data, then two
    // zero blocks.
    let mut header = [0u8; 512];
    header[..entry.len()].copy_from_slice(entry.as_bytes());
    header[100..107].copy_from_slice(b"0000644");
    header[124..135].copy_from_slice(format!("{:011o}", contents.len()).as_bytes());
    header[156] = b'0';
    header[257..262].copy_from_slice(b"ustar");
    header[148..156].copy_from_slice(b"        ");
    let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
    header[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    tar.extend_from_slice(&header);
    let mut data = [0u8; 512];
    data[..contents.len()].copy_from_slice(contents);
    tar.extend_from_slice(&data);
    tar.extend_from_slice(&[0u8; 1024]);
    fs::write(&path, zstd::bulk::compress(&tar, 3).unwrap()).unwrap();
    path
}

/// The artifacts of a small rocm-rand in `dir`: a host tree and a gfx90a
/// archive.
pub fn rocm_rand_artifacts(dir: &Path) -> [PathBuf; 2] {
    [host_tree(dir), archive(dir, "gfx90a", &["gfx90a:xnack-"])]
}

/// The shard of `package` that the root of the repository at `repo` names.
pub fn published_shard(repo: &Path, package: &str) -> Shard {
    let root = RootIndex::parse(
        "index.toml",
        &fs::read_to_string(repo.join("index.toml")).unwrap(),
    )
    .unwrap();
    let name = package.parse().unwrap();
    let path = root.packages[&name].shard_path(&name);
    Shard::parse(
        "shard",
        &fs::read_to_string(repo.join(path.as_str())).unwrap(),
    )
    .unwrap()
}

/// `kpack-repo`, with no password from the environment.
pub fn kpack_repo() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kpack-repo"));
    command.env_remove("KPACK_REPO_PASSWORD");
    command
}

/// Runs `command`, which must fail with exit code 1; its stderr.
pub fn refused(command: &mut Command) -> String {
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{command:?}: {stderr}");
    stderr
}

/// `kpack-repo build` of the rocRAND manifest from Debian's package into
/// `repo`, signed with `secret`.
pub fn build_rocm_rand(repo: &Path, secret: &Path) -> Command {
    let mut command = kpack_repo();
    command
        .arg("build")
        .arg(repo)
        .arg(kpack_test_support::workspace().join("manifests/rocm-rand.toml"))
        .arg("--sources")
        .arg(kpack_test_support::fixtures().join("debian"))
        .arg("--key")
        .arg(secret);
    command
}

/// The one context a repository test works in, as uv's `TestContext`: a
/// temporary directory with an unencrypted key pair made by `kpack-repo
/// keygen` (`key` without extension), a repository path and a directory
/// for inputs.
pub struct TestContext {
    pub dir: tempfile::TempDir,
    pub key: PathBuf,
    pub repo: PathBuf,
    pub inputs: PathBuf,
}

impl TestContext {
    pub fn new() -> TestContext {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("repo");
        run(kpack_repo().arg("keygen").arg(&key).arg("--unencrypted"));
        let repo = dir.path().join("rocm");
        let inputs = dir.path().join("inputs");
        fs::create_dir_all(&inputs).unwrap();
        TestContext {
            dir,
            key,
            repo,
            inputs,
        }
    }

    /// Runs `command`: its exit code, stdout and stderr as one text, with
    /// `more` and then the context's directory masked (times and
    /// durations too), for a snapshot.
    pub fn transcript(&self, command: &mut Command, more: &[(&str, &str)]) -> String {
        let output = command.output().unwrap();
        let dir = self.dir.path().display().to_string();
        let mut masks = more.to_vec();
        masks.push((dir.as_str(), "<DIR>"));
        kpack_test_support::transcript(&output, &masks)
    }

    /// `kpack-repo ARGS` run in the context's directory, so that relative
    /// paths name its files.
    pub fn kpack_repo(&self, args: &[&str]) -> Command {
        let mut command = kpack_repo();
        command.args(args).current_dir(self.dir.path());
        command
    }

    pub fn secret_key(&self) -> PathBuf {
        self.key.with_extension("key")
    }

    pub fn public_key(&self) -> PathBuf {
        self.key.with_extension("pub")
    }

    /// `kpack-repo add` of `artifacts` as `package` `version`, signed.
    pub fn add(&self, package: &str, version: &str, artifacts: &[PathBuf]) -> Command {
        let mut command = kpack_repo();
        command
            .arg("add")
            .arg(&self.repo)
            .args([package, version])
            .args(artifacts)
            .arg("--key")
            .arg(self.secret_key());
        command
    }

    /// `kpack-repo index` of the repository, signed.
    pub fn index(&self) -> Command {
        self.with_secret_key("index")
    }

    /// `kpack-repo sign` of the repository.
    pub fn sign(&self) -> Command {
        self.with_secret_key("sign")
    }

    fn with_secret_key(&self, subcommand: &str) -> Command {
        let mut command = kpack_repo();
        command
            .arg(subcommand)
            .arg(&self.repo)
            .arg("--key")
            .arg(self.secret_key());
        command
    }

    /// `kpack-repo verify` of `repo` (a directory or URL) with the public
    /// key.
    pub fn verify(&self, repo: impl AsRef<OsStr>) -> Command {
        let mut command = kpack_repo();
        command
            .arg("verify")
            .arg(repo)
            .arg("--pubkey")
            .arg(self.public_key());
        command
    }

    /// `kpack-repo mirror` of `upstream` (a directory or URL) into `dest`,
    /// checked with the public key.
    pub fn mirror(&self, upstream: impl AsRef<OsStr>, dest: &Path) -> Command {
        let mut command = kpack_repo();
        command
            .arg("mirror")
            .arg(upstream)
            .arg(dest)
            .arg("--pubkey")
            .arg(self.public_key());
        command
    }
}

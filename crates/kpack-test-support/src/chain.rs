//! The whole chain as tests drive it: the workspace's binaries, the rocRAND
//! repository built with `kpack-repo` from its manifest, an isolated
//! environment for running `kpack-get`, and comparing trees.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::server::TestServer;
use crate::{fixtures, run, workspace};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use tempfile::TempDir;

/// A binary of the workspace: the one `cargo test --workspace` built
/// beside the running test, else built once by a nested cargo into a
/// target directory of its own (the outer cargo holds the main one's lock).
pub fn workspace_binary(package: &str, binary: &str) -> PathBuf {
    static BUILT: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(binary) {
        return path.clone();
    }
    let test_exe = std::env::current_exe().unwrap();
    let profile_dir = test_exe.ancestors().nth(2).unwrap().to_owned();
    let beside = profile_dir.join(binary);
    let path = if beside.exists() {
        beside
    } else {
        let target_dir = profile_dir.parent().unwrap().join(binary);
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        run(Command::new(cargo)
            .args(["build", "--quiet", "-p", package, "--bin", binary])
            .arg("--target-dir")
            .arg(&target_dir)
            .current_dir(workspace()));
        target_dir.join("debug").join(binary)
    };
    built.insert(binary.to_owned(), path.clone());
    path
}

/// The target directory's `tmp/`, where tests keep what outlives one test
/// (the running test is `target/<profile>/deps/<name>`).
pub fn target_tmp() -> PathBuf {
    let test_exe = std::env::current_exe().unwrap();
    test_exe.ancestors().nth(3).unwrap().join("tmp")
}

pub fn kpack_get_exe() -> PathBuf {
    workspace_binary("rocm-kpack-get", "kpack-get")
}

pub fn kpack_pack_exe() -> PathBuf {
    workspace_binary("kpack-packer", "kpack-pack")
}

pub fn kpack_repo_exe() -> PathBuf {
    workspace_binary("kpack-repo", "kpack-repo")
}

/// A signed repository holding rocm-rand, built from
/// `manifests/rocm-rand.toml` and Debian's rocRAND package.
#[derive(Debug, Clone)]
pub struct RocrandRepo {
    pub dir: PathBuf,
    pub public_key: PathBuf,
    pub secret_key: PathBuf,
}

/// Builds the repository under `dir` (`dir/repo`, `dir/key.key`, `dir/key.pub`).
pub fn build_rocrand_repo(dir: &Path) -> RocrandRepo {
    let repo = kpack_repo_exe();
    fs_err::create_dir_all(dir).unwrap();
    run(Command::new(&repo)
        .args(["keygen", "key", "--unencrypted"])
        .current_dir(dir));
    run(Command::new(&repo)
        .arg("build")
        .arg(dir.join("repo"))
        .arg(workspace().join("manifests/rocm-rand.toml"))
        .arg("--sources")
        .arg(fixtures().join("debian"))
        .arg("--key")
        .arg(dir.join("key.key")));
    RocrandRepo {
        dir: dir.join("repo"),
        public_key: dir.join("key.pub"),
        secret_key: dir.join("key.key"),
    }
}

/// A repository built once per test process and shared read-only; tests
/// that change a repository build their own.
pub fn shared_rocrand_repo() -> &'static RocrandRepo {
    static REPO: OnceLock<RocrandRepo> = OnceLock::new();
    REPO.get_or_init(|| {
        let dir = target_tmp().join(format!("rocrand-repo-{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&dir);
        build_rocrand_repo(&dir)
    })
}

/// Copies the files and directories under `from` to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    fs_err::create_dir_all(to).unwrap();
    for entry in fs_err::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs_err::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The pool path of an artifact in the rocRAND repository.
pub fn pool(file: &str) -> String {
    format!("pool/rocm-rand/5.3.3/{file}")
}

pub const HOST_TREE: &str = "rocm-rand-5.3.3-host.tar.zst";

/// The archive for gfx90a as the repository serves it, transport-encoded:
/// its xnack+ and xnack- code objects compress well together. Installed,
/// it is `.kpack/rocrand_gfx90a.kpack`.
pub const ENCODED_ARCHIVE: &str = "rocrand_gfx90a.kpack.zst";

/// The bytes of the pool file `file` of the repository at `repo_dir` as
/// kpack-get installs them: decoded when transport-encoded (`.zst`).
pub fn installed_bytes(repo_dir: &Path, file: &str) -> Vec<u8> {
    let served = fs_err::read(repo_dir.join(pool(file))).unwrap();
    match file.ends_with(".kpack.zst") {
        true => zstd::decode_all(&served[..]).unwrap(),
        false => served,
    }
}

/// A home of its own for kpack-get: cache, state, config, prefix, a sysfs
/// without GPUs and a system without HIP runtimes, so nothing of the
/// machine leaks in.
#[derive(Debug)]
pub struct Env {
    pub home: TempDir,
    pub prefix: PathBuf,
    pub cache: PathBuf,
    pub state: PathBuf,
    pub sysfs: PathBuf,
}

impl Default for Env {
    fn default() -> Env {
        Env::new()
    }
}

impl Env {
    pub fn new() -> Env {
        let home = tempfile::tempdir().unwrap();
        let prefix = home.path().join("prefix");
        let sysfs = home.path().join("no-sysfs");
        Env {
            prefix,
            cache: home.path().join("cache"),
            state: home.path().join("state"),
            sysfs,
            home,
        }
    }

    /// `kpack-get` with this environment and no HSA, GPUs only from
    /// `--target` unless a test points it at a fake.
    pub fn command(&self) -> Command {
        let mut command = Command::new(kpack_get_exe());
        command
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .env("KPACK_GET_CACHE_DIR", &self.cache)
            .env("KPACK_GET_STATE_DIR", &self.state)
            .env("KPACK_GET_PREFIX", &self.prefix)
            .env("KPACK_GET_SYSFS_ROOT", &self.sysfs)
            .env("KPACK_GET_HSA_LIBRARY", self.home.path().join("no-hsa.so"))
            .env("KPACK_GET_PCI_IDS", self.home.path().join("no-pci.ids"))
            .env_remove("KPACK_GET_TARGETS")
            .env_remove("KPACK_GET_CONFIG")
            .env_remove("ROCM_PATH")
            // The HIP runtime search sees none of the machine's: no loader
            // cache, no default directories, no /opt/rocm, no
            // LD_LIBRARY_PATH (cargo's own is not the user's). With no
            // runtime, `auto` would choose the fat layout: tests install
            // the kpack layout unless they ask for another (`--layout` or
            // `KPACK_GET_LAYOUT`).
            .env(
                "KPACK_GET_LD_CACHE",
                self.home.path().join("no-ld.so.cache"),
            )
            .env(
                "KPACK_GET_DEFAULT_LIBRARY_DIRS",
                self.home.path().join("no-lib"),
            )
            .env(
                "KPACK_GET_DEFAULT_ROCM_PATH",
                self.home.path().join("no-rocm"),
            )
            .env_remove("LD_LIBRARY_PATH")
            .env("KPACK_GET_LAYOUT", "kpack")
            .stdin(std::process::Stdio::null());
        // The machine's GPU overrides (HSA_OVERRIDE_GFX_VERSION[_N]), its
        // choice of gfx1250 A0's name and the GPUs it hides stay out.
        command.env_remove("HSA_DISABLE_GFX12_STRICT");
        for name in [
            "ROCR_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "CUDA_VISIBLE_DEVICES",
        ] {
            command.env_remove(name);
        }
        for (name, _) in std::env::vars_os() {
            if name
                .to_string_lossy()
                .starts_with("HSA_OVERRIDE_GFX_VERSION")
            {
                command.env_remove(name);
            }
        }
        command
    }

    /// `kpack-get --repo rocm=URL --key KEY ARGS...`.
    pub fn with_repo(&self, url: &str, key: &Path, args: &[&str]) -> Command {
        let mut command = self.command();
        command
            .arg("--repo")
            .arg(format!("rocm={url}"))
            .arg("--key")
            .arg(key)
            .args(args);
        command
    }

    /// Writes a configuration file with one repository of several mirrors.
    pub fn configure(&self, mirrors: &[String], key: &Path) {
        let dir = self.home.path().join("config/kpack-get");
        fs_err::create_dir_all(&dir).unwrap();
        let mirrors: Vec<String> = mirrors.iter().map(|m| format!("{m:?}")).collect();
        fs_err::write(
            dir.join("config.toml"),
            format!(
                "[[repo]]\nname = \"rocm\"\nmirrors = [{}]\nkey = {:?}\n",
                mirrors.join(", "),
                key.display().to_string()
            ),
        )
        .unwrap();
    }
}

/// Runs a command; returns its output, whatever its status.
pub fn output(command: &mut Command) -> Output {
    command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"))
}

/// Runs a command that must succeed; returns stdout.
pub fn success(command: &mut Command) -> String {
    let out = output(command);
    assert!(
        out.status.success(),
        "{command:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every file, link and directory under `root` (relative path -> a
/// description: contents hash, link target or "dir"), for comparing trees.
/// A `root` that does not exist is one entry, `"" -> "absent"`, so that
/// creating it is a change; a directory that cannot be read fails the test
/// rather than reading as empty.
pub fn snapshot(root: &Path) -> std::collections::BTreeMap<String, String> {
    use sha2::Digest;
    let mut map = std::collections::BTreeMap::new();
    fn walk(root: &Path, dir: &Path, map: &mut std::collections::BTreeMap<String, String>) {
        let entries = fs_err::read_dir(dir).unwrap_or_else(|e| panic!("cannot snapshot: {e}"));
        for entry in entries {
            let entry = entry.unwrap();
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            let meta = fs_err::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                map.insert(
                    relative,
                    format!("-> {}", fs_err::read_link(&path).unwrap().display()),
                );
            } else if meta.is_dir() {
                map.insert(relative, "dir".into());
                walk(root, &path, map);
            } else {
                let bytes = fs_err::read(&path).unwrap();
                map.insert(relative, format!("{:x}", sha2::Sha256::digest(&bytes)));
            }
        }
    }
    match fs_err::symlink_metadata(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            map.insert(String::new(), "absent".into());
        }
        _ => walk(root, root, &mut map),
    }
    map
}

/// The pool files the server was asked for (GETs), sorted.
pub fn pool_gets(server: &TestServer) -> Vec<String> {
    let mut paths: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path.starts_with("pool/"))
        .map(|r| r.path)
        .collect();
    paths.sort();
    paths
}

/// A command's stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A command's status and output, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        stderr(out)
    )
}

/// Loads `library` with the stand-in HIP runtime for `arch`; returns the
/// one code object it registered.
pub fn load_installed(library: &Path, arch: &str) -> Vec<u8> {
    use crate::hip;
    let work = tempfile::tempdir().unwrap();
    let dlopen = hip::standin_for(work.path(), library);
    let results = hip::run_with_standin(hip::dlopen_command(&dlopen, library), work.path(), arch);
    assert_eq!(results.len(), 1, "one registration: {results:?}");
    results[0]
        .clone()
        .unwrap_or_else(|code| panic!("load for {arch} failed: error {code}"))
}

#[cfg(test)]
mod tests {
    use super::snapshot;

    #[test]
    fn a_missing_root_is_absent_not_empty() {
        let dir = tempfile::tempdir().unwrap();
        let missing = snapshot(&dir.path().join("prefix"));
        assert_eq!(missing.get(""), Some(&"absent".to_owned()));
        fs_err::create_dir(dir.path().join("prefix")).unwrap();
        assert!(snapshot(&dir.path().join("prefix")).is_empty());
    }

    #[test]
    #[should_panic(expected = "cannot snapshot")]
    fn a_directory_that_cannot_be_read_fails() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        fs_err::write(&file, b"x").unwrap();
        snapshot(&file);
    }
}

//! rocm-blas, laid out as Debian 13's `librocblas0` 5.5.1 is: a fat
//! `librocblas.so.0.1` and Tensile kernel databases for each processor under
//! `rocblas/2.47.0/library/`. `kpack-repo build` publishes a host tree, one
//! archive and one database payload per processor; `kpack-get` installs a
//! GPU's archive and payload over loopback, nothing of other GPUs, and the
//! installed tree is the original one restricted to that GPU.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_test_support::chain::{
    kpack_repo_exe, load_installed, pool_gets, snapshot, success, Env,
};
use kpack_test_support::server::TestServer;
use kpack_test_support::{run, tool};

const LIBRARY_DIR: &str = "usr/lib/x86_64-linux-gnu";
const DATABASES: &str = "rocblas/2.47.0/library";

/// The processors of the reduced package, and the GPU targets its fat
/// library has code for (gfx90a's in both xnack modes, as Debian builds it).
const CODE_TARGETS: [&str; 4] = ["gfx1030", "gfx1100", "gfx90a:xnack-", "gfx90a:xnack+"];

/// The Tensile files of the reduced package, with real names: per
/// processor, and gfx90a's kernels per xnack mode.
const DATABASE_FILES: [&str; 8] = [
    "TensileLibrary.dat",
    "TensileLibrary_gfx1030.co",
    "TensileLibrary_gfx1100.co",
    "TensileLibrary_gfx90a.co",
    "Kernels.so-000-gfx1030.hsaco",
    "Kernels.so-000-gfx1100.hsaco",
    "Kernels.so-000-gfx90a-xnack+.hsaco",
    "Kernels.so-000-gfx90a-xnack-.hsaco",
];

/// Bytes that say what they are, for telling files apart.
fn contents(name: &str, size: usize) -> Vec<u8> {
    let mut data = format!("{name};").into_bytes();
    data.extend((0..size).map(|i| (i % 241) as u8));
    data
}

/// The code object the fat library carries for `target`.
fn code_object(target: &str) -> Vec<u8> {
    contents(&format!("rocblas code for {target}"), 6000)
}

/// The fat `librocblas.so.0.1`: a code object for each of
/// [`CODE_TARGETS`].
fn fat_library(work: &Path, library: &Path) {
    let codes: Vec<(String, Vec<u8>)> = CODE_TARGETS
        .iter()
        .map(|t| (t.to_string(), code_object(t)))
        .collect();
    crate::fat::fat_library(work, library, "librocblas.so.0", &codes);
}

/// The reduced package as a `.deb` in `sources/`; returns the package's
/// tree under `usr/lib/x86_64-linux-gnu` as files relative to it.
fn reduced_package(work: &Path) -> BTreeMap<String, Vec<u8>> {
    let root = work.join("package");
    let lib = root.join(LIBRARY_DIR);
    let library_dir = lib.join(DATABASES);
    fs_err::create_dir_all(&library_dir).unwrap();
    fs_err::create_dir_all(root.join("DEBIAN")).unwrap();
    fs_err::write(
        root.join("DEBIAN/control"),
        "Package: librocblas0\nVersion: 5.5.1+dfsg-7\nArchitecture: amd64\n\
         Maintainer: Test <test@example.org>\nDescription: rocBLAS, reduced\n",
    )
    .unwrap();
    fat_library(work, &lib.join("librocblas.so.0.1"));
    fs_err::os::unix::fs::symlink("librocblas.so.0.1", lib.join("librocblas.so.0")).unwrap();
    for name in DATABASE_FILES {
        fs_err::write(library_dir.join(name), contents(name, 20_000)).unwrap();
    }
    fs_err::create_dir_all(root.join("usr/share/doc/librocblas0")).unwrap();
    fs_err::write(root.join("usr/share/doc/librocblas0/copyright"), "MIT").unwrap();
    let sources = work.join("sources");
    fs_err::create_dir_all(&sources).unwrap();
    run(tool("dpkg-deb")
        .args(["--root-owner-group", "-b"])
        .arg(&root)
        .arg(sources.join("librocblas0_5.5.1+dfsg-7_amd64.deb")));
    let mut files = BTreeMap::new();
    for name in DATABASE_FILES {
        files.insert(
            format!("{DATABASES}/{name}"),
            fs_err::read(library_dir.join(name)).unwrap(),
        );
    }
    files
}

/// A repository with rocm-blas built by `kpack-repo build` from the
/// workspace's manifest and the reduced package.
struct BlasRepo {
    _work: tempfile::TempDir,
    dir: PathBuf,
    public_key: PathBuf,
    databases: BTreeMap<String, Vec<u8>>,
}

fn blas_repo() -> BlasRepo {
    let work = tempfile::tempdir().unwrap();
    let databases = reduced_package(work.path());
    let repo = kpack_repo_exe();
    run(std::process::Command::new(&repo)
        .args(["keygen", "key", "--unencrypted"])
        .current_dir(work.path()));
    run(std::process::Command::new(&repo)
        .arg("build")
        .arg(work.path().join("repo"))
        .arg(kpack_test_support::workspace().join("manifests/rocm-blas.toml"))
        .arg("--sources")
        .arg(work.path().join("sources"))
        .arg("--key")
        .arg(work.path().join("key.key")));
    BlasRepo {
        dir: work.path().join("repo"),
        public_key: work.path().join("key.pub"),
        databases,
        _work: work,
    }
}

const HOST_TREE: &str = "pool/rocm-blas/5.5.1/rocm-blas-5.5.1-host.tar.zst";

/// A processor's archive as the repository serves it: transport-encoded.
fn archive(processor: &str) -> String {
    format!("pool/rocm-blas/5.5.1/rocblas_{processor}.kpack.zst")
}

fn payload(processor: &str) -> String {
    format!("pool/rocm-blas/5.5.1/rocm-blas-{processor}-tensile.tar.zst")
}

/// Installs rocm-blas for `targets` (comma-separated) into a new prefix
/// in the kpack layout; returns the environment and the pool files the
/// server was asked for.
fn install_for(repo: &BlasRepo, targets: &str) -> (Env, Vec<String>) {
    install_as(repo, targets, "kpack")
}

/// Installs rocm-blas for `targets` into a new prefix in `layout`.
fn install_as(repo: &BlasRepo, targets: &str, layout: &str) -> (Env, Vec<String>) {
    let server = TestServer::start(&repo.dir);
    let env = Env::new();
    let stdout = success(&mut env.with_repo(
        &server.url(),
        &repo.public_key,
        &[
            "--layout",
            layout,
            "--target",
            targets,
            "install",
            "rocm-blas",
        ],
    ));
    assert!(stdout.contains("installed rocm-blas 5.5.1"), "{stdout}");
    (env, pool_gets(&server))
}

/// The installed database files (relative to the library directory) with
/// their bytes.
fn installed_databases(env: &Env) -> BTreeMap<String, Vec<u8>> {
    let dir = env.prefix.join("lib").join(DATABASES);
    snapshot(&dir)
        .into_keys()
        .map(|name| {
            let bytes = fs_err::read(dir.join(&name)).unwrap();
            (format!("{DATABASES}/{name}"), bytes)
        })
        .collect()
}

/// The package's database files a GPU of these processors needs: the
/// shared ones and every file of each processor.
fn expected_databases(repo: &BlasRepo, processors: &[&str]) -> BTreeMap<String, Vec<u8>> {
    repo.databases
        .iter()
        .filter(|(path, _)| {
            path.ends_with("TensileLibrary.dat")
                || processors.iter().any(|p| {
                    path.ends_with(&format!("_{p}.co"))
                        || path.contains(&format!("-{p}.hsaco"))
                        || path.contains(&format!("-{p}-xnack"))
                })
        })
        .map(|(path, bytes)| (path.clone(), bytes.clone()))
        .collect()
}

#[test]
fn a_gfx1100_gets_the_host_tree_its_archive_and_its_tensile_payload_and_nothing_else() {
    let repo = blas_repo();
    let (env, gets) = install_for(&repo, "gfx1100");
    let mut expected = vec![payload("gfx1100"), archive("gfx1100"), HOST_TREE.to_owned()];
    expected.sort();
    assert_eq!(gets, expected);
    assert_eq!(
        installed_databases(&env),
        expected_databases(&repo, &["gfx1100"])
    );
    let installed = snapshot(&env.prefix);
    let kpacks: Vec<&String> = installed
        .keys()
        .filter(|p| p.starts_with(".kpack/") && p.ends_with(".kpack"))
        .collect();
    assert_eq!(kpacks, [".kpack/rocblas_gfx1100.kpack"]);
    assert_eq!(
        installed.get("lib/librocblas.so.0").map(String::as_str),
        Some("-> librocblas.so.0.1")
    );
    // Nothing else: the library, its link, the directories and the files.
    let mut lib: Vec<String> = snapshot(&env.prefix.join("lib")).into_keys().collect();
    let mut wanted: Vec<String> = [
        "librocblas.so.0",
        "librocblas.so.0.1",
        "rocblas",
        "rocblas/2.47.0",
        DATABASES,
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(expected_databases(&repo, &["gfx1100"]).into_keys())
    .collect();
    lib.sort();
    wanted.sort();
    assert_eq!(lib, wanted);
    let library = env.prefix.join("lib/librocblas.so.0.1");
    assert_eq!(load_installed(&library, "gfx1100"), code_object("gfx1100"));
    success(env.command().arg("verify"));
}

#[test]
fn a_gfx90a_in_xnack_off_mode_gets_its_kernels_and_code_from_the_gfx90a_payload() {
    let repo = blas_repo();
    let (env, gets) = install_for(&repo, "gfx90a:sramecc+:xnack-");
    let mut expected = vec![payload("gfx90a"), archive("gfx90a"), HOST_TREE.to_owned()];
    expected.sort();
    assert_eq!(gets, expected);
    // One payload per processor: both xnack modes' kernels come, as the
    // GPU can be switched between them.
    let databases = installed_databases(&env);
    assert_eq!(databases, expected_databases(&repo, &["gfx90a"]));
    assert!(databases.contains_key(&format!("{DATABASES}/Kernels.so-000-gfx90a-xnack-.hsaco")));
    let library = env.prefix.join("lib/librocblas.so.0.1");
    assert_eq!(
        load_installed(&library, "gfx90a:sramecc+:xnack-"),
        code_object("gfx90a:xnack-")
    );
}

#[test]
fn two_gpus_get_both_sets_each_file_once() {
    let repo = blas_repo();
    let (env, gets) = install_for(&repo, "gfx1100,gfx90a:sramecc+:xnack-");
    let mut expected = vec![
        payload("gfx1100"),
        archive("gfx1100"),
        payload("gfx90a"),
        archive("gfx90a"),
        HOST_TREE.to_owned(),
    ];
    expected.sort();
    assert_eq!(gets, expected);
    assert_eq!(
        installed_databases(&env),
        expected_databases(&repo, &["gfx1100", "gfx90a"])
    );
    assert!(!env.prefix.join(".kpack/rocblas_gfx1030.kpack").exists());
}

#[test]
fn the_fat_layout_puts_a_gfx1100_s_code_in_the_library_beside_its_databases_and_no_archive() {
    let repo = blas_repo();
    let (env, gets) = install_as(&repo, "gfx1100", "fat");
    // The same downloads as the kpack layout: only what is written differs.
    let mut expected = vec![payload("gfx1100"), archive("gfx1100"), HOST_TREE.to_owned()];
    expected.sort();
    assert_eq!(gets, expected);
    assert_eq!(
        installed_databases(&env),
        expected_databases(&repo, &["gfx1100"])
    );
    let installed = snapshot(&env.prefix);
    assert!(
        !installed
            .keys()
            .any(|p| p.contains("/") && p.ends_with(".kpack")),
        "no archive in the fat layout: {installed:#?}"
    );
    let library = env.prefix.join("lib/librocblas.so.0.1");
    assert_eq!(load_installed(&library, "gfx1100"), code_object("gfx1100"));
    success(env.command().arg("verify"));
}

//! AOTriton's kernel images as torch's ROCm wheels lay them out: one
//! directory per processor (`amd-gfx942`) and group directories for RDNA
//! (`amd-gfx11xx` for every gfx11 GPU, `amd-gfx120x` for gfx12_0).
//! Packaged as a Debian package, built with `kpack-repo build`, served
//! over loopback and installed with `kpack-get`: a GPU gets its
//! processor's images or its group's, each group's payload once however
//! many of its GPUs a machine has, and nothing of other GPUs.

use std::path::{Path, PathBuf};

use kpack_test_support::chain::{kpack_repo_exe, pool_gets, snapshot, success, Env};
use kpack_test_support::server::TestServer;
use kpack_test_support::{run, tool};

const IMAGES: &str = "usr/lib/x86_64-linux-gnu/aotriton.images";

/// The image directories of the reduced package, each with two files.
const IMAGE_DIRS: [&str; 4] = ["amd-gfx942", "amd-gfx90a", "amd-gfx11xx", "amd-gfx120x"];

/// A `.deb` of AOTriton's images and its library in `work/sources`.
fn package(work: &Path) {
    let root = work.join("package");
    fs_err::create_dir_all(root.join("DEBIAN")).unwrap();
    fs_err::write(
        root.join("DEBIAN/control"),
        "Package: libaotriton0\nVersion: 0.11.1-1\nArchitecture: amd64\n\
         Maintainer: Test <test@example.org>\nDescription: AOTriton, reduced\n",
    )
    .unwrap();
    let lib = root.join("usr/lib/x86_64-linux-gnu");
    fs_err::create_dir_all(&lib).unwrap();
    fs_err::write(lib.join("libaotriton_v2.so.0.11.1"), b"host library").unwrap();
    for dir in IMAGE_DIRS {
        let images = root.join(IMAGES).join(dir);
        fs_err::create_dir_all(images.join("flash/attn_fwd")).unwrap();
        fs_err::write(images.join("__signature__"), dir.as_bytes()).unwrap();
        fs_err::write(
            images.join("flash/attn_fwd/kernel.aks2"),
            format!("attention kernels of {dir}"),
        )
        .unwrap();
    }
    let sources = work.join("sources");
    fs_err::create_dir_all(&sources).unwrap();
    run(tool("dpkg-deb")
        .args(["--root-owner-group", "-b"])
        .arg(&root)
        .arg(sources.join("libaotriton0_0.11.1-1_amd64.deb")));
    fs_err::write(
        work.join("aotriton.toml"),
        "[package]\nname = \"aotriton\"\nversion = \"0.11.1\"\n\n\
         [source]\ndebian = \"libaotriton0_0.11.1-1_amd64.deb\"\n\n\
         [source.map]\n\"usr/lib/x86_64-linux-gnu\" = \"lib\"\n",
    )
    .unwrap();
}

/// A repository with aotriton built by `kpack-repo build`.
fn repository(work: &Path) -> (PathBuf, PathBuf) {
    package(work);
    let repo = kpack_repo_exe();
    run(std::process::Command::new(&repo)
        .args(["keygen", "key", "--unencrypted"])
        .current_dir(work));
    run(std::process::Command::new(&repo)
        .arg("build")
        .arg(work.join("repo"))
        .arg(work.join("aotriton.toml"))
        .arg("--sources")
        .arg(work.join("sources"))
        .arg("--key")
        .arg(work.join("key.key")));
    (work.join("repo"), work.join("key.pub"))
}

/// Installs aotriton for `targets` into a new prefix: the image
/// directories installed and the pool files fetched.
fn install_for(repo: &(PathBuf, PathBuf), targets: &str) -> (Vec<String>, Vec<String>) {
    let server = TestServer::start(&repo.0);
    let env = Env::new();
    success(&mut env.with_repo(
        &server.url(),
        &repo.1,
        &["--target", targets, "install", "aotriton"],
    ));
    let images = env.prefix.join("lib/aotriton.images");
    let dirs = if images.exists() {
        snapshot(&images)
            .into_keys()
            .filter(|path| !path.contains('/'))
            .collect()
    } else {
        Vec::new()
    };
    success(env.command().arg("verify"));
    (dirs, pool_gets(&server))
}

#[test]
fn group_directories_are_installed_once_for_the_gpus_of_their_group() {
    let work = tempfile::tempdir().unwrap();
    let repo = repository(work.path());
    let pool = |file: &str| format!("pool/aotriton/0.11.1/{file}");
    let host = pool("aotriton-0.11.1-host.tar.zst");

    let (dirs, gets) = install_for(&repo, "gfx1100,gfx1151");
    assert_eq!(dirs, ["amd-gfx11xx"]);
    assert_eq!(
        gets,
        [host.clone(), pool("aotriton-gfx11-aotriton.tar.zst")]
    );

    let (dirs, gets) = install_for(&repo, "gfx1201");
    assert_eq!(dirs, ["amd-gfx120x"]);
    assert_eq!(
        gets,
        [host.clone(), pool("aotriton-gfx12_0-aotriton.tar.zst")]
    );

    let (dirs, _) = install_for(&repo, "gfx942:sramecc+:xnack-,gfx1103");
    assert_eq!(dirs, ["amd-gfx11xx", "amd-gfx942"]);
}

//! A package version with two components of device code per GPU, as
//! rocBLAS has: the kpack archive of its library (`kernels`) and its
//! Tensile kernel database (`tensile`). Published with the library, served
//! over loopback, installed with `kpack-get`: a GPU gets its artifact of
//! each component, and nothing for the others.

use std::path::{Path, PathBuf};

use crate::common::{pool_gets, snapshot, success, Env, RocrandRepo};
use kpack_repo::publish::{NewArtifact, NewVersion, Publisher};
use kpack_repo_index::Component;
use kpack_sign::{keygen, SecretKey};
use kpack_test_support::context::TestContext;
use rocm_kpack::{ArchiveOptions, ArchiveWriter, BinaryKey, Compression, Target};
use rocm_kpack_get::install::record::InstalledRecord;

const LIBRARY: &str = "lib/librocblas.so.4";

/// A rocBLAS kpack archive holding code for `target` only.
fn archive(dir: &Path, processor: &str, target: &str) -> PathBuf {
    let path = dir.join(format!("rocblas_{processor}.kpack"));
    let options = ArchiveOptions {
        group: "rocm".into(),
        family: processor.into(),
        arches: vec![Target::parse(target).unwrap()],
        compression: Compression::DEFAULT,
    };
    let mut writer = ArchiveWriter::new(fs_err::File::create(&path).unwrap(), options).unwrap();
    writer
        .add(
            &BinaryKey::new(LIBRARY, 0),
            &Target::parse(target).unwrap(),
            format!("code for {target}").as_bytes(),
        )
        .unwrap();
    writer.finish().unwrap();
    path
}

/// A tree artifact `dir/file_name` holding `files` (path, contents).
fn tree(dir: &Path, file_name: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let mut tar = tar::Builder::new(Vec::new());
    for (path, contents) in files {
        let mut header = tar::Header::new_gnu();
        header.set_mode(0o644);
        header.set_size(contents.len() as u64);
        tar.append_data(&mut header, path, *contents).unwrap();
    }
    let bytes = zstd::encode_all(&tar.into_inner().unwrap()[..], 3).unwrap();
    let path = dir.join(file_name);
    fs_err::write(&path, bytes).unwrap();
    path
}

pub(crate) fn tensile_file(processor: &str) -> String {
    format!("lib/rocblas/library/TensileLibrary_{processor}.dat")
}

/// The Tensile payload for one processor: component `tensile`.
fn tensile(dir: &Path, processor: &str) -> NewArtifact {
    NewArtifact {
        owner: None,
        file: tree(
            dir,
            &format!("rocm-blas-{processor}-tensile.tar.zst"),
            &[(&tensile_file(processor), processor.as_bytes())],
        ),
        targets: Some(vec![processor.parse().unwrap()]),
        component: Some("tensile".parse().unwrap()),
        unpacked_size: None,
    }
}

/// Host code, or an archive (whose targets and component it says itself).
fn plain(file: PathBuf) -> NewArtifact {
    NewArtifact {
        owner: None,
        file,
        targets: None,
        component: None,
        unpacked_size: None,
    }
}

/// rocm-blas 5.5.1 in a signed repository under `work`: a host tree,
/// archives for gfx1030 and gfx90a, Tensile payloads for both. Returns
/// the repository and its public key.
/// A context serving the rocBLAS-shaped repository.
pub(crate) fn blas_context() -> TestContext {
    let env = Env::new();
    let repo = blas_repo(&env.home.path().join("blas"));
    TestContext::serving(repo, env)
}

fn blas_repo(work: &Path) -> RocrandRepo {
    fs_err::create_dir_all(work).unwrap();
    let (secret, public) = (work.join("key.key"), work.join("key.pub"));
    keygen(&secret, &public, None).unwrap();
    let inputs = work.join("inputs");
    fs_err::create_dir_all(&inputs).unwrap();
    let repo = work.join("repo");
    Publisher::open(&repo)
        .unwrap()
        .add(
            &NewVersion {
                depends: vec![],
                summary: Some("ROCm BLAS".into()),
                ..NewVersion::new(
                    &"rocm-blas".parse().unwrap(),
                    &semver::Version::new(5, 5, 1),
                )
            },
            &[
                plain(tree(
                    &inputs,
                    "rocm-blas-host.tar.zst",
                    &[(LIBRARY, b"host code")],
                )),
                plain(archive(&inputs, "gfx1030", "gfx1030")),
                plain(archive(&inputs, "gfx90a", "gfx90a:xnack-")),
                tensile(&inputs, "gfx1030"),
                tensile(&inputs, "gfx90a"),
            ],
            Some(&SecretKey::load(&secret, None).unwrap()),
        )
        .unwrap();
    RocrandRepo {
        dir: repo,
        public_key: public,
        secret_key: secret,
    }
}

fn pool(file: &str) -> String {
    format!("pool/rocm-blas/5.5.1/{file}")
}

#[test]
fn installs_the_kernels_archive_and_the_tensile_payload_of_the_gpu() {
    let context = blas_context();
    let (env, server) = (&context.env, &context.server);
    let run = |args: &[&str]| {
        let mut all = vec!["--target", "gfx1030"];
        all.extend_from_slice(args);
        success(&mut context.kpack_get(&all))
    };

    let transcript = |args: &[&str]| {
        let mut all = vec!["--target", "gfx1030"];
        all.extend_from_slice(args);
        context.run(&mut context.kpack_get(&all))
    };
    let plan = transcript(&["install", "rocm-blas", "--dry-run"]);
    insta::assert_snapshot!("dry_run_for_gfx1030", plan);
    let plan: serde_json::Value =
        serde_json::from_str(&run(&["--json", "install", "rocm-blas", "--dry-run"])).unwrap();
    let components: Vec<&serde_json::Value> = plan["packages"][0]["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| &a["component"])
        .collect();
    assert_eq!(
        components,
        [
            &serde_json::Value::Null,
            &serde_json::json!("kernels"),
            &serde_json::json!("tensile")
        ]
    );
    // Each artifact, chosen (*) or not, with its targets and component.
    let info = run(&["info", "rocm-blas"]);
    let lines: Vec<(bool, &str)> = info
        .lines()
        .filter(|line| line.contains("pool/"))
        .map(|line| (line.starts_with('*'), line.split_once("B  ").unwrap().1))
        .collect();
    assert_eq!(
        lines,
        [
            (
                true,
                "host part  (pool/rocm-blas/5.5.1/rocm-blas-host.tar.zst)"
            ),
            (
                true,
                "kernels for gfx1030  (pool/rocm-blas/5.5.1/rocblas_gfx1030.kpack.zst)"
            ),
            (
                false,
                "kernels for gfx90a:xnack-  (pool/rocm-blas/5.5.1/rocblas_gfx90a.kpack.zst)"
            ),
            (
                true,
                "tensile for gfx1030  (pool/rocm-blas/5.5.1/rocm-blas-gfx1030-tensile.tar.zst)"
            ),
            (
                false,
                "tensile for gfx90a  (pool/rocm-blas/5.5.1/rocm-blas-gfx90a-tensile.tar.zst)"
            ),
        ],
        "{info}"
    );
    let info: serde_json::Value =
        serde_json::from_str(&run(&["--json", "info", "rocm-blas"])).unwrap();
    let components: Vec<(&serde_json::Value, &serde_json::Value)> = info["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (&a["component"], &a["chosen"]))
        .collect();
    let (null, yes, no) = (
        serde_json::Value::Null,
        serde_json::json!(true),
        serde_json::json!(false),
    );
    let (kernels, tensile) = (serde_json::json!("kernels"), serde_json::json!("tensile"));
    assert_eq!(
        components,
        [
            (&null, &yes),
            (&kernels, &yes),
            (&kernels, &no),
            (&tensile, &yes),
            (&tensile, &no)
        ]
    );
    assert!(pool_gets(server).is_empty(), "a dry run downloads nothing");

    let installed = transcript(&["install", "rocm-blas"]);
    insta::assert_snapshot!("installed_for_gfx1030", installed);
    assert_eq!(
        pool_gets(server),
        [
            pool("rocblas_gfx1030.kpack.zst"),
            pool("rocm-blas-gfx1030-tensile.tar.zst"),
            pool("rocm-blas-host.tar.zst"),
        ]
    );
    let installed: Vec<String> = snapshot(&env.prefix)
        .into_iter()
        .filter(|(path, kind)| kind != "dir" && !path.starts_with(".kpack/."))
        .map(|(path, _)| path)
        .filter(|path| path != ".kpack/installed.toml")
        .collect();
    assert_eq!(
        installed,
        [
            ".kpack/rocblas_gfx1030.kpack".to_owned(),
            LIBRARY.to_owned(),
            tensile_file("gfx1030"),
        ]
    );
    assert_eq!(
        fs_err::read(env.prefix.join(tensile_file("gfx1030"))).unwrap(),
        b"gfx1030"
    );
    assert_eq!(
        fs_err::read(env.prefix.join(".kpack/rocblas_gfx1030.kpack")).unwrap(),
        // Served transport-encoded, installed decoded.
        zstd::decode_all(
            &fs_err::read(context.repo.dir.join(pool("rocblas_gfx1030.kpack.zst"))).unwrap()[..]
        )
        .unwrap()
    );

    // The record keeps each artifact's component.
    let record_path = env.prefix.join(".kpack/installed.toml");
    let record = InstalledRecord::load(&record_path).unwrap();
    let package = &record.packages[&"rocm-blas".parse().unwrap()];
    let components: Vec<Option<&str>> = package
        .artifacts
        .iter()
        .map(|a| a.component.as_ref().map(Component::as_str))
        .collect();
    assert_eq!(components, [None, Some("kernels"), Some("tensile")]);

    success(env.command().arg("verify"));
    success(env.command().args(["remove", "rocm-blas"]));
    assert!(!env.prefix.join(tensile_file("gfx1030")).exists());
    assert!(!env.prefix.join(".kpack/rocblas_gfx1030.kpack").exists());
}

#[test]
fn two_gpus_get_both_sets_each_file_once() {
    let context = blas_context();
    let (env, server) = (&context.env, &context.server);
    let installed = context.run(&mut context.kpack_get(&[
        "--target",
        "gfx90a:sramecc+:xnack-,gfx1030",
        "install",
        "rocm-blas",
    ]));
    insta::assert_snapshot!("installed_for_two_gpus", installed);
    assert_eq!(
        pool_gets(server),
        [
            pool("rocblas_gfx1030.kpack.zst"),
            pool("rocblas_gfx90a.kpack.zst"),
            pool("rocm-blas-gfx1030-tensile.tar.zst"),
            pool("rocm-blas-gfx90a-tensile.tar.zst"),
            pool("rocm-blas-host.tar.zst"),
        ]
    );
    for processor in ["gfx1030", "gfx90a"] {
        assert!(env.prefix.join(tensile_file(processor)).is_file());
        assert!(env
            .prefix
            .join(format!(".kpack/rocblas_{processor}.kpack"))
            .is_file());
    }
}

/// AOTriton's RDNA kernels of torch's wheels, as a tree owned by `owner`.
fn aotriton(dir: &Path, owner: &str, group_dir: &str) -> NewArtifact {
    let file = format!("lib/aotriton.images/amd-{group_dir}/flash/attn_fwd/kernel.aks2");
    NewArtifact {
        owner: Some(owner.parse().unwrap()),
        file: tree(
            dir,
            &format!("torch-{owner}-aotriton.tar.zst"),
            &[(&file, owner.as_bytes())],
        ),
        targets: None,
        component: Some("aotriton".parse().unwrap()),
        unpacked_size: None,
    }
}

/// torch 2.9.0: a host tree, an archive for gfx1100, and AOTriton payloads
/// owned by the gfx11 family and the gfx12_0 sub-family.
pub(crate) fn torch_context() -> TestContext {
    let env = Env::new();
    let work = env.home.path().join("torch");
    let inputs = work.join("inputs");
    fs_err::create_dir_all(&inputs).unwrap();
    let (secret, public) = (work.join("key.key"), work.join("key.pub"));
    keygen(&secret, &public, None).unwrap();
    let repo = work.join("repo");
    Publisher::open(&repo)
        .unwrap()
        .add(
            &NewVersion::new(&"torch".parse().unwrap(), &semver::Version::new(2, 9, 0)),
            &[
                plain(tree(
                    &inputs,
                    "torch-host.tar.zst",
                    &[(LIBRARY, b"host code")],
                )),
                plain(archive(&inputs, "gfx1100", "gfx1100")),
                aotriton(&inputs, "gfx11", "gfx11xx"),
                aotriton(&inputs, "gfx12_0", "gfx120x"),
            ],
            Some(&SecretKey::load(&secret, None).unwrap()),
        )
        .unwrap();
    let repo = RocrandRepo {
        dir: repo,
        public_key: public,
        secret_key: secret,
    };
    TestContext::serving(repo, env)
}

#[test]
fn a_payload_a_family_owns_is_installed_once_for_its_member_gpus() {
    let context = torch_context();
    let (env, server) = (&context.env, &context.server);
    let targets = ["--target", "gfx1100,gfx1151"];
    let plan = context.run(&mut context.kpack_get(&[
        targets[0],
        targets[1],
        "install",
        "torch",
        "--dry-run",
        "--verbose",
    ]));
    insta::assert_snapshot!("owned_dry_run", plan);
    let installed =
        context.run(&mut context.kpack_get(&[targets[0], targets[1], "install", "torch"]));
    insta::assert_snapshot!("owned_installed", installed);
    let pool = |file: &str| format!("pool/torch/2.9.0/{file}");
    assert_eq!(
        pool_gets(server),
        [
            pool("rocblas_gfx1100.kpack.zst"),
            pool("torch-gfx11-aotriton.tar.zst"),
            pool("torch-host.tar.zst"),
        ]
    );
    let kernel = env
        .prefix
        .join("lib/aotriton.images/amd-gfx11xx/flash/attn_fwd/kernel.aks2");
    assert_eq!(fs_err::read(&kernel).unwrap(), b"gfx11");
    assert!(!env.prefix.join("lib/aotriton.images/amd-gfx120x").exists());
    let record = InstalledRecord::load(&env.prefix.join(".kpack/installed.toml")).unwrap();
    let package = &record.packages[&"torch".parse().unwrap()];
    let owners: Vec<Option<String>> = package
        .artifacts
        .iter()
        .map(|a| a.owner.as_ref().map(ToString::to_string))
        .collect();
    assert_eq!(owners, [None, None, Some("gfx11".to_owned())]);
    success(env.command().arg("verify"));
}

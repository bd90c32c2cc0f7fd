//! Debian 13's ROCm stack, reduced: one `.deb` per package of
//! `manifests/debian-13/`, made with `dpkg-deb -b` from the package's real
//! control file (its real version and dependency lines) and a library with
//! the real name and layout, fat (code for gfx1100 and gfx90a) where the
//! real one carries device code. `kpack-repo build` publishes the whole
//! manifest set in dependency order as one root update, and a second run
//! publishes nothing; `kpack-get install rocm-solver --target gfx1100`
//! fetches exactly the host trees of rocm-solver and what it depends on and
//! the gfx1100 archives among them; the whole set installs into one prefix.

use std::path::Path;
use std::process::Command;

use kpack_test_support::chain::{kpack_repo_exe, output, pool_gets, success, Env};
use kpack_test_support::server::TestServer;
use kpack_test_support::{run, tool, workspace};

const LIBRARY_DIR: &str = "usr/lib/x86_64-linux-gnu";

/// Each Debian package: its library file, the soname link to it, and
/// whether it carries device code.
const PACKAGES: [(&str, &str, &str, bool); 17] = [
    (
        "libamd-comgr2",
        "libamd_comgr.so.2.6.0",
        "libamd_comgr.so.2",
        false,
    ),
    (
        "libamdhip64-5",
        "libamdhip64.so.5.7.31921",
        "libamdhip64.so.5",
        false,
    ),
    ("libhipblas0", "libhipblas.so.0.1", "libhipblas.so.0", false),
    ("libhipfft0", "libhipfft.so.0.1", "libhipfft.so.0", false),
    ("libhiprand1", "libhiprand.so.1.1", "libhiprand.so.1", false),
    (
        "libhipsolver0",
        "libhipsolver.so.0.1",
        "libhipsolver.so.0",
        false,
    ),
    (
        "libhipsparse0",
        "libhipsparse.so.0.1",
        "libhipsparse.so.0",
        false,
    ),
    (
        "libhsa-runtime64-1",
        "libhsa-runtime64.so.1.13.0",
        "libhsa-runtime64.so.1",
        false,
    ),
    ("libhsakmt1", "libhsakmt.so.1.0.6", "libhsakmt.so.1", false),
    ("librccl1", "librccl.so.1.0", "librccl.so.1", true),
    (
        "librocalution0",
        "librocalution.so.0.1",
        "librocalution.so.0",
        false,
    ),
    ("librocblas0", "librocblas.so.0.1", "librocblas.so.0", true),
    ("librocfft0", "librocfft.so.0.1", "librocfft.so.0", true),
    (
        "librocm-smi64-1",
        "librocm_smi64.so.1.0",
        "librocm_smi64.so.1",
        false,
    ),
    ("librocrand1", "librocrand.so.1.1", "librocrand.so.1", true),
    (
        "librocsolver0",
        "librocsolver.so.0.1",
        "librocsolver.so.0",
        true,
    ),
    (
        "librocsparse0",
        "librocsparse.so.0.1",
        "librocsparse.so.0",
        true,
    ),
];

/// Every repository package of the set.
const ALL: [&str; 17] = [
    "amd-comgr",
    "hip-blas",
    "hip-fft",
    "hip-rand",
    "hip-runtime",
    "hip-solver",
    "hip-sparse",
    "hsa-kmt",
    "hsa-runtime",
    "rccl",
    "rocm-alution",
    "rocm-blas",
    "rocm-fft",
    "rocm-rand",
    "rocm-smi",
    "rocm-solver",
    "rocm-sparse",
];

/// Builds each package's `.deb` into `sources`.
fn reduced_stack(work: &Path, sources: &Path) {
    fs_err::create_dir_all(sources).unwrap();
    let controls = workspace().join("crates/kpack-repo/testdata/debian-13");
    for (package, library, soname, fat) in PACKAGES {
        let root = work.join(package);
        let lib = root.join(LIBRARY_DIR);
        fs_err::create_dir_all(&lib).unwrap();
        fs_err::create_dir_all(root.join("DEBIAN")).unwrap();
        let control = fs_err::read_to_string(controls.join(format!("{package}.control"))).unwrap();
        fs_err::write(root.join("DEBIAN/control"), &control).unwrap();
        if fat {
            let codes: Vec<(String, Vec<u8>)> = ["gfx1100", "gfx90a:xnack-"]
                .iter()
                .map(|t| {
                    (
                        t.to_string(),
                        format!("{package} code for {t}").into_bytes(),
                    )
                })
                .collect();
            crate::fat::fat_library(work, &lib.join(library), soname, &codes);
        } else {
            crate::fat::host_library(work, &lib.join(library), soname);
        }
        fs_err::os::unix::fs::symlink(library, lib.join(soname)).unwrap();
        let version = control
            .lines()
            .find_map(|l| l.strip_prefix("Version: "))
            .unwrap();
        run(tool("dpkg-deb")
            .args(["--root-owner-group", "-b"])
            .arg(&root)
            .arg(sources.join(format!("{package}_{version}_amd64.deb"))));
    }
}

fn build(work: &Path) -> String {
    success(
        Command::new(kpack_repo_exe())
            .arg("build")
            .arg(work.join("repo"))
            .arg(workspace().join("manifests/debian-13"))
            .arg("--sources")
            .arg(work.join("sources"))
            .arg("--key")
            .arg(work.join("key.key")),
    )
}

/// `text` with the size of each host tree masked: the libraries in them
/// are compiled here, and their size varies with the C toolchain.
fn mask_host_tree_sizes(text: &str) -> String {
    text.lines()
        .map(|line| match line.split_once("  pool/") {
            Some((size, rest)) if rest.ends_with("-host.tar.zst") => {
                let marker = if size.starts_with('*') { "*" } else { " " };
                format!("{marker}     <SIZE>  pool/{rest}\n")
            }
            _ => format!("{line}\n"),
        })
        .collect()
}

/// The order `build` announced.
fn announced_order(stdout: &str) -> Vec<String> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("building 17 of 17 packages in dependency order: "))
        .unwrap_or_else(|| panic!("no order announced: {stdout}"));
    line.split(", ").map(str::to_owned).collect()
}

#[test]
fn the_reduced_stack_publishes_in_one_update_and_installs_rocm_solver_for_gfx1100() {
    let work = tempfile::tempdir().unwrap();
    let work = work.path();
    reduced_stack(work, &work.join("sources"));
    run(Command::new(kpack_repo_exe())
        .args(["keygen", "key", "--unencrypted"])
        .current_dir(work));

    let built = build(work);
    let order = announced_order(&built);
    let at = |name: &str| order.iter().position(|n| n == name).unwrap();
    for (before, after) in [
        ("hsa-kmt", "hsa-runtime"),
        ("hsa-runtime", "hip-runtime"),
        ("amd-comgr", "hip-runtime"),
        ("hip-runtime", "rocm-blas"),
        ("rocm-blas", "rocm-solver"),
        ("rocm-solver", "hip-solver"),
        ("rocm-solver", "hip-blas"),
        ("rocm-smi", "rccl"),
        ("rocm-sparse", "hip-sparse"),
        ("rocm-fft", "hip-fft"),
        ("rocm-rand", "hip-rand"),
    ] {
        assert!(at(before) < at(after), "{before} before {after}: {order:?}");
    }
    assert!(
        built.contains("published 17 packages (") && built.contains("(repo version 1, signed)"),
        "{built}"
    );
    // One root update: one root, one claimed copy.
    let roots: Vec<String> = fs_err::read_dir(work.join("repo/roots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(roots.len(), 2, "{roots:?}");
    let again = build(work);
    assert!(again.starts_with("nothing to publish: "), "{again}");
    let index = fs_err::read_to_string(work.join("repo/index.toml")).unwrap();
    assert!(index.contains("\nversion = 1\n"), "{index}");

    let server = TestServer::start(&work.join("repo"));
    let env = Env::new();
    let key = work.join("key.pub");
    let info = output(&mut env.with_repo(&server.url(), &key, &["info", "rocm-solver"]));
    let url = server.url();
    let info = kpack_test_support::transcript(&info, &[(&url, "<URL>")]);
    insta::assert_snapshot!(mask_host_tree_sizes(&info));
    let stdout = success(&mut env.with_repo(
        &server.url(),
        &key,
        &["--target", "gfx1100", "install", "rocm-solver"],
    ));
    // The sizes vary with the C toolchain that made the libraries: what
    // was installed, in order, is checked.
    let installed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("installed "))
        .collect();
    assert_eq!(
        installed,
        [
            "installed amd-comgr 6.0.0+git.20231212.4510.c.28.dfsg.deb.3.b.2",
            "installed hip-runtime 5.7.1+deb.6.deb.13.u.1",
            "installed hsa-kmt 6.2.4+ds.deb.1",
            "installed hsa-runtime 6.1.2+deb.3",
            "installed rocm-blas 5.5.1+dfsg.deb.7",
            "installed rocm-solver 5.5.1+deb.7",
        ],
        "{stdout}"
    );
    let mut expected = vec![
        "pool/amd-comgr/6.0.0+git.20231212.4510.c.28.dfsg.deb.3.b.2/amd-comgr-6.0.0+git.20231212.4510.c.28.dfsg.deb.3.b.2-host.tar.zst".to_owned(),
        "pool/hip-runtime/5.7.1+deb.6.deb.13.u.1/hip-runtime-5.7.1+deb.6.deb.13.u.1-host.tar.zst".to_owned(),
        "pool/hsa-kmt/6.2.4+ds.deb.1/hsa-kmt-6.2.4+ds.deb.1-host.tar.zst".to_owned(),
        "pool/hsa-runtime/6.1.2+deb.3/hsa-runtime-6.1.2+deb.3-host.tar.zst".to_owned(),
        "pool/rocm-blas/5.5.1+dfsg.deb.7/rocblas_gfx1100.kpack.zst".to_owned(),
        "pool/rocm-blas/5.5.1+dfsg.deb.7/rocm-blas-5.5.1+dfsg.deb.7-host.tar.zst".to_owned(),
        "pool/rocm-solver/5.5.1+deb.7/rocm-solver-5.5.1+deb.7-host.tar.zst".to_owned(),
        "pool/rocm-solver/5.5.1+deb.7/rocsolver_gfx1100.kpack.zst".to_owned(),
    ];
    expected.sort();
    assert_eq!(pool_gets(&server), expected);
    assert!(env.prefix.join("lib/librocsolver.so.0.1").is_file());
    assert!(env.prefix.join(".kpack/rocsolver_gfx1100.kpack").is_file());

    let whole = Env::new();
    let mut args = vec!["--target", "gfx1100", "install"];
    args.extend(ALL);
    let stdout = success(&mut whole.with_repo(&server.url(), &key, &args));
    let installed = stdout
        .lines()
        .filter(|l| l.starts_with("installed "))
        .count();
    assert_eq!(installed, 17, "{stdout}");
    for (_, library, soname, _) in PACKAGES {
        assert!(
            whole.prefix.join("lib").join(library).is_file(),
            "{library}"
        );
        assert!(whole.prefix.join("lib").join(soname).exists(), "{soname}");
    }
}

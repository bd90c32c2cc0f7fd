//! rocm-rand, from Debian's rocRAND package to a loaded code object:
//! `kpack-repo build` splits and publishes it, `kpack-get` installs only
//! what a gfx90a needs over loopback, in either layout, the stand-in HIP
//! runtime loads the installed library's code object, and removing it
//! leaves the prefix as it was.

use std::path::Path;

use kpack_gpu::Target;
use kpack_test_support::chain::{
    installed_bytes, load_installed, pool, snapshot, success, ENCODED_ARCHIVE, HOST_TREE,
};
use kpack_test_support::context::TestContext;

const LIBRARY: &str = "lib/librocrand.so.1.1";

/// The code object the archive holds for `target`, whatever binary name
/// the packer gave it.
fn archived_code_object(archive: &Path, target: &str) -> Vec<u8> {
    let archive = rocm_kpack::Archive::open(archive).unwrap();
    let target = Target::parse(target).unwrap();
    let binaries: Vec<String> = archive.binaries().map(str::to_owned).collect();
    assert_eq!(binaries.len(), 1, "{binaries:?}");
    archive.kernel(&binaries[0], &target).unwrap().into_owned()
}

#[test]
fn installs_only_the_host_tree_and_the_gfx90a_archive_and_removes_cleanly() {
    let context = TestContext::new();
    let (env, server, repo) = (&context.env, &context.server, &context.repo);
    fs_err::create_dir_all(env.prefix.join("share")).unwrap();
    fs_err::write(env.prefix.join("share/user-file"), b"mine").unwrap();
    let before = snapshot(&env.prefix);

    let stdout = success(&mut context.kpack_get(&[
        "--layout",
        "kpack",
        "--target",
        "gfx90a:sramecc+:xnack-",
        "install",
        "rocm-rand",
    ]));
    assert!(stdout.contains("installed rocm-rand 5.3.3"), "{stdout}");
    // Compared with the .deb it was built from, never called a saving.
    assert!(stdout.contains("; the Debian package: "), "{stdout}");
    assert!(!stdout.contains("saved"), "{stdout}");
    assert_eq!(
        context.pool_gets(),
        [pool(HOST_TREE), pool(ENCODED_ARCHIVE)]
    );
    let host_size = fs_err::metadata(repo.dir.join(pool(HOST_TREE)))
        .unwrap()
        .len();
    let archive_size = fs_err::metadata(repo.dir.join(pool(ENCODED_ARCHIVE)))
        .unwrap()
        .len();
    assert_eq!(server.bytes_sent("pool/"), host_size + archive_size);

    // The archive came transport-encoded and is installed decoded, its
    // code objects stored as they are, which the runtime reads.
    let installed = env.prefix.join(".kpack/rocrand_gfx90a.kpack");
    assert_eq!(
        fs_err::read(&installed).unwrap(),
        installed_bytes(&repo.dir, ENCODED_ARCHIVE)
    );
    let scheme = rocm_kpack::Archive::open(&installed).unwrap().scheme();
    assert_eq!(scheme, rocm_kpack::Scheme::None);
    assert!(!env.prefix.join(".kpack/rocrand_gfx1030.kpack").exists());
    let code = load_installed(&env.prefix.join(LIBRARY), "gfx90a:sramecc+:xnack-");
    assert!(code.starts_with(b"\x7fELF"), "a code object");
    assert_eq!(
        code,
        archived_code_object(
            &env.prefix.join(".kpack/rocrand_gfx90a.kpack"),
            "gfx90a:xnack-"
        )
    );

    success(env.command().arg("verify"));
    success(env.command().args(["remove", "rocm-rand"]));
    let mut after = snapshot(&env.prefix);
    // The lock file stays, as apt's does.
    after.remove(".kpack/.lock");
    after.remove(".kpack");
    assert_eq!(after, before);
}

#[test]
fn the_fat_layout_installs_a_library_that_loads_its_code_without_archives() {
    let context = TestContext::new();
    let (env, repo) = (&context.env, &context.repo);
    let stdout = success(&mut context.kpack_get(&[
        "--layout",
        "fat",
        "--target",
        "gfx90a:sramecc+:xnack-",
        "install",
        "rocm-rand",
    ]));
    assert!(stdout.contains("layout fat: 1 binary made fat"), "{stdout}");
    assert_eq!(
        context.pool_gets(),
        [pool(HOST_TREE), pool(ENCODED_ARCHIVE)]
    );
    assert!(!env.prefix.join(".kpack/rocrand_gfx90a.kpack").exists());
    let code = load_installed(&env.prefix.join(LIBRARY), "gfx90a:sramecc+:xnack-");
    let archive = env.home.path().join("rocrand_gfx90a.kpack");
    fs_err::write(&archive, installed_bytes(&repo.dir, ENCODED_ARCHIVE)).unwrap();
    assert_eq!(code, archived_code_object(&archive, "gfx90a:xnack-"));
    success(env.command().arg("verify"));
}

//! Splitting an install tree: the unpacked rocRAND package becomes a
//! host-only tree with one `.kpack/` at its root, symlinks and modes kept,
//! and the split library still loads its code objects from there.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::common::*;
use kpack_binary::bundle::build::offload_bundle;
use kpack_packer::tree::{split_tree_with, TreeOptions};
use rocm_kpack::{Archive, Target};

fn mode(path: &Path) -> u32 {
    fs_err::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn splits_the_rocrand_package_tree() {
    let context = TestContext::new();
    let work = &context.dir;
    let input = work.path().join("deb");
    let library = unpack_rocrand(&input);
    // A fat binary under a name that does not look like a library, and a
    // file that merely starts like an ELF file.
    fs_err::copy(
        &library,
        input.join("usr/share/doc/librocrand1/payload.bin"),
    )
    .unwrap();
    fs_err::write(
        input.join("usr/share/doc/librocrand1/fake-elf"),
        b"\x7fELF not really",
    )
    .unwrap();
    fs_err::set_permissions(
        input.join("usr/share/doc/librocrand1/copyright"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    let output = work.path().join("split");

    let split =
        context.run(&mut context.kpack_pack(&["split", "deb", "-o", "split", "--group", "rocm"]));
    insta::assert_snapshot!("rocrand_tree_split", split);

    let lib = output.join("usr/lib/x86_64-linux-gnu");
    // The symlink is still a symlink with the same target.
    let link = lib.join("librocrand.so.1");
    assert!(fs_err::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        fs_err::read_link(&link).unwrap(),
        Path::new("librocrand.so.1.1")
    );
    // Plain files are copied with their modes; the fake ELF is untouched.
    let doc = output.join("usr/share/doc/librocrand1");
    assert_eq!(
        fs_err::read(doc.join("changelog.Debian.gz")).unwrap(),
        fs_err::read(input.join("usr/share/doc/librocrand1/changelog.Debian.gz")).unwrap()
    );
    assert_eq!(mode(&doc.join("copyright")), 0o640);
    assert_eq!(
        fs_err::read(doc.join("fake-elf")).unwrap(),
        b"\x7fELF not really"
    );
    assert_eq!(mode(&lib.join("librocrand.so.1.1")), mode(&library));

    // One .kpack at the root, keyed by paths relative to the root.
    let archive = Archive::open(output.join(".kpack/rocm_gfx90a.kpack")).unwrap();
    let keys: Vec<&str> = archive.binaries().collect();
    assert_eq!(
        keys,
        [
            "usr/lib/x86_64-linux-gnu/librocrand.so.1.1#0",
            "usr/share/doc/librocrand1/payload.bin#0"
        ]
    );
    // Both binaries hold the same code objects: stored once.
    assert_eq!(archive.stored_count(), 2);
    assert_eq!(archive.kernel_count(), 4);

    // verify loads every wrapper for every target through the markers.
    let verified = context.run(&mut context.kpack_pack(&["verify", "split"]));
    insta::assert_snapshot!("rocrand_tree_verify", verified);

    // The split library finds its archives from its own directory.
    let standin = work.path().join("hip");
    let dlopen = standin_for(&standin, &library);
    let loaded = run_with_standin(
        dlopen_command(&dlopen, &lib.join("librocrand.so.1")),
        &standin,
        "gfx1030",
    );
    let data = fs_err::read(&library).unwrap();
    let fat = kpack_binary::elf::FatElf::parse(&data).unwrap().unwrap();
    let gfx1030 = Target::parse("gfx1030").unwrap();
    let code_objects = fat.bundles[0].code_objects().unwrap();
    let expected = code_objects.iter().find(|c| c.target == gfx1030).unwrap();
    assert_eq!(loaded, [Ok(expected.bytes.to_vec())]);

    // A split binary moved one level deeper: its marker's relative path no
    // longer reaches .kpack/, and verify says so for every target.
    fs_err::create_dir(lib.join("deeper")).unwrap();
    fs_err::copy(lib.join("librocrand.so.1.1"), lib.join("deeper/moved.so")).unwrap();
    let verified = context.run(&mut context.kpack_pack(&["verify", "split"]));
    insta::assert_snapshot!("rocrand_tree_verify_moved", verified);

    // A corrupt archive is an error naming it.
    fs_err::write(output.join(".kpack/rocm_gfx803.kpack"), b"garbage").unwrap();
    let verified = context.run(&mut context.kpack_pack(&["verify", "split"]));
    insta::assert_snapshot!("rocrand_tree_verify_corrupt", verified);
}

/// `kpack-pack` run under the common umask 022, whatever the test's own.
fn kpack_pack_under_umask_022() -> Command {
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", "umask 022 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_kpack-pack"));
    command
}

#[test]
fn a_split_tree_is_readable_by_other_users() {
    let work = tempfile::tempdir().unwrap();
    let input = work.path().join("deb");
    let library = unpack_rocrand(&input);
    fs_err::set_permissions(&input, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = input.join("usr/share/doc/librocrand1/run.sh");
    fs_err::write(&script, "#!/bin/sh\n").unwrap();
    fs_err::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
    let output = work.path().join("split");

    run(kpack_pack_under_umask_022()
        .arg("split")
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .args(["--group", "rocm", "--sign"])
        .arg(signing_key(work.path())));

    // What the packer writes gets the usual modes; copies keep the input's.
    assert_eq!(mode(&output), 0o755, "the tree's root");
    assert_eq!(mode(&output.join(".kpack")), 0o755);
    let archives: Vec<_> = fs_err::read_dir(output.join(".kpack"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(
        archives.len(),
        12,
        "six processors' archives, their signatures"
    );
    for archive in &archives {
        assert_eq!(mode(archive), 0o644, "{}", archive.display());
    }
    let lib = output.join("usr/lib/x86_64-linux-gnu/librocrand.so.1.1");
    assert_eq!(mode(&lib), mode(&library));
    assert_eq!(
        mode(&output.join("usr/share/doc/librocrand1/run.sh")),
        0o750
    );
}

/// An unencrypted key made by the stock tool (`minisign -G -W`, which
/// leaves the key's checksum zero), for `--sign`.
fn signing_key(dir: &Path) -> std::path::PathBuf {
    let (public, secret) = (dir.join("key.pub"), dir.join("key.sec"));
    let out = kpack_test_support::tool("minisign")
        .args(["-G", "-W", "-f", "-p"])
        .arg(&public)
        .arg("-s")
        .arg(&secret)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    secret
}

#[test]
fn refuses_an_existing_output() {
    let work = tempfile::tempdir().unwrap();
    let input = work.path().join("in");
    fs_err::create_dir_all(&input).unwrap();
    fs_err::create_dir_all(work.path().join("out")).unwrap();
    let error =
        split_tree_with(&input, &work.path().join("out"), &TreeOptions::new("rocm")).unwrap_err();
    let dir = work.path().display().to_string();
    insta::assert_snapshot!(kpack_test_support::error_chain(&error, &[(&dir, "<DIR>")]));
}

/// Builds a tree with a fat binary that cannot be split (a wrapper points
/// into the middle of its bundle).
fn write_bad_binary(dir: &Path) {
    let bundle = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1100", &[7u8; 64])]);
    FatLibrary::new(bundle)
        .aligned(4096)
        .pointer("b + 8")
        .compile(&dir.join("libbad.so"));
}

#[test]
fn a_wrapper_into_the_middle_of_a_bundle_fails_the_whole_split() {
    let context = TestContext::new();
    let work = &context.dir;
    let input = work.path().join("in");
    fs_err::create_dir_all(input.join("lib")).unwrap();
    fs_err::write(input.join("README"), b"docs").unwrap();
    write_bad_binary(&input.join("lib"));
    let output = work.path().join("out");
    let mut split = kpack_pack();
    split.arg("split").arg(&input).arg("-o").arg(&output);
    // Where the linker put the section and the wrapper is its own affair.
    insta::assert_snapshot!(mask_addresses(&context.run(&mut split)));
    assert!(!output.exists());
    // No staging directory is left beside it either.
    let leftovers: Vec<_> = fs_err::read_dir(work.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
}

#[test]
fn an_unreadable_file_fails_the_split_naming_it() {
    let context = TestContext::new();
    let work = &context.dir;
    let input = work.path().join("in");
    fs_err::create_dir_all(input.join("share")).unwrap();
    fs_err::write(input.join("share/secret"), b"no").unwrap();
    fs_err::write(input.join("share/open"), b"yes").unwrap();
    fs_err::set_permissions(
        input.join("share/secret"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    let output = work.path().join("out");
    // Root reads everything: run as an unprivileged user then.
    // SAFETY: geteuid takes nothing and cannot fail.
    let mut command = if unsafe { libc_geteuid() } == 0 {
        fs_err::set_permissions(work.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut c = kpack_test_support::tool("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_kpack-pack"));
        c
    } else {
        kpack_pack()
    };
    command.arg("split").arg(&input).arg("-o").arg(&output);
    insta::assert_snapshot!(context.run(&mut command));
    assert!(!output.exists());
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// `text` with every hexadecimal address (`0x4008`) masked as `<ADDR>`.
fn mask_addresses(text: &str) -> String {
    kpack_test_support::mask_run(text, "0x", "<ADDR>", |c| c.is_ascii_hexdigit())
}

#[test]
fn a_compressed_bundle_with_code_objects_out_of_order_fails_the_split_cleanly() {
    let context = TestContext::new();
    let input = context.dir.path().join("in");
    fs_err::create_dir_all(input.join("lib")).unwrap();
    FatLibrary::new(kpack_binary::bundle::build::out_of_order_ccob())
        .aligned(4096)
        .compile(&input.join("lib/libccob.so"));
    let output = context.dir.path().join("out");
    let result = kpack_pack()
        .arg("split")
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success(), "{stderr}");
    assert!(
        stderr.contains("offset 0: compressed bundle code object 1 starts at"),
        "{stderr}"
    );
    assert!(stderr.contains("libccob.so"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!output.exists());
}

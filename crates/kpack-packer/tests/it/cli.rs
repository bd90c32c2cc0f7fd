//! `kpack-pack` as a user runs it.

use crate::common::*;

/// What `kpack-pack inspect --json` reports of `archive`.
fn inspect_json(archive: &std::path::Path) -> serde_json::Value {
    let json = run(kpack_pack().args(["inspect", "--json"]).arg(archive));
    serde_json::from_str(&json).unwrap()
}

#[test]
fn split_then_inspect_rocrand() {
    let context = TestContext::new();
    let library = unpack_rocrand(&context.path().join("deb"));
    let out = context.path().join("out");
    let mut split = context.kpack_pack(&["split"]);
    split
        .arg(&library)
        .args(["-o", "out", "--group", "rocrand"]);
    insta::assert_snapshot!("split_as_rocrand", context.run(&mut split));
    assert!(out.join("librocrand.so.1.1").exists());
    let mode = |p: &std::path::Path| {
        use std::os::unix::fs::PermissionsExt;
        fs_err::metadata(p).unwrap().permissions().mode()
    };
    assert_eq!(mode(&out.join("librocrand.so.1.1")), mode(&library));
    for processor in ["gfx1030", "gfx803", "gfx900", "gfx906", "gfx908", "gfx90a"] {
        assert!(
            out.join(format!(".kpack/rocrand_{processor}.kpack"))
                .exists(),
            "{processor}"
        );
    }

    let inspect = &mut context.kpack_pack(&["inspect", "out/.kpack/rocrand_gfx90a.kpack"]);
    insta::assert_snapshot!("inspect_rocrand_gfx90a", context.run(inspect));
    let report = inspect_json(&out.join(".kpack/rocrand_gfx90a.kpack"));
    assert_eq!(report["group"], "rocrand");
    assert_eq!(report["scheme"], "zstd-per-kernel");
    assert_eq!(
        report["binaries"][0]["code_objects"][1]["target"],
        "gfx90a:xnack-"
    );
    assert_eq!(report["schema"], 1);
    assert_eq!(report["grouping"], "processor");
    assert_eq!(
        report["binaries"][0]["code_objects"][1]["decoded_size"],
        1716776
    );
}

#[test]
fn refuses_a_file_without_device_code_and_writes_nothing() {
    let context = TestContext::new();
    let fake = context.path().join("libfake.so");
    fs_err::write(&fake, b"this is not an ELF file").unwrap();
    let out = context.path().join("out");
    let mut split = kpack_pack();
    split.arg("split").arg(&fake).arg("-o").arg(&out);
    insta::assert_snapshot!(context.run(&mut split));
    assert!(!out.exists());
}

#[test]
fn inspect_names_a_corrupt_archive() {
    let context = TestContext::new();
    let bad = context.path().join("bad.kpack");
    fs_err::write(&bad, b"KPAK\x01\0\0\0\xff\xff\xff\xff\0\0\0\0").unwrap();
    insta::assert_snapshot!(context.run(kpack_pack().arg("inspect").arg(&bad)));
}

#[test]
fn signs_archives_for_the_stock_minisign_tool() {
    let work = tempfile::tempdir().unwrap();
    let library = unpack_rocrand(&work.path().join("deb"));
    let (public, secret) = (work.path().join("key.pub"), work.path().join("key.sec"));
    // A password-protected key made by the stock tool (password on stdin).
    let mut keygen = kpack_test_support::tool("minisign")
        .args(["-G", "-f", "-p"])
        .arg(&public)
        .arg("-s")
        .arg(&secret)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        keygen
            .stdin
            .take()
            .unwrap()
            .write_all(b"correct horse\ncorrect horse\n")
            .unwrap();
    }
    assert!(keygen.wait().unwrap().success());
    let out = work.path().join("out");
    // Without the password the key cannot be used, and nothing is written.
    let locked = kpack_pack()
        .arg("split")
        .arg(&library)
        .arg("-o")
        .arg(&out)
        .arg("--sign")
        .arg(&secret)
        .env_remove("KPACK_SIGN_PASSWORD")
        .output()
        .unwrap();
    assert_eq!(locked.status.code(), Some(1));
    assert!(!out.exists());
    let stdout = run(kpack_pack()
        .arg("split")
        .arg(&library)
        .arg("-o")
        .arg(&out)
        .arg("--sign")
        .arg(&secret)
        .env("KPACK_SIGN_PASSWORD", "correct horse"));
    assert_eq!(stdout.matches("signed ").count(), 6, "{stdout}");
    let archive = out.join(".kpack/rocm_gfx1030.kpack");
    for entry in fs_err::read_dir(out.join(".kpack")).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "kpack") {
            let verified = run(kpack_test_support::tool("minisign")
                .arg("-Vm")
                .arg(&path)
                .arg("-p")
                .arg(&public));
            assert!(verified.contains("file:"), "{verified}");
        }
    }
    // A flipped byte no longer verifies.
    let mut bytes = fs_err::read(&archive).unwrap();
    bytes[100] ^= 1;
    fs_err::write(&archive, bytes).unwrap();
    let tampered = kpack_test_support::tool("minisign")
        .arg("-Vm")
        .arg(&archive)
        .arg("-p")
        .arg(&public)
        .output()
        .unwrap();
    assert!(!tampered.status.success());
}

#[test]
fn a_bad_signing_key_fails_before_writing_anything() {
    let context = TestContext::new();
    let work = &context.dir;
    let library = unpack_rocrand(&work.path().join("deb"));
    let key = work.path().join("not-a-key");
    fs_err::write(&key, "hello").unwrap();
    let out = work.path().join("out");
    let mut split = kpack_pack();
    split.arg("split").arg(&library).arg("-o").arg(&out);
    insta::assert_snapshot!(context.run(split.arg("--sign").arg(&key)));
    assert!(!out.exists());
}

#[test]
fn family_archives_are_named_in_the_marker() {
    let context = TestContext::new();
    let work = &context.dir;
    let library = unpack_rocrand(&work.path().join("deb"));
    let out = work.path().join("out");
    run(kpack_pack()
        .arg("split")
        .arg(&library)
        .arg("-o")
        .arg(&out)
        .args(["--group-by", "family"]));
    let mut names: Vec<String> = fs_err::read_dir(out.join(".kpack"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "rocm_gfx103X-all.kpack",
            "rocm_gfx803.kpack",
            "rocm_gfx900-dgpu.kpack",
            "rocm_gfx906-dgpu.kpack",
            "rocm_gfx908-dcgpu.kpack",
            "rocm_gfx90a-dcgpu.kpack"
        ]
    );
    let report = inspect_json(&out.join(".kpack/rocm_gfx103X-all.kpack"));
    assert_eq!(report["family"], "gfx103X-all");
    // The marker names every family archive, so each target resolves.
    let verified = context.run(kpack_pack().arg("verify").arg(&out));
    insta::assert_snapshot!(verified);
}

#[test]
fn archive_bytes_do_not_depend_on_the_thread_count() {
    let work = tempfile::tempdir().unwrap();
    let library = unpack_rocrand(&work.path().join("deb"));
    let split = |threads: &str| {
        let out = work.path().join(format!("out{threads}"));
        run(kpack_pack()
            .arg("split")
            .arg(&library)
            .arg("-o")
            .arg(&out)
            .env("RAYON_NUM_THREADS", threads));
        out
    };
    let (one, two) = (split("1"), split("2"));
    for name in ["rocm_gfx90a.kpack", "rocm_gfx1030.kpack"] {
        assert_eq!(
            fs_err::read(one.join(".kpack").join(name)).unwrap(),
            fs_err::read(two.join(".kpack").join(name)).unwrap(),
            "{name}"
        );
    }
    assert_eq!(
        fs_err::read(one.join("librocrand.so.1.1")).unwrap(),
        fs_err::read(two.join("librocrand.so.1.1")).unwrap()
    );
}

/// A shared library whose `.hip_fatbin` holds exactly `bundle` (no
/// padding), with one wrapper pointing at it.
fn fat_library(dir: &std::path::Path, bundle: &[u8]) -> std::path::PathBuf {
    let library = dir.join("libfat.so");
    FatLibrary::new(bundle.to_vec()).compile(&library);
    library
}

/// `kpack-pack split` of `library` in `context`, which must write nothing;
/// its transcript.
fn split_fails(context: &TestContext, library: &std::path::Path) -> String {
    let out = context.path().join("out");
    let text = context.run(kpack_pack().arg("split").arg(library).arg("-o").arg(&out));
    assert!(!out.exists(), "partial output left in {}", out.display());
    text
}

#[test]
fn a_truncated_compressed_bundle_is_reported_with_the_file() {
    use kpack_binary::bundle::build::{ccob, offload_bundle};
    use kpack_binary::bundle::CcobMethod;
    let context = TestContext::new();
    let inner = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx942", &[5u8; 3000])]);
    let whole = ccob(&inner, 3, CcobMethod::Zstd);
    let library = fat_library(context.path(), &whole[..whole.len() - 7]);
    // The cause is printed once, as a cause, not also inside the message.
    insta::assert_snapshot!(split_fails(&context, &library));
}

#[test]
fn a_bundle_entry_past_the_section_is_reported_with_the_file() {
    use kpack_binary::bundle::build::offload_bundle;
    let context = TestContext::new();
    let whole = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1100", &[9u8; 500])]);
    let library = fat_library(context.path(), &whole[..whole.len() - 100]);
    insta::assert_snapshot!(split_fails(&context, &library));
}

#[test]
fn verify_against_the_original_compares_every_loaded_code_object_byte_for_byte() {
    let context = TestContext::new();
    let work = &context.dir;
    let library = unpack_rocrand(&work.path().join("deb"));
    let out = work.path().join("out");
    run(kpack_pack().arg("split").arg(&library).arg("-o").arg(&out));
    let mut verify = kpack_pack();
    verify.arg("verify").arg(&out).arg("--original");
    insta::assert_snapshot!("verify_original", context.run(verify.arg(&library)));

    // One byte changed in the middle of the original's device code: the
    // code object holding it no longer matches what the archives serve.
    let mut tampered = fs_err::read(&library).unwrap();
    let fatbin = {
        use object::{Object, ObjectSection};
        let file = object::File::parse(&*tampered).unwrap();
        let section = file.section_by_name(".hip_fatbin").unwrap();
        section.file_range().unwrap()
    };
    let middle = (fatbin.0 + fatbin.1 / 2) as usize;
    tampered[middle] ^= 0xff;
    let other = work.path().join("tampered.so");
    fs_err::write(&other, &tampered).unwrap();
    let mut verify = kpack_pack();
    verify.arg("verify").arg(&out).arg("--original");
    insta::assert_snapshot!("verify_tampered_original", context.run(verify.arg(&other)));

    let mut verify = kpack_pack();
    verify.arg("verify").arg(&out).arg("--original");
    let host = out.join("librocrand.so.1.1");
    insta::assert_snapshot!("verify_original_not_fat", context.run(verify.arg(&host)));
}

/// Writes, as ROCm's reference splitter does for a target without code, an
/// archive at `path` that lists `arch` and holds nothing.
fn empty_archive(path: &std::path::Path, arch: &str) {
    use rocm_kpack::{ArchiveOptions, ArchiveWriter, Compression, Target};
    let options = ArchiveOptions {
        group: "fat".into(),
        family: arch.into(),
        arches: vec![Target::parse(arch).unwrap()],
        compression: Compression::DEFAULT,
    };
    let file = fs_err::File::create(path).unwrap();
    ArchiveWriter::new(file, options).unwrap().finish().unwrap();
}

#[test]
fn a_bundle_with_only_the_host_entry_writes_no_archive() {
    use kpack_binary::bundle::build::offload_bundle;
    let context = TestContext::new();
    let whole = offload_bundle(&[("host-x86_64-unknown-linux-gnu-", &[])]);
    let library = fat_library(context.path(), &whole);
    let mut split = context.kpack_pack(&["split", "libfat.so", "-o", "out", "--group", "fat"]);
    insta::assert_snapshot!(context.run(&mut split));
    let kpack = context.path().join("out/.kpack");
    let archives: Vec<_> = match fs_err::read_dir(&kpack) {
        Ok(entries) => entries.map(|e| e.unwrap().file_name()).collect(),
        Err(_) => Vec::new(),
    };
    assert_eq!(archives, Vec::<std::ffi::OsString>::new());
    drop(library);
}

#[test]
fn inspect_and_verify_flag_an_archive_without_code_objects() {
    use kpack_binary::bundle::build::offload_bundle;
    let context = TestContext::new();
    let whole = offload_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx1100", &[9u8; 500])]);
    fat_library(context.path(), &whole);
    run(&mut context.kpack_pack(&["split", "libfat.so", "-o", "out", "--group", "fat"]));
    empty_archive(
        &context.path().join("out/.kpack/fat_gfx90a.kpack"),
        "gfx90a:xnack-",
    );

    let mut inspect = context.kpack_pack(&["inspect", "out/.kpack/fat_gfx90a.kpack"]);
    insta::assert_snapshot!("inspect_empty", context.run(&mut inspect));
    let mut inspect = context.kpack_pack(&["inspect", "--json", "out/.kpack/fat_gfx90a.kpack"]);
    let output = inspect.output().unwrap();
    assert_eq!(output.status.code(), Some(3));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["empty"], true);
    let mut verify = context.kpack_pack(&["verify", "out"]);
    insta::assert_snapshot!("verify_empty", context.run(&mut verify));
    // The archive with code is not flagged.
    let mut inspect = context.kpack_pack(&["inspect", "out/.kpack/fat_gfx1100.kpack"]);
    assert_eq!(inspect.output().unwrap().status.code(), Some(0));
}

/// A fat library in `dir` named `name` with one bundle holding `code` (by
/// target).
fn fat_library_of(dir: &std::path::Path, name: &str, code: &[(&str, u8)]) -> std::path::PathBuf {
    use kpack_binary::bundle::build::offload_bundle;
    let triples: Vec<(String, Vec<u8>)> = code
        .iter()
        .map(|(target, byte)| {
            (
                format!("hipv4-amdgcn-amd-amdhsa--{target}"),
                vec![*byte; 700],
            )
        })
        .collect();
    let entries: Vec<(&str, &[u8])> = triples.iter().map(|(t, b)| (t.as_str(), &b[..])).collect();
    let library = dir.join(name);
    FatLibrary::new(offload_bundle(&entries)).compile(&library);
    library
}

#[test]
fn verify_of_one_file_names_modified_and_missing_code_objects() {
    let context = TestContext::new();
    fs_err::create_dir_all(context.path().join("original")).unwrap();
    fat_library_of(
        context.path(),
        "libfat.so",
        &[("gfx1100", 1), ("gfx1030", 2)],
    );
    // The original: gfx1100's code differs, gfx90a's was never split.
    let original = context.path().join("original");
    fat_library_of(
        &original,
        "libfat.so",
        &[("gfx1100", 9), ("gfx1030", 2), ("gfx90a", 3)],
    );
    run(&mut context.kpack_pack(&["split", "libfat.so", "-o", "out", "--group", "fat"]));

    let mut verify = context.kpack_pack(&[
        "verify",
        "out/libfat.so",
        "--original",
        "original/libfat.so",
    ]);
    insta::assert_snapshot!("verify_one_file_modified_missing", context.run(&mut verify));
    // The same with the original's directory, and quietly: the problems only.
    let mut verify =
        context.kpack_pack(&["verify", "-q", "out/libfat.so", "--original", "original"]);
    insta::assert_snapshot!("verify_one_file_quiet", context.run(&mut verify));
    let mut verify = context.kpack_pack(&[
        "verify",
        "--json",
        "out/libfat.so",
        "--original",
        "original/libfat.so",
    ]);
    insta::assert_snapshot!("verify_one_file_json", context.run(&mut verify));
    // Against its own original, the one file verifies; -v shows each load.
    let mut verify =
        context.kpack_pack(&["verify", "-v", "out/libfat.so", "--original", "libfat.so"]);
    insta::assert_snapshot!("verify_one_file_verbose", context.run(&mut verify));
}

#[test]
fn inspect_json_carries_its_schema_and_decoded_sizes() {
    let context = TestContext::new();
    fat_library_of(
        context.path(),
        "libfat.so",
        &[("gfx90a:xnack-", 1), ("gfx1030", 2)],
    );
    run(&mut context.kpack_pack(&["split", "libfat.so", "-o", "out", "--group", "fat"]));
    let mut inspect = context.kpack_pack(&["inspect", "out/.kpack/fat_gfx90a.kpack"]);
    insta::assert_snapshot!("inspect_text", context.run(&mut inspect));
    let mut inspect = context.kpack_pack(&["inspect", "--json", "out/.kpack/fat_gfx90a.kpack"]);
    insta::assert_snapshot!("inspect_json", context.run(&mut inspect));
}

//! Real wheels from PyPI that nobody here wrote (fetched by `./test.sh`
//! into the download cache): onnxruntime-rocm, whose RECORD has no hashes
//! and whose 513 MB provider library holds 760 code objects; torch-scatter-
//! rocm, TheRock-built for 29 targets (gfx1152, gfx1153, gfx1250, gfx1251
//! among them); amd-aiter, whose device code is 2,613 loose code objects
//! routed by content with their companions. Each splits, real pip installs
//! the host and two GPUs' device wheels, and what the loader or the
//! installed tree then holds is the original, byte for byte.
//!
//! The test process holds no wheel's content: the split binaries are
//! compared with their originals by `kpack-pack verify --original` (a
//! child, one binary at a time) and trees by digest, so the processes the
//! memory tests watch, spawned from it meanwhile, start small.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::wheel::{check_wheels, check_wheels_with, python};
use kpack_test_support::download;

const ONNXRUNTIME: &str = "onnxruntime_rocm-1.22.2.post3-cp312-cp312-manylinux_2_34_x86_64.whl";
const TORCH_SCATTER: &str = "torch_scatter_rocm-2.1.2.post7-cp311-cp311-manylinux_2_32_x86_64.whl";
const AITER: &str = "amd_aiter-0.1.7.post2.dev18-py3-none-any.whl";

/// Splits `wheel` into `out`; its stdout.
fn split(wheel: &Path, out: &Path) -> String {
    run(kpack_pack()
        .args(["wheel", "split"])
        .arg(wheel)
        .arg("-o")
        .arg(out))
}

/// The wheel in `dir` whose file name starts with `prefix`.
fn wheel_named(dir: &Path, prefix: &str) -> PathBuf {
    let found: Vec<PathBuf> = fs_err::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    assert_eq!(found.len(), 1, "{prefix}*: {found:?}");
    found.into_iter().next().unwrap()
}

/// `pip install --no-deps --no-index --target DIR` of `wheels` with pip's
/// flags for the wheels' Python and platform (a cp312 wheel installs with
/// this machine's Python 3.11 so), then `pip check` of the result, which
/// may find only the requirements of `third_party` (the input's own
/// dependencies, not installed here) missing.
fn pip_install_into(
    dir: &Path,
    wheels: &[PathBuf],
    (python_version, platform): (&str, &str),
    third_party: &[&str],
) {
    let pip = |args: &[&str]| {
        let mut command = python();
        command
            .args(["-m", "pip", "--disable-pip-version-check"])
            .args(args);
        command
    };
    run(pip(&[
        "install",
        "--no-deps",
        "--no-index",
        "--no-compile",
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--platform",
        platform,
        "--target",
    ])
    .arg(dir)
    .args(wheels));
    let checked = pip(&["check"]).env("PYTHONPATH", dir).output().unwrap();
    let stdout = String::from_utf8_lossy(&checked.stdout);
    let missing: Vec<&str> = stdout
        .lines()
        .filter_map(|line| line.split(" requires ").nth(1)?.split(',').next())
        .collect();
    if third_party.is_empty() {
        assert!(stdout.contains("No broken requirements found"), "{stdout}");
    } else {
        assert_eq!(missing, third_party, "{stdout}");
        assert_eq!(stdout.lines().count(), third_party.len(), "{stdout}");
    }
}

/// `kpack-pack verify --target T... --original ORIGINALS` of the installed
/// packages at `site`: the code objects it loaded, every one byte-equal to
/// the original's bundle (`originals` holds each fat binary at its path).
fn verify_installed(site: &Path, targets: &[&str], originals: &Path) -> usize {
    let mut command = kpack_pack();
    command
        .arg("verify")
        .arg(site)
        .arg("--original")
        .arg(originals);
    for target in targets {
        command.args(["--target", target]);
    }
    let out = run(&mut command);
    let mut lines = out.lines().rev();
    let equal = lines.next().unwrap_or_default();
    let summary = lines.next().unwrap_or_default();
    let loaded: usize = summary
        .split(": ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {summary:?}"));
    assert!(summary.ends_with(", 0 problems"), "{out}");
    assert_eq!(
        equal,
        format!("{loaded} code objects byte-equal to the original's"),
        "{out}"
    );
    loaded
}

/// Extracts the members of `wheel` that `wanted` picks into `dir`, at
/// their paths, each streamed to its file.
fn extract(wheel: &Path, dir: &Path, wanted: impl Fn(&str) -> bool) {
    let mut archive = zip::ZipArchive::new(fs_err::File::open(wheel).unwrap()).unwrap();
    for index in 0..archive.len() {
        let mut member = archive.by_index(index).unwrap();
        let name = member.name().unwrap().into_owned();
        if member.is_dir() || !wanted(&name) {
            continue;
        }
        let path = dir.join(&name);
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        std::io::copy(&mut member, &mut fs_err::File::create(&path).unwrap()).unwrap();
    }
}

/// The processors whose archives `site`'s `.kpack/` directories hold.
fn installed_archives(site: &Path, package: &str) -> Vec<String> {
    let mut names: Vec<String> = fs_err::read_dir(site.join(package).join(".kpack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A file's content, as far as the tests compare it: its SHA-256, and
/// whether it is an AMDGPU code object.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Content {
    sha256: [u8; 32],
    code_object: bool,
}

fn content(mut reader: impl Read) -> Content {
    let mut head = [0u8; 20];
    let mut read = 0;
    while read < head.len() {
        match reader.read(&mut head[read..]).unwrap() {
            0 => break,
            n => read += n,
        }
    }
    let mut hashing = kpack_hash::HashingWriter::new(std::io::sink());
    std::io::Write::write_all(&mut hashing, &head[..read]).unwrap();
    std::io::copy(&mut reader, &mut hashing).unwrap();
    Content {
        sha256: *hashing.finish().0.as_bytes(),
        code_object: is_code_object(&head[..read]),
    }
}

/// Every file of `wheel` but its `.dist-info`, by path.
fn members(wheel: &Path) -> BTreeMap<String, Content> {
    let mut archive = zip::ZipArchive::new(fs_err::File::open(wheel).unwrap()).unwrap();
    let mut found = BTreeMap::new();
    for index in 0..archive.len() {
        let member = archive.by_index(index).unwrap();
        let name = member.name().unwrap().into_owned();
        if member.is_dir() || name.split('/').next().unwrap().ends_with(".dist-info") {
            continue;
        }
        found.insert(name, content(member));
    }
    found
}

/// Every regular file under `root` but the `.dist-info` directories and
/// `bin/`, by path relative to it.
fn installed(root: &Path) -> BTreeMap<String, Content> {
    let mut found = BTreeMap::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in fs_err::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let top = relative.split('/').next().unwrap();
            if top.ends_with(".dist-info") || top == "bin" {
                continue;
            }
            if path.is_dir() {
                pending.push(path);
            } else {
                found.insert(relative, content(fs_err::File::open(&path).unwrap()));
            }
        }
    }
    found
}

/// Whether `bytes` start like an AMDGPU code object (ELF, e_machine 224).
fn is_code_object(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF") && bytes.get(18..20) == Some(&224u16.to_le_bytes()[..])
}

#[test]
fn onnxruntime_rocm_splits_despite_its_hashless_record_and_installs_for_two_gpus() {
    let wheel = download(ONNXRUNTIME);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let stdout = split(&wheel, &out);
    let notes = stdout
        .lines()
        .filter(|l| l.ends_with(": listed in RECORD without a hash"))
        .count();
    let archive = zip::ZipArchive::new(fs_err::File::open(&wheel).unwrap()).unwrap();
    let files = archive
        .file_names()
        .filter(|n| n.as_ref().is_ok_and(|n| !n.ends_with('/')))
        .count();
    assert_eq!(notes, files - 1, "every member but RECORD");
    check_wheels(&out);

    let site = work.path().join("site");
    let wheels = [
        wheel_named(&out, "onnxruntime_rocm-"),
        wheel_named(&out, "onnxruntime_rocm_device_gfx1100-"),
        wheel_named(&out, "onnxruntime_rocm_device_gfx942-"),
    ];
    pip_install_into(&site, &wheels, ("3.12", "manylinux_2_34_x86_64"), &[]);
    assert_eq!(
        installed_archives(&site, "onnxruntime"),
        ["rocm_gfx1100.kpack", "rocm_gfx942.kpack"]
    );
    let originals = work.path().join("originals");
    extract(&wheel, &originals, |name| {
        name.ends_with("providers_rocm.so")
    });
    // 95 bundles, each with code for both GPUs.
    assert_eq!(
        verify_installed(&site, &["gfx1100", "gfx942"], &originals),
        2 * 95
    );
}

#[test]
fn torch_scatter_rocm_for_new_gpus_installs_in_a_venv_with_pip() {
    let wheel = download(TORCH_SCATTER);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    split(&wheel, &out);
    let checked_wheels = check_wheels(&out);
    assert_eq!(checked_wheels.len(), 1 + 29, "{:?}", checked_wheels.keys());

    let venv = work.path().join("venv");
    run(python().args(["-m", "venv", "--without-pip"]).arg(&venv));
    let venv_python = venv.join("bin/python");
    let pip = |args: &[&str]| {
        let mut command = python();
        command
            .args(["-m", "pip", "--disable-pip-version-check", "--python"])
            .arg(&venv_python)
            .args(args);
        command
    };
    run(pip(&["install", "--no-deps", "--no-index"])
        .arg(wheel_named(&out, "torch_scatter_rocm-"))
        .arg(wheel_named(&out, "torch_scatter_rocm_device_gfx1250-"))
        .arg(wheel_named(&out, "torch_scatter_rocm_device_gfx1152-")));
    let checked = run(&mut pip(&["check"]));
    assert!(
        checked.contains("No broken requirements found"),
        "{checked}"
    );
    let site = PathBuf::from(
        run(Command::new(&venv_python).args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['platlib'])",
        ]))
        .trim(),
    );
    assert_eq!(
        installed_archives(&site, "torch_scatter"),
        ["rocm_gfx1152.kpack", "rocm_gfx1250.kpack"]
    );
    let originals = work.path().join("originals");
    extract(&wheel, &originals, |name| name.ends_with("_cuda.so"));
    // Three libraries of one bundle each, with code for both GPUs.
    assert_eq!(
        verify_installed(&site, &["gfx1250", "gfx1152"], &originals),
        3 * 2
    );

    // Without the device wheels, verify meets split binaries whose code it
    // cannot find, and fails rather than pass having checked nothing.
    run(&mut pip(&[
        "uninstall",
        "-y",
        "torch-scatter-rocm-device-gfx1250",
        "torch-scatter-rocm-device-gfx1152",
    ]));
    let result = kpack_pack().arg("verify").arg(&site).output().unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("3 split binaries, but no code object was checked"),
        "{stderr}"
    );
}

/// What the aiter wheel holds for gfx950 alone, by the layout it ships
/// (not by the packer's rule): everything under a `gfx950/` directory and
/// the Triton ahead-of-time kernels (`.hsaco`) with their `.json`.
fn aiter_gfx950(path: &str) -> bool {
    let aot = path.starts_with("aiter/ops/triton/configs/gemm/aot/")
        && (path.ends_with(".hsaco") || path.ends_with(".json"));
    path.split('/').any(|part| part == "gfx950") || aot
}

#[test]
fn amd_aiter_s_loose_code_objects_install_per_gpu_at_their_paths() {
    let wheel = download(AITER);
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    split(&wheel, &out);
    // Its METADATA has a License-File in version 2.2, which `packaging`
    // refuses to validate; the RECORDs are checked all the same.
    check_wheels_with(&out, &["--unvalidated"]);
    let original = members(&wheel);
    let host = members(&wheel_named(&out, "amd_aiter-"));
    let left: Vec<&String> = host
        .iter()
        .filter(|(_, content)| content.code_object)
        .map(|(name, _)| name)
        .collect();
    assert!(
        left.is_empty(),
        "code objects left in the host wheel: {left:?}"
    );

    let gfx950 = members(&wheel_named(&out, "amd_aiter_device_gfx950-"));
    let hsaco: Vec<&String> = gfx950.keys().filter(|n| n.ends_with(".hsaco")).collect();
    assert_eq!(hsaco.len(), 112);
    for kernel in hsaco {
        let json = format!("{}.json", kernel.trim_end_matches(".hsaco"));
        assert!(gfx950.contains_key(&json), "{json} beside {kernel}");
    }

    for (gpu, other) in [("gfx942", "gfx950"), ("gfx950", "gfx942")] {
        let site = work.path().join(format!("site-{gpu}"));
        let wheels = [
            wheel_named(&out, "amd_aiter-"),
            wheel_named(&out, &format!("amd_aiter_device_{gpu}-")),
        ];
        // Its own dependencies, from PyPI, are not installed here.
        let third_party = ["einops", "pandas", "psutil", "pybind11"];
        pip_install_into(
            &site,
            &wheels,
            ("3.12", "manylinux_2_34_x86_64"),
            &third_party,
        );
        let expected: BTreeMap<&String, &Content> = original
            .iter()
            .filter(|(name, _)| {
                let is_950 = aiter_gfx950(name);
                let is_other = name.split('/').any(|part| part == other);
                if gpu == "gfx942" {
                    !is_950
                } else {
                    !is_other
                }
            })
            .collect();
        let got = installed(&site);
        let got: BTreeMap<&String, &Content> = got.iter().collect();
        let missing: Vec<_> = expected.keys().filter(|n| !got.contains_key(*n)).collect();
        let extra: Vec<_> = got.keys().filter(|n| !expected.contains_key(*n)).collect();
        assert!(missing.is_empty(), "{gpu}: missing {missing:?}");
        assert!(extra.is_empty(), "{gpu}: not its own {extra:?}");
        let changed: Vec<_> = expected
            .iter()
            .filter(|(name, bytes)| got[*name] != **bytes)
            .map(|(name, _)| name)
            .collect();
        assert!(changed.is_empty(), "{gpu}: changed {changed:?}");
    }
}

//! Splitting wheels: the real jax ROCm plugin wheel becomes a host wheel
//! and one device wheel per processor its bundles hold code for; pip
//! installs them, the split libraries' markers resolve through the
//! runtime's loader to the original code objects, and bad wheels are
//! refused with nothing written.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;
use crate::wheel_deflate::assert_deflated_in_blocks;
use kpack_binary::bundle::build::offload_bundle;
use kpack_binary::elf::{MARKER_SECTION, WRAPPER_SECTION};
use kpack_binary::image::FatImage;
use kpack_binary::wrapper::{HIPK_MAGIC, WRAPPER_SIZE};
use object::{Object, ObjectSection};
use rocm_kpack::{Archive, Loader, LoaderConfig, Marker, Target};
use serde_json::Value;

pub(crate) const JAX: &str = "jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl";
const MAKE_WHEEL: &str = include_str!("../data/make_wheel.py");
const CHECK_WHEELS: &str = include_str!("../data/check_wheels.py");

pub(crate) fn jax_wheel() -> PathBuf {
    fixtures().join("pypi").join(JAX)
}

pub(crate) fn split(input: &Path, output: &Path) -> Output {
    kpack_pack()
        .args(["wheel", "split"])
        .arg(input)
        .arg("-o")
        .arg(output)
        .output()
        .unwrap()
}

pub(crate) fn split_ok(input: &Path, output: &Path) -> String {
    let out = split(input, output);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Code objects of the original bundles: member -> bundle -> target -> bytes.
pub(crate) type Bundles = BTreeMap<String, Vec<BTreeMap<Target, Vec<u8>>>>;

/// The code objects of every fat binary in `wheel`, read with the
/// packer's bundle reader straight from the zip.
pub(crate) fn original_bundles(wheel: &Path) -> Bundles {
    let mut archive = zip::ZipArchive::new(fs_err::File::open(wheel).unwrap()).unwrap();
    let mut found = Bundles::new();
    for index in 0..archive.len() {
        let mut member = archive.by_index(index).unwrap();
        let mut data = Vec::new();
        member.read_to_end(&mut data).unwrap();
        if FatImage::parse(&data).ok().flatten().is_none() {
            continue;
        }
        let bundles = code_by_bundle(&data);
        found.insert(member.name().unwrap().into_owned(), bundles);
    }
    found
}

fn processors(bundles: &Bundles) -> BTreeSet<String> {
    bundles
        .values()
        .flatten()
        .flat_map(|bundle| bundle.keys().map(|t| t.processor().to_owned()))
        .collect()
}

pub(crate) fn python() -> Command {
    kpack_test_support::tool("python")
}

/// What `check_wheels.py` reports for every wheel in `dir`, by file name.
pub(crate) fn check_wheels(dir: &Path) -> BTreeMap<String, Value> {
    check_wheels_with(dir, &[])
}

/// As [`check_wheels`], with `check_wheels.py`'s `flags`.
pub(crate) fn check_wheels_with(dir: &Path, flags: &[&str]) -> BTreeMap<String, Value> {
    let mut wheels: Vec<PathBuf> = fs_err::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "whl"))
        .collect();
    wheels.sort();
    let out = run(python()
        .arg("-c")
        .arg(CHECK_WHEELS)
        .args(flags)
        .args(&wheels));
    serde_json::from_str(&out).unwrap()
}

pub(crate) fn file_names(dir: &Path) -> BTreeSet<String> {
    match fs_err::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => BTreeSet::new(),
    }
}

fn device_wheel(processor: &str) -> String {
    format!("jax_rocm7_plugin_device_{processor}-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl")
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_jax_wheel_splits_into_a_host_wheel_and_one_device_wheel_per_processor() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let stdout = split_ok(&jax_wheel(), &out);
    let bundles = original_bundles(&jax_wheel());
    let processors = processors(&bundles);
    assert!(processors.len() > 1, "{processors:?}");

    let mut expected: BTreeSet<String> = processors.iter().map(|p| device_wheel(p)).collect();
    expected.insert(JAX.to_owned());
    assert_eq!(file_names(&out), expected, "{stdout}");
    let host_size = fs_err::metadata(out.join(JAX)).unwrap().len();
    let input_size = fs_err::metadata(jax_wheel()).unwrap().len();
    assert!(host_size < input_size, "{host_size} >= {input_size}");

    let wheels = check_wheels(&out);
    let host = &wheels[JAX];
    assert_eq!(host["name"], "jax-rocm7-plugin");
    let extras = strings(&host["extras"]);
    let requires = strings(&host["requires"]);
    // The original's extra and requirements stay.
    assert!(extras.contains(&"with-rocm".to_owned()), "{extras:?}");
    assert!(requires.contains(&"jax-rocm7-pjrt==0.10.2".to_owned()));
    for processor in &processors {
        let extra = format!("device-{processor}");
        assert!(extras.contains(&extra), "{extra} in {extras:?}");
        for extra in [extra.as_str(), "device-all"] {
            let requirement =
                format!("jax-rocm7-plugin-device-{processor}==0.10.2; extra == \"{extra}\"");
            assert!(requires.contains(&requirement), "{requirement}");
        }
    }
    assert!(extras.contains(&"device-all".to_owned()));
    assert_eq!(extras.len(), 1 + processors.len() + 1, "{extras:?}");

    for processor in &processors {
        let device = &wheels[&device_wheel(processor)];
        assert_eq!(
            device["name"],
            format!("jax-rocm7-plugin-device-{processor}")
        );
        assert_eq!(device["version"], "0.10.2");
        assert_eq!(strings(&device["requires"]), ["jax-rocm7-plugin==0.10.2"]);
        let dist_info = format!("jax_rocm7_plugin_device_{processor}-0.10.2.dist-info");
        assert_eq!(
            strings(&device["members"]),
            [
                format!("jax_rocm7_plugin/.kpack/rocm_{processor}.kpack"),
                format!("{dist_info}/METADATA"),
                format!("{dist_info}/WHEEL"),
                format!("{dist_info}/RECORD"),
            ]
        );
    }
}

#[test]
fn splitting_twice_gives_the_same_bytes_with_fixed_timestamps() {
    let work = tempfile::tempdir().unwrap();
    let (first, second) = (work.path().join("1"), work.path().join("2"));
    split_ok(&jax_wheel(), &first);
    split_ok(&jax_wheel(), &second);
    let names = file_names(&first);
    assert_eq!(names, file_names(&second));
    for name in &names {
        let a = fs_err::read(first.join(name)).unwrap();
        let b = fs_err::read(second.join(name)).unwrap();
        assert!(a == b, "{name} differs between two splits");
    }
    for (name, wheel) in check_wheels(&first) {
        assert_eq!(strings(&wheel["times"]), ["1980-01-01 00:00:00"], "{name}");
    }

    let dated = work.path().join("dated");
    let out = kpack_pack()
        .args(["wheel", "split"])
        .arg(jax_wheel())
        .arg("-o")
        .arg(&dated)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .output()
        .unwrap();
    assert!(out.status.success());
    for (name, wheel) in check_wheels(&dated) {
        assert_eq!(strings(&wheel["times"]), ["2023-11-14 22:13:20"], "{name}");
        for (member, mode) in wheel["modes"].as_object().unwrap() {
            let executable = member.ends_with(".so");
            let expected = if executable { "0o100755" } else { "0o100644" };
            assert_eq!(mode, expected, "{name}: {member}");
        }
    }
}

/// The marker and the bundle numbers of a split ELF file's wrappers.
fn marker_and_bundles(data: &[u8]) -> (Marker, Vec<u32>) {
    let file = object::File::parse(data).unwrap();
    let marker = Marker::parse(
        file.section_by_name(MARKER_SECTION)
            .unwrap()
            .data()
            .unwrap(),
    )
    .unwrap();
    let wrappers = file.section_by_name(WRAPPER_SECTION).unwrap();
    let bundles = wrappers
        .data()
        .unwrap()
        .chunks_exact(WRAPPER_SIZE as usize)
        .map(|w| {
            assert_eq!(u32::from_le_bytes(w[0..4].try_into().unwrap()), HIPK_MAGIC);
            u32::from_le_bytes(w[16..20].try_into().unwrap())
        })
        .collect();
    (marker, bundles)
}

/// Every split binary under `root` (keyed by its path in the wheel, below
/// `root`) resolves, through its marker and the runtime's loader, to the
/// original code object for each target of `present`'s processor; the
/// code of `absent`, whose device wheel is not installed, is not found.
/// Returns how many code objects were checked.
pub(crate) fn assert_loads_original_code(
    root: &Path,
    bundles: &Bundles,
    present: &str,
    absent: &str,
) -> usize {
    let loader = Loader::new(LoaderConfig::default());
    let mut checked = 0;
    for (member, originals) in bundles {
        let path = root.join(member);
        let data = fs_err::read(&path).unwrap();
        assert!(
            !matches!(FatImage::parse(&data), Ok(Some(_))),
            "{member} still has device code"
        );
        let (marker, numbers) = marker_and_bundles(&data);
        assert_eq!(numbers.len(), originals.len(), "{member}");
        for number in numbers {
            let original = &originals[number as usize];
            for (target, bytes) in original.iter().filter(|(t, _)| t.processor() == present) {
                let located = loader
                    .locate(&marker, &path, number, std::slice::from_ref(target))
                    .unwrap_or_else(|e| panic!("{member} bundle {number} for {target}: {e}"));
                let code = located.kernel().unwrap().bytes().unwrap();
                assert!(
                    code[..] == bytes[..],
                    "{member} bundle {number} {target}: not the original code object"
                );
                checked += 1;
            }
            let other = Target::parse(absent).unwrap();
            assert!(
                loader.locate(&marker, &path, number, &[other]).is_err(),
                "{member}: code for {absent}, whose device wheel is not installed"
            );
        }
    }
    assert!(checked > 0, "no code object checked");
    checked
}

#[test]
fn pip_installs_the_host_and_a_device_wheel_whose_code_the_loader_finds() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    split_ok(&jax_wheel(), &out);
    let bundles = original_bundles(&jax_wheel());
    assert_deflated_in_blocks(&out.join(JAX), bundles.keys());
    let processors: Vec<String> = processors(&bundles).into_iter().collect();
    let (present, absent) = (&processors[0], &processors[1]);

    let venv = work.path().join("venv");
    run(python().args(["-m", "venv", "--without-pip"]).arg(&venv));
    let venv_python = venv.join("bin/python");
    let pip = |args: &[&str], wheels: &[PathBuf]| {
        run(python()
            .args(["-m", "pip", "--disable-pip-version-check", "--python"])
            .arg(&venv_python)
            .args(args)
            .args(wheels))
    };
    pip(
        &["install", "--no-deps", "--no-index"],
        &[out.join(JAX), out.join(device_wheel(present))],
    );
    let site = PathBuf::from(
        run(Command::new(&venv_python).args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['platlib'])",
        ]))
        .trim(),
    );
    let archive = site.join(format!("jax_rocm7_plugin/.kpack/rocm_{present}.kpack"));
    assert!(archive.is_file(), "{}", archive.display());
    assert_loads_original_code(&site, &bundles, present, absent);

    let listed = pip(&["list", "--format", "freeze"], &[]);
    assert!(
        listed.contains(&format!("jax-rocm7-plugin-device-{present}==0.10.2")),
        "{listed}"
    );
    pip(
        &[
            "uninstall",
            "-y",
            &format!("jax-rocm7-plugin-device-{present}"),
        ],
        &[],
    );
    assert!(!archive.exists(), "uninstalling left {}", archive.display());
    assert!(site.join("jax_rocm7_plugin/_linalg.so").is_file());
}

#[test]
fn uv_installs_the_host_and_a_device_wheel_too() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    split_ok(&jax_wheel(), &out);
    let bundles = original_bundles(&jax_wheel());
    assert_deflated_in_blocks(&out.join(JAX), bundles.keys());
    let processor = processors(&bundles).into_iter().next_back().unwrap();
    let venv = work.path().join("venv");
    run(python().args(["-m", "venv", "--without-pip"]).arg(&venv));
    run(kpack_test_support::tool("uv")
        .args(["pip", "install", "--offline", "--no-deps", "--python"])
        .arg(venv.join("bin/python"))
        .arg(out.join(JAX))
        .arg(out.join(device_wheel(&processor)))
        .env("UV_CACHE_DIR", work.path().join("uv-cache")));
    let listed = run(kpack_test_support::tool("uv")
        .args(["pip", "list", "--format", "freeze", "--python"])
        .arg(venv.join("bin/python")));
    assert!(listed.contains("jax-rocm7-plugin==0.10.2"), "{listed}");
    assert!(
        listed.contains(&format!("jax-rocm7-plugin-device-{processor}==0.10.2")),
        "{listed}"
    );
    let found = run(Command::new(venv.join("bin/python")).args([
        "-c",
        "import importlib.util, pathlib; \
         print(pathlib.Path(importlib.util.find_spec('jax_rocm7_plugin').origin).parent)",
    ]));
    let archive = PathBuf::from(found.trim()).join(format!(".kpack/rocm_{processor}.kpack"));
    assert!(archive.is_file(), "{}", archive.display());
}

/// Runs `make_wheel.py` with `spec` (JSON); returns the wheel.
pub(crate) fn make_wheel(spec: Value) -> PathBuf {
    let out = PathBuf::from(spec["out"].as_str().unwrap());
    let mut child = python()
        .arg("-c")
        .arg(MAKE_WHEEL)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    serde_json::to_writer(child.stdin.take().unwrap(), &spec).unwrap();
    assert!(child.wait().unwrap().success());
    out
}

/// A wheel made from `files` (member, content) by `make_wheel.py`.
pub(crate) fn wheel_of(
    dir: &Path,
    file_name: &str,
    files: &[(&str, &[u8])],
    extra: Value,
) -> PathBuf {
    let sources = dir.join(format!("{file_name}.src"));
    fs_err::create_dir_all(&sources).unwrap();
    let mut listed = Vec::new();
    for (number, (member, content)) in files.iter().enumerate() {
        let suffix = if member.ends_with(".so") { ".so" } else { "" };
        let source = sources.join(format!("{number}{suffix}"));
        fs_err::write(&source, content).unwrap();
        listed.push(serde_json::json!([member, source]));
    }
    let mut spec = serde_json::json!({"out": dir.join(file_name), "files": listed});
    for (key, value) in extra.as_object().into_iter().flatten() {
        spec[key] = value.clone();
    }
    make_wheel(spec)
}

/// Splits `input` into `out`, which must leave `out` as it was (absent or
/// empty); the transcript, with the directory holding `out` masked.
pub(crate) fn writes_nothing(input: &Path, out: &Path) -> String {
    let existed = out.exists();
    let result = split(input, out);
    assert!(file_names(out).is_empty(), "{:?}", file_names(out));
    assert_eq!(out.exists(), existed, "the output directory was made");
    let dir = out.parent().unwrap().display().to_string();
    kpack_test_support::transcript(&result, &[(&dir, "<DIR>")])
}

#[test]
fn members_twice_or_leaving_the_wheel_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let twice = work.path().join("twice");
    fs_err::create_dir(&twice).unwrap();
    let source = twice.join("version.py");
    fs_err::write(&source, "x = 2").unwrap();
    let duplicated = make_wheel(serde_json::json!({
        "out": twice.join(JAX),
        "from": jax_wheel(),
        "files": [["jax_rocm7_plugin/version.py", source]],
    }));
    insta::assert_snapshot!("member_twice", writes_nothing(&duplicated, &out));

    for (evil, name) in [
        ("../evil.py", "member_in_the_parent"),
        ("/etc/evil.py", "member_at_an_absolute_path"),
        ("jax_rocm7_plugin/../../evil.py", "member_climbing_out"),
    ] {
        let dir = work.path().join(format!("evil{}", evil.len()));
        fs_err::create_dir(&dir).unwrap();
        let source = dir.join("evil.src");
        fs_err::write(&source, "print('x')").unwrap();
        let wheel = make_wheel(serde_json::json!({
            "out": dir.join(JAX),
            "from": jax_wheel(),
            "files": [[evil, source]],
        }));
        insta::assert_snapshot!(name, writes_nothing(&wheel, &out));
    }
}

#[test]
fn zips_and_files_that_are_not_wheels_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let no_dist_info = wheel_of(
        work.path(),
        "pkg-1.0-py3-none-any.whl",
        &[
            ("pkg/__init__.py", b""),
            ("pkg-1.0.dist-info/METADATA", b"Name: pkg\nVersion: 1.0\n"),
        ],
        Value::Null,
    );
    // A zip that names its RECORD in a .dist-info of another project.
    let renamed = work.path().join("other-1.0-py3-none-any.whl");
    fs_err::copy(&no_dist_info, &renamed).unwrap();
    insta::assert_snapshot!("record_of_another_project", writes_nothing(&renamed, &out));

    let plain_zip = work.path().join("pkg.zip");
    fs_err::copy(&no_dist_info, &plain_zip).unwrap();
    insta::assert_snapshot!("plain_zip", writes_nothing(&plain_zip, &out));

    let not_zip = work.path().join("junk-1.0-py3-none-any.whl");
    fs_err::write(&not_zip, b"not a zip at all").unwrap();
    insta::assert_snapshot!("not_a_zip", writes_nothing(&not_zip, &out));
}

#[test]
fn a_wheel_with_nothing_to_split_says_so_and_writes_nothing() {
    let work = tempfile::tempdir().unwrap();
    let wheel = wheel_of(
        work.path(),
        "pure-1.0-py3-none-any.whl",
        &[
            ("pure/__init__.py", b"x = 1\n"),
            (
                "pure-1.0.dist-info/METADATA",
                b"Metadata-Version: 2.1\nName: pure\nVersion: 1.0\n",
            ),
            (
                "pure-1.0.dist-info/WHEEL",
                b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            ),
        ],
        Value::Null,
    );
    let out = work.path().join("out");
    insta::assert_snapshot!("pure_wheel", writes_nothing(&wheel, &out));

    // A host wheel has nothing left to split either.
    let host = work.path().join("host");
    split_ok(&jax_wheel(), &host);
    let again = work.path().join("again");
    insta::assert_snapshot!("host_wheel", writes_nothing(&host.join(JAX), &again));
}

/// A shared library whose one bundle holds `code` for each target.
fn fat_library(dir: &Path, code: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let triples: Vec<(String, &[u8])> = code
        .iter()
        .map(|(t, bytes)| (format!("hipv4-amdgcn-amd-amdhsa--{t}"), &bytes[..]))
        .collect();
    let entries: Vec<(&str, &[u8])> = triples.iter().map(|(t, b)| (t.as_str(), *b)).collect();
    let library = dir.join("libfat.so");
    FatLibrary::new(offload_bundle(&entries))
        .aligned(4096)
        .compile(&library);
    fs_err::read(library).unwrap()
}

#[test]
fn target_features_stay_out_of_names_and_their_code_shares_a_device_wheel() {
    let work = tempfile::tempdir().unwrap();
    let code = [
        ("gfx90a:xnack+", vec![1u8; 3000]),
        ("gfx90a:xnack-", vec![2u8; 3000]),
        ("gfx1100", vec![3u8; 3000]),
    ];
    let library = fat_library(work.path(), &code);
    let wheel = wheel_of(
        work.path(),
        "Fat.Pkg-2.0-1-cp311-cp311-linux_x86_64.whl",
        &[
            ("fat_pkg/__init__.py", b""),
            ("fat_pkg/lib/libfat.so", &library),
            ("fat_pkg-2.0.dist-info/METADATA", b"Metadata-Version: 2.1\nName: Fat.Pkg\nVersion: 2.0\n"),
            ("fat_pkg-2.0.dist-info/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nBuild: 1\nTag: cp311-cp311-linux_x86_64\n"),
        ],
        Value::Null,
    );
    let out = work.path().join("out");
    split_ok(&wheel, &out);
    assert_eq!(
        file_names(&out),
        BTreeSet::from([
            "Fat.Pkg-2.0-1-cp311-cp311-linux_x86_64.whl".to_owned(),
            "fat_pkg_device_gfx1100-2.0-1-cp311-cp311-linux_x86_64.whl".to_owned(),
            "fat_pkg_device_gfx90a-2.0-1-cp311-cp311-linux_x86_64.whl".to_owned(),
        ])
    );
    let wheels = check_wheels(&out);
    let host = &wheels["Fat.Pkg-2.0-1-cp311-cp311-linux_x86_64.whl"];
    assert_eq!(
        strings(&host["extras"]),
        ["device-gfx1100", "device-gfx90a", "device-all"]
    );

    // Installed side by side (extracted), the nested library finds both
    // feature variants in the one gfx90a archive.
    let site = work.path().join("site");
    for name in file_names(&out) {
        let file = fs_err::File::open(out.join(name)).unwrap();
        zip::ZipArchive::new(file).unwrap().extract(&site).unwrap();
    }
    let archive = Archive::open(site.join("fat_pkg/.kpack/rocm_gfx90a.kpack")).unwrap();
    let targets: BTreeSet<String> = archive
        .binaries()
        .flat_map(|b| archive.targets_of(b).unwrap().map(ToString::to_string))
        .collect();
    assert_eq!(
        targets,
        BTreeSet::from(["gfx90a:xnack+".to_owned(), "gfx90a:xnack-".to_owned()])
    );
    let bundles = Bundles::from([(
        "fat_pkg/lib/libfat.so".to_owned(),
        vec![code
            .iter()
            .map(|(t, bytes)| (Target::parse(t).unwrap(), bytes.clone()))
            .collect()],
    )]);
    assert_loads_original_code(&site, &bundles, "gfx90a", "gfx942");
    assert_loads_original_code(&site, &bundles, "gfx1100", "gfx942");
}

#[test]
fn signed_archives_travel_in_their_device_wheels() {
    let work = tempfile::tempdir().unwrap();
    let (public, secret) = (work.path().join("key.pub"), work.path().join("key.sec"));
    run(kpack_test_support::tool("minisign")
        .args(["-G", "-W", "-f", "-p"])
        .arg(&public)
        .arg("-s")
        .arg(&secret));
    let out = work.path().join("out");
    let result = kpack_pack()
        .args(["wheel", "split"])
        .arg(jax_wheel())
        .arg("-o")
        .arg(&out)
        .arg("--sign")
        .arg(&secret)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let processor = processors(&original_bundles(&jax_wheel()))
        .into_iter()
        .next()
        .unwrap();
    let site = work.path().join("site");
    let file = fs_err::File::open(out.join(device_wheel(&processor))).unwrap();
    zip::ZipArchive::new(file).unwrap().extract(&site).unwrap();
    let archive = site.join(format!("jax_rocm7_plugin/.kpack/rocm_{processor}.kpack"));
    run(kpack_test_support::tool("minisign")
        .arg("-Vm")
        .arg(&archive)
        .arg("-p")
        .arg(&public));
}

#[test]
fn variant_wheels_carry_one_processors_code_and_name_it_in_variant_json() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("out");
    let result = kpack_pack()
        .args(["wheel", "split", "--variants"])
        .arg(jax_wheel())
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let bundles = original_bundles(&jax_wheel());
    let processors = processors(&bundles);
    let stem = JAX.trim_end_matches(".whl");
    let mut expected: BTreeSet<String> = processors.iter().map(|p| device_wheel(p)).collect();
    expected.extend(processors.iter().map(|p| format!("{stem}-{p}.whl")));
    expected.insert(JAX.to_owned());
    expected.insert("jax_rocm7_plugin-0.10.2-variants.json".to_owned());
    assert_eq!(file_names(&out), expected);

    // Read back with Python's json: each wheel's variant.json names its
    // processor, the index names them all, with AMD's provider.
    let script = r#"
import json, sys, zipfile
out, stem = sys.argv[1], sys.argv[2]
index = json.load(open(f"{out}/jax_rocm7_plugin-0.10.2-variants.json"))
found = {"index": index, "wheels": {}}
for label in index["variants"]:
    with zipfile.ZipFile(f"{out}/{stem}-{label}.whl") as wheel:
        found["wheels"][label] = json.loads(wheel.read("jax_rocm7_plugin-0.10.2.dist-info/variant.json"))
print(json.dumps(found))
"#;
    let found: Value =
        serde_json::from_str(&run(python().arg("-c").arg(script).arg(&out).arg(stem))).unwrap();
    let index = &found["index"];
    assert_eq!(
        index["default-priorities"]["namespace"],
        serde_json::json!(["amd"])
    );
    assert_eq!(
        index["providers"]["amd"]["plugin-api"],
        "rocm_bootstrap.variant_provider:AMDVariantPlugin"
    );
    let labels: BTreeSet<String> = index["variants"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(labels, processors);
    for processor in &processors {
        let properties = serde_json::json!({"amd": {"gfx_arch": [processor]}});
        assert_eq!(index["variants"][processor], properties);
        let own = &found["wheels"][processor]["variants"];
        assert_eq!(own, &serde_json::json!({ processor.as_str(): properties }));
    }

    // A variant wheel is the host wheel plus its processor's archive, its
    // METADATA the original's (no device extras: the code is inside).
    let wheels = check_wheels(&out);
    let first = processors.iter().next().unwrap();
    let other = processors.iter().nth(1).unwrap();
    let variant = &wheels[&format!("{stem}-{first}.whl")];
    assert!(!strings(&variant["extras"])
        .iter()
        .any(|e| e.starts_with("device-")));
    let site = work.path().join("site");
    let file = fs_err::File::open(out.join(format!("{stem}-{first}.whl"))).unwrap();
    zip::ZipArchive::new(file).unwrap().extract(&site).unwrap();
    assert_loads_original_code(&site, &bundles, first, other);
}

#[test]
fn a_wheel_with_two_gibibytes_of_compressed_device_code_splits_in_bounded_memory() {
    let work = tempfile::tempdir().unwrap();
    let standin = registering_standin(&work.path().join("hip"));
    let library = work.path().join("libbig.so");
    compile_big_library(&library, &standin);
    let wheel = wheel_of(
        work.path(),
        "big-1.0-py3-none-linux_x86_64.whl",
        &[
            ("big/__init__.py", b""),
            ("big/lib/libbig.so", &fs_err::read(&library).unwrap()),
            (
                "big-1.0.dist-info/METADATA",
                b"Metadata-Version: 2.1\nName: big\nVersion: 1.0\n",
            ),
            (
                "big-1.0.dist-info/WHEEL",
                b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n",
            ),
        ],
        Value::Null,
    );
    let out = work.path().join("out");
    split_within_memory_goal(
        kpack_pack()
            .args(["wheel", "split"])
            .arg(&wheel)
            .arg("-o")
            .arg(&out),
    );

    // Installed side by side, the split library's every wrapper finds its
    // gfx1100 code object, byte for byte, and no gfx90a code.
    let site = work.path().join("site");
    for name in [
        "big-1.0-py3-none-linux_x86_64.whl",
        "big_device_gfx1100-1.0-py3-none-linux_x86_64.whl",
    ] {
        let file = fs_err::File::open(out.join(name)).unwrap();
        zip::ZipArchive::new(file).unwrap().extract(&site).unwrap();
    }
    let path = site.join("big/lib/libbig.so");
    let (marker, numbers) = marker_and_bundles(&fs_err::read(&path).unwrap());
    assert_eq!(numbers.len(), BIG_BUNDLES);
    let loader = Loader::new(LoaderConfig::default());
    let gfx1100 = Target::parse("gfx1100").unwrap();
    for number in numbers {
        let located = loader
            .locate(&marker, &path, number, std::slice::from_ref(&gfx1100))
            .unwrap();
        let code = located.kernel().unwrap().bytes().unwrap();
        let digest: [u8; 32] = *kpack_hash::Sha256::of(&code[..]).as_bytes();
        assert_eq!(
            digest,
            big_code_sha256(number as usize, 2),
            "bundle {number}"
        );
        let gfx90a = Target::parse("gfx90a").unwrap();
        assert!(loader.locate(&marker, &path, number, &[gfx90a]).is_err());
    }
}

#[test]
fn the_maturin_wheel_installs_a_kpack_pack_that_splits_the_jax_wheel() {
    use kpack_test_support::wheels::{build_wheel, install_fresh};
    let work = tempfile::tempdir().unwrap();
    let wheel = build_wheel("kpack-packer", &work.path().join("wheels"));
    assert_eq!(
        wheel.file_name().unwrap().to_string_lossy(),
        format!(
            "kpack_pack-{}-py3-none-manylinux_2_28_{}.whl",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::ARCH
        )
    );
    let exe = install_fresh(&wheel, &work.path().join("venv")).join("kpack-pack");
    let installed = work.path().join("installed");
    run(Command::new(&exe)
        .args(["wheel", "split"])
        .arg(jax_wheel())
        .arg("-o")
        .arg(&installed)
        .env("SOURCE_DATE_EPOCH", "1700000000"));
    let built = work.path().join("built");
    run(kpack_pack()
        .args(["wheel", "split"])
        .arg(jax_wheel())
        .arg("-o")
        .arg(&built)
        .env("SOURCE_DATE_EPOCH", "1700000000"));
    // The same wheels, byte for byte, as the workspace's kpack-pack writes.
    let names = file_names(&built);
    assert_eq!(file_names(&installed), names);
    assert!(names.len() > 20, "{names:?}");
    for name in names {
        assert!(
            fs_err::read(installed.join(&name)).unwrap()
                == fs_err::read(built.join(&name)).unwrap(),
            "{name} differs"
        );
    }
}

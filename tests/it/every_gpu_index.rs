//! ROCm's two pip indexes (TheRock's RFC0012), served over loopback as
//! PEP 503 pages with PEP 691 JSON and PEP 658 metadata, both built from
//! the real `torch-scatter-rocm` 2.1.2.post7 wheel from PyPI split by
//! `kpack-pack wheel split` (29 targets): `whl-next/` with explicit extras,
//! and `whl/`, whose entry wheel demands its own `device-all`. An
//! environment installed from `whl/` (by pip, and by uv) holds every
//! device wheel; `kpack-get pip sync --prune` shrinks it to gfx1100's,
//! pip's and uv's checks stay clean and
//! the package loads gfx1100's code; a second run changes nothing and a GPU
//! given later comes back. `kpack-get pip download` for gfx942 and gfx1100
//! from `whl-next/` fetches the host wheel and two device wheels, from
//! which an offline install works for either.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use kpack_hash::Sha256;
use kpack_test_support::chain::{success, workspace_binary, Env};
use kpack_test_support::download;
use kpack_test_support::server::TestServer;
use kpack_test_support::venv::{pip_venv, with_python_tools};
use kpack_wheel::record::{Record, RecordHash};
use kpack_wheel::MetadataEditor;

const WHEEL: &str = "torch_scatter_rocm-2.1.2.post7-cp311-cp311-manylinux_2_32_x86_64.whl";
const PROJECT: &str = "torch-scatter-rocm";

/// The wheel `host` republished into `dir` as `whl/` does: its METADATA
/// requires its own `device-all` extra, RECORD updated to match.
fn demanding_all(host: &Path, dir: &Path) -> PathBuf {
    let mut input = zip::ZipArchive::new(fs_err::File::open(host).unwrap()).unwrap();
    let mut members: Vec<(String, Vec<u8>)> = Vec::new();
    for index in 0..input.len() {
        let mut file = input.by_index(index).unwrap();
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).unwrap();
        members.push((file.name().unwrap().into_owned(), bytes));
    }
    let metadata_at = members
        .iter()
        .position(|(n, _)| n.ends_with(".dist-info/METADATA"))
        .unwrap();
    let mut editor = MetadataEditor::new(std::str::from_utf8(&members[metadata_at].1).unwrap());
    editor.requires_dist(&format!("{PROJECT}[device-all]"));
    let metadata = editor.finish().into_bytes();
    let record_at = members
        .iter()
        .position(|(n, _)| n.ends_with(".dist-info/RECORD"))
        .unwrap();
    let mut record = Record::parse(std::str::from_utf8(&members[record_at].1).unwrap()).unwrap();
    record.set(
        &members[metadata_at].0,
        Some(RecordHash::of_bytes(&metadata)),
        Some(metadata.len() as u64),
    );
    members[metadata_at].1 = metadata;
    members[record_at].1 = record.to_text().into_bytes();
    let out = dir.join(host.file_name().unwrap());
    let mut writer = zip::ZipWriter::new(fs_err::File::create(&out).unwrap());
    let options = zip::write::SimpleFileOptions::default();
    for (name, bytes) in members {
        writer.start_file(name, options).unwrap();
        writer.write_all(&bytes).unwrap();
    }
    writer.finish().unwrap();
    out
}

/// A wheel's METADATA, as PEP 658 serves it beside the wheel.
fn core_metadata(wheel: &Path) -> Vec<u8> {
    let mut archive = zip::ZipArchive::new(fs_err::File::open(wheel).unwrap()).unwrap();
    let name = archive
        .file_names()
        .filter_map(Result::ok)
        .find(|n| n.ends_with(".dist-info/METADATA"))
        .unwrap()
        .into_owned();
    let mut bytes = Vec::new();
    archive
        .by_name(&name)
        .unwrap()
        .read_to_end(&mut bytes)
        .unwrap();
    bytes
}

/// The project a wheel file belongs to (`torch_scatter_rocm_device_gfx1100`
/// -> `torch-scatter-rocm-device-gfx1100`).
fn project_of(file: &str) -> String {
    file.split('-').next().unwrap().replace('_', "-")
}

/// An index at `root/<index>/simple/` over the wheels in `files` (served
/// from `root/<index>/files/`): an HTML page (PEP 503) and a JSON page
/// (PEP 691) per project, each file with its sha256 and its METADATA
/// beside it (PEP 658).
fn write_index(root: &Path, index: &str, wheels: &[PathBuf]) {
    let files = root.join(index).join("files");
    fs_err::create_dir_all(&files).unwrap();
    let mut projects: std::collections::BTreeMap<String, Vec<(String, String, String)>> =
        Default::default();
    for wheel in wheels {
        let name = wheel.file_name().unwrap().to_str().unwrap().to_owned();
        fs_err::copy(wheel, files.join(&name)).unwrap();
        let metadata = core_metadata(wheel);
        fs_err::write(files.join(format!("{name}.metadata")), &metadata).unwrap();
        let sha = Sha256::of(&fs_err::read(wheel).unwrap()).to_string();
        let meta_sha = Sha256::of(&metadata).to_string();
        projects
            .entry(project_of(&name))
            .or_default()
            .push((name, sha, meta_sha));
    }
    for (project, files) in projects {
        let dir = root.join(index).join("simple").join(&project);
        fs_err::create_dir_all(&dir).unwrap();
        let anchors: String = files
            .iter()
            .map(|(name, sha, meta)| {
                format!(
                    "<a href=\"../../files/{name}#sha256={sha}\" data-dist-info-metadata=\"sha256={meta}\" data-core-metadata=\"sha256={meta}\">{name}</a><br/>\n"
                )
            })
            .collect();
        fs_err::write(
            dir.join("index.html"),
            format!("<!DOCTYPE html>\n<html><body>\n{anchors}</body></html>\n"),
        )
        .unwrap();
        let json: Vec<String> = files
            .iter()
            .map(|(name, sha, meta)| {
                format!(
                    "{{\"filename\": \"{name}\", \"url\": \"../../files/{name}\", \"hashes\": {{\"sha256\": \"{sha}\"}}, \"core-metadata\": {{\"sha256\": \"{meta}\"}}, \"dist-info-metadata\": {{\"sha256\": \"{meta}\"}}}}"
                )
            })
            .collect();
        fs_err::write(
            dir.join("index.json"),
            format!(
                "{{\"meta\": {{\"api-version\": \"1.1\"}}, \"name\": \"{project}\", \"files\": [{}]}}",
                json.join(", ")
            ),
        )
        .unwrap();
    }
}

/// Both indexes of the split wheel under `root`, and the device wheels.
fn build_indexes(root: &Path) -> Vec<PathBuf> {
    let split = root.join("split");
    success(
        Command::new(workspace_binary("kpack-packer", "kpack-pack"))
            .args(["wheel", "split", "-o"])
            .arg(&split)
            .arg(download(WHEEL)),
    );
    let wheels: Vec<PathBuf> = fs_err::read_dir(&split)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "whl"))
        .collect();
    let (devices, hosts): (Vec<PathBuf>, Vec<PathBuf>) = wheels.into_iter().partition(|p| {
        p.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .contains("_device_")
    });
    assert_eq!(hosts.len(), 1, "{hosts:?}");
    let republished = root.join("republished");
    fs_err::create_dir_all(&republished).unwrap();
    let demanding = demanding_all(&hosts[0], &republished);
    let next: Vec<PathBuf> = hosts.iter().chain(&devices).cloned().collect();
    let whl: Vec<PathBuf> = std::iter::once(demanding)
        .chain(devices.iter().cloned())
        .collect();
    write_index(root, "whl-next", &next);
    write_index(root, "whl", &whl);
    devices
}

/// The distributions installed in `python`'s environment whose names start
/// with the project's.
fn installed(python: &Path) -> BTreeSet<String> {
    success(Command::new(python).args([
        "-c",
        "import importlib.metadata as m\nfor d in m.distributions(): print(d.metadata['Name'])",
    ]))
    .lines()
    .filter(|n| n.starts_with(PROJECT))
    .map(str::to_owned)
    .collect()
}

/// The bytes under `dir`.
fn size(dir: &Path) -> u64 {
    kpack_test_support::measure::disk_use(dir)
}

fn kpack(env: &Env, python: &Path, args: &[&str], index: &str) -> Command {
    kpack_with(env, python, args, &["--index-url", index])
}

/// `kpack-get ARGS --python PY -- INDEXES`.
fn kpack_with(env: &Env, python: &Path, args: &[&str], indexes: &[&str]) -> Command {
    let mut command = env.command();
    with_python_tools(&mut command, env.home.path());
    command
        .args(args)
        .arg("--python")
        .arg(python)
        .arg("--")
        .args(indexes);
    command
}

fn site_packages(python: &Path) -> PathBuf {
    PathBuf::from(
        success(Command::new(python).args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['platlib'])",
        ]))
        .trim(),
    )
}

#[test]
fn an_every_gpu_environment_prunes_to_its_gpus_and_a_fleet_downloads_only_its_wheels() {
    let env = Env::new();
    let home = env.home.path().to_owned();
    let devices = build_indexes(&home.join("indexes"));
    assert_eq!(devices.len(), 29, "{devices:?}");
    let server = TestServer::start(&home.join("indexes"));
    let whl = format!("{}/whl/simple", server.url());
    let whl_next = format!("{}/whl-next/simple", server.url());

    // `pip install torch-scatter-rocm` from `whl/`: every device wheel.
    let python = pip_venv(&home.join("venv"));
    success(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--index-url",
                &whl,
                PROJECT,
            ])
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
    );
    assert_eq!(installed(&python).len(), 30);
    let site = site_packages(&python);
    let package = site.join("torch_scatter");
    let before = size(&package);

    let pruned = success(&mut kpack(
        &env,
        &python,
        &["--target", "gfx1100", "pip", "sync", "--prune"],
        &whl,
    ));
    let gfx1100 = format!("{PROJECT}-device-gfx1100");
    assert_eq!(
        installed(&python),
        [PROJECT.to_owned(), gfx1100.clone()].into()
    );
    let after = size(&package);
    eprintln!("torch_scatter/ from the every-GPU index: {before} bytes, pruned to gfx1100: {after} bytes\n{pruned}");
    let archives: Vec<String> = fs_err::read_dir(package.join(".kpack"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !archives.is_empty() && archives.iter().all(|a| a.contains("gfx1100")),
        "{archives:?}"
    );
    assert!(after < before, "{before} -> {after}");
    success(Command::new(&python).args(["-m", "pip", "check"]));
    success(
        Command::new(workspace_binary("kpack-packer", "kpack-pack"))
            .args(["verify", "--target", "gfx1100"])
            .arg(site.join("torch_scatter")),
    );
    let again = success(&mut kpack(
        &env,
        &python,
        &["--target", "gfx1100", "pip", "sync", "--prune"],
        &whl,
    ));
    assert!(again.contains("nothing to prune"), "{again}");

    let added = kpack(
        &env,
        &python,
        &["--target", "gfx1100,gfx942", "pip", "sync"],
        &whl,
    );
    success(&mut { added });
    assert!(installed(&python).contains(&format!("{PROJECT}-device-gfx942")));

    // The same with uv, in an environment without pip.
    let cache = home.join("uv-cache");
    let uv_python = kpack_test_support::venv::uv_venv(&home.join("uv-venv"), &cache);
    let uv = || {
        let mut command = Command::new(kpack_test_support::python_venv().join("bin/uv"));
        command.env("UV_CACHE_DIR", &cache);
        command
    };
    success(
        uv().args(["pip", "install", "--quiet", "--python"])
            .arg(&uv_python)
            .args(["--index-url", &whl, PROJECT]),
    );
    assert_eq!(installed(&uv_python).len(), 30);
    success(&mut kpack(
        &env,
        &uv_python,
        &["--target", "gfx1100", "pip", "sync", "--prune"],
        &whl,
    ));
    assert_eq!(
        installed(&uv_python),
        [PROJECT.to_owned(), gfx1100.clone()].into()
    );
    success(uv().args(["pip", "check", "--python"]).arg(&uv_python));

    // A fleet of gfx942 and gfx1100: from `whl/` alone refused, saying
    // why; with `whl-next/` offered too, its twin of the entry wheel and
    // three wheels in all.
    let fleet = home.join("fleet");
    let fleet_arg = fleet.to_str().unwrap().to_owned();
    let download = [
        "--target",
        "gfx942,gfx1100",
        "pip",
        "download",
        "-d",
        &fleet_arg,
        PROJECT,
    ];
    let refused = kpack_test_support::chain::output(&mut kpack(&env, &python, &download, &whl));
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("demands every GPU's device code"), "{said}");
    success(&mut kpack_with(
        &env,
        &python,
        &download,
        &["--index-url", &whl, "--extra-index-url", &whl_next],
    ));
    let names: BTreeSet<String> = fs_err::read_dir(&fleet)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    let every: u64 = devices
        .iter()
        .map(|d| fs_err::metadata(d).unwrap().len())
        .sum();
    eprintln!(
        "fleet download (the host wheel and 2 device wheels): {} bytes; the 29 device wheels alone: {every} bytes",
        size(&fleet)
    );
    for gpu in ["gfx942", "gfx1100"] {
        let fresh = pip_venv(&home.join(format!("offline-{gpu}")));
        let mut install = env.command();
        with_python_tools(&mut install, &home);
        install
            .args(["--target", gpu, "pip", "install", PROJECT, "--python"])
            .arg(&fresh)
            .args(["--", "--no-index", "--find-links"])
            .arg(&fleet);
        success(&mut install);
        assert_eq!(
            installed(&fresh),
            [PROJECT.to_owned(), format!("{PROJECT}-device-{gpu}")].into()
        );
    }
}

//! The layout of a Python environment's split binaries after `kpack-get pip
//! sync` and `pip install` (08-hip-runtimes.md, "Python environments"), on
//! the jax ROCm plugin split into a host wheel and device wheels by the
//! packer, installed by real pip and uv into virtual environments: fat for
//! the GPU where no kpack-aware HIP runtime is found, made again when a
//! device distribution changes, untouched for the kpack layout or a
//! kpack-aware runtime beside the distribution; RECORD always matching
//! the files, uninstalls leaving nothing, uv's cache never written.

use kpack_test_support::venv::{pip_venv, with_python_tools};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::runtimes::{build_runtime_named, FakeRuntime};
use crate::common::wheels::{build_wheel, WheelSpec};
use crate::common::{output, success, Env};
use kpack_binary::bundle::BundleKind;
use kpack_binary::elf::{FatElf, SplitElf};
use kpack_binary::materialize::{materialize_file, ArchiveSource, BundleEncoding};
use kpack_gpu::Target;
use kpack_test_support::chain::kpack_pack_exe;
use kpack_test_support::context::TestContext;
use kpack_test_support::{fixtures, python_venv, run};
use kpack_wheel::{Record, RecordHash};

const JAX: &str = "jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl";
const HOST: &str = "jax-rocm7-plugin";
const PACKAGE: &str = "jax_rocm7_plugin";
const DIST_INFO: &str = "jax_rocm7_plugin-0.10.2.dist-info";
/// The plugin's files that `wheel split` leaves host-only (the others
/// have no device code).
pub(crate) const SPLIT: [&str; 3] = [
    "jax_rocm7_plugin/_linalg.so",
    "jax_rocm7_plugin/_prng.so",
    "jax_rocm7_plugin/_solver.so",
];

/// The jax plugin split into a find-links directory (`rocm` archives, as
/// `kpack-pack wheel split` names them), with a stand-in for the
/// `jax-rocm7-pjrt` it requires, so that `pip check` has all it needs.
pub(crate) struct Jax {
    pub(crate) links: PathBuf,
    /// The host wheel's ELF files, as it ships them.
    host_files: BTreeMap<String, Vec<u8>>,
}

impl Jax {
    fn split(dir: &Path) -> Jax {
        let links = dir.join("links");
        run(Command::new(kpack_pack_exe())
            .args(["wheel", "split"])
            .arg(fixtures().join("pypi").join(JAX))
            .arg("-o")
            .arg(&links));
        build_wheel(
            &links,
            &WheelSpec {
                name: "jax-rocm7-pjrt".into(),
                version: "0.10.2".into(),
                files: vec![("jax_rocm7_pjrt/__init__.py".into(), Vec::new())],
                ..WheelSpec::default()
            },
        );
        Jax {
            host_files: so_members(&links.join(JAX)),
            links,
        }
    }

    fn args(&self) -> Vec<String> {
        vec![
            "--no-index".into(),
            "--find-links".into(),
            self.links.display().to_string(),
        ]
    }
}

/// The `.so` members of a wheel and their bytes.
fn so_members(wheel: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut zip = zip::ZipArchive::new(fs_err::File::open(wheel).unwrap()).unwrap();
    let mut members = BTreeMap::new();
    for index in 0..zip.len() {
        let mut member = zip.by_index(index).unwrap();
        let name = member.name().unwrap().into_owned();
        if name.ends_with(".so") {
            let mut bytes = Vec::new();
            member.read_to_end(&mut bytes).unwrap();
            members.insert(name, bytes);
        }
    }
    members
}

/// uv, with the test's own cache, installing by hard links into it (its
/// default on Linux is a clone where the file system can, else hard links;
/// asked for here so the test knows it gets links).
fn uv(env: &Env) -> Command {
    let mut command = Command::new(python_venv().join("bin/uv"));
    command
        .env("UV_CACHE_DIR", env.home.path().join("uv-cache"))
        .env("UV_LINK_MODE", "hardlink")
        .env_remove("VIRTUAL_ENV");
    command
}

/// `python -m pip ...` quietly.
fn pip(python: &Path) -> Command {
    let mut command = Command::new(python);
    command
        .args(["-m", "pip"])
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PIP_NO_CACHE_DIR", "1");
    command
}

/// kpack-get with the test tools on PATH, the environment's uv settings,
/// GPUs only from `--target` or a test's variables, and the layout a user
/// gets (`auto`) unless a test asks for another.
pub(crate) fn kpack(env: &Env) -> Command {
    let mut command = env.command();
    command.env_remove("KPACK_GET_LAYOUT");
    with_python_tools(&mut command, env.home.path()).env("UV_LINK_MODE", "hardlink");
    command
}

/// A test environment, the split jax plugin, and a pip venv (its python and
/// site-packages) with the host distribution installed by pip.
pub(crate) fn host_installed() -> (TestContext, Jax, PathBuf, PathBuf) {
    let context = TestContext::new();
    let env = &context.env;
    let jax = Jax::split(env.home.path());
    let python = pip_venv(&env.home.path().join("venv"));
    let site = site(&python);
    success(
        pip(&python)
            .args(["install", "--quiet"])
            .args(jax.args())
            .arg(HOST),
    );
    (context, jax, python, site)
}

/// `text` with the context's masks and the test tools' environment.
fn pip_filter(context: &TestContext, text: &str) -> String {
    let tools = python_venv().display().to_string();
    context.filter(text).replace(&tools, "<TOOLS>")
}

/// `kpack-get [--target T] pip sync --python PY -- <links>`: stdout.
pub(crate) fn sync(env: &Env, python: &Path, jax: &Jax, global: &[&str]) -> String {
    success(
        kpack(env)
            .args(global)
            .args(["pip", "sync", "--python"])
            .arg(python)
            .arg("--")
            .args(jax.args()),
    )
}

/// The environment's site-packages.
fn site(python: &Path) -> PathBuf {
    let out = success(Command::new(python).args([
        "-c",
        "import sysconfig; print(sysconfig.get_paths()['platlib'])",
    ]));
    PathBuf::from(out.trim())
}

/// The processors of every code object in a fat file; `None` for a file
/// that is not fat (a split one, or one without device code).
fn fat_processors(path: &Path) -> Option<BTreeSet<String>> {
    let data = fs_err::read(path).unwrap();
    let fat = FatElf::parse(&data).unwrap()?;
    assert!(SplitElf::parse(&data).unwrap().is_none(), "{path:?}");
    Some(
        fat.bundles
            .iter()
            .flat_map(|bundle| &bundle.entries)
            .map(|code| code.target.processor().to_owned())
            .collect(),
    )
}

/// Asserts that each split binary is fat with code for `processor` only.
pub(crate) fn assert_fat_for(site: &Path, processor: &str) {
    for path in SPLIT {
        assert_eq!(
            fat_processors(&site.join(path)),
            Some(BTreeSet::from([processor.to_owned()])),
            "{path}"
        );
    }
}

/// Asserts that every `.so` of the host is as its wheel ships it.
fn assert_as_shipped(site: &Path, jax: &Jax) {
    for (path, bytes) in &jax.host_files {
        assert!(
            &fs_err::read(site.join(path)).unwrap() == bytes,
            "{path} differs from the host wheel's"
        );
    }
}

/// The RECORD of an installed distribution.
fn record(site: &Path, dist_info: &str) -> Record {
    Record::parse(&fs_err::read_to_string(site.join(dist_info).join("RECORD")).unwrap()).unwrap()
}

/// Every file under `dir`, by its path relative to `site`.
fn files_under(site: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    for entry in fs_err::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if fs_err::symlink_metadata(&path).unwrap().is_dir() {
            files_under(site, &path, out);
        } else {
            let relative = path.strip_prefix(site).unwrap();
            out.insert(relative.to_string_lossy().into_owned());
        }
    }
}

/// Asserts that the RECORDs of the jax distributions installed list
/// exactly the files under the package and their `.dist-info`s, each
/// hashed row with the file's hash and size.
fn assert_records_match(site: &Path) {
    let mut listed = BTreeSet::new();
    let mut present = BTreeSet::new();
    for entry in fs_err::read_dir(site).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !name.starts_with(PACKAGE) {
            continue;
        }
        files_under(site, &site.join(&name), &mut present);
        if name.ends_with(".dist-info") {
            for row in record(site, &name).rows() {
                listed.insert(row.path.clone());
                let Some(hash) = &row.hash else { continue };
                let (actual, size) = RecordHash::of_file(&site.join(&row.path)).unwrap();
                assert_eq!(&actual, hash, "{name}: {}", row.path);
                assert_eq!(row.size, Some(size), "{name}: {}", row.path);
            }
        }
    }
    assert_eq!(listed, present, "RECORD rows against the files");
}

/// The names in site-packages that belong to jax.
fn jax_leftovers(site: &Path) -> Vec<String> {
    fs_err::read_dir(site)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("jax"))
        .collect()
}

/// The (device, inode) of a file.
fn identity(path: &Path) -> (u64, u64) {
    let metadata = fs_err::metadata(path).unwrap();
    (metadata.dev(), metadata.ino())
}

/// The file under `dir` that is the same inode as `file`.
fn same_inode_under(dir: &Path, file: &Path) -> Option<PathBuf> {
    let wanted = identity(file);
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in fs_err::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let metadata = fs_err::symlink_metadata(&path).unwrap();
            if metadata.is_dir() {
                stack.push(path);
            } else if metadata.is_file() && (metadata.dev(), metadata.ino()) == wanted {
                return Some(path);
            }
        }
    }
    None
}

#[test]
fn sync_without_a_kpack_aware_runtime_makes_the_jax_host_fat_for_gfx1100_and_uninstall_leaves_nothing(
) {
    let (context, jax, python, site) = host_installed();
    let env = &context.env;
    assert_as_shipped(&site, &jax);

    let stdout = sync(env, &python, &jax, &["--target", "gfx1100"]);
    insta::assert_snapshot!("fat_for_gfx1100", pip_filter(&context, &stdout));
    assert_fat_for(&site, "gfx1100");
    // The files without device code are as shipped.
    for (path, bytes) in &jax.host_files {
        if !SPLIT.contains(&path.as_str()) {
            assert!(&fs_err::read(site.join(path)).unwrap() == bytes, "{path}");
        }
    }
    // The originals are kept, as shipped, and listed.
    let host_record = record(&site, DIST_INFO);
    for path in SPLIT {
        let kept = format!("{DIST_INFO}/kpack/host/{path}");
        assert!(host_record.get(&kept).is_some(), "{kept}");
        assert!(fs_err::read(site.join(&kept)).unwrap() == jax.host_files[path]);
    }
    assert_records_match(&site);
    let check = success(pip(&python).arg("check"));
    assert_eq!(check.trim(), "No broken requirements found.");

    // Nothing changed: nothing is written.
    let before: Vec<(u64, u64)> = SPLIT.iter().map(|p| identity(&site.join(p))).collect();
    let stdout = sync(env, &python, &jax, &["--target", "gfx1100"]);
    insta::assert_snapshot!("fat_for_gfx1100_again", pip_filter(&context, &stdout));
    let after: Vec<(u64, u64)> = SPLIT.iter().map(|p| identity(&site.join(p))).collect();
    assert_eq!(before, after);

    success(pip(&python).args([
        "uninstall",
        "--yes",
        "--quiet",
        "jax-rocm7-plugin-device-gfx1100",
        HOST,
        "jax-rocm7-pjrt",
    ]));
    assert_eq!(jax_leftovers(&site), Vec::<String>::new());
}

#[test]
fn in_a_uv_environment_the_fat_files_replace_uvs_hard_links_and_its_cache_is_unchanged() {
    let context = TestContext::new();
    let env = &context.env;
    let jax = Jax::split(env.home.path());
    let venv = env.home.path().join("venv");
    success(
        uv(env)
            .args(["venv", "--quiet", "--python"])
            .arg(python_venv().join("bin/python"))
            .arg(&venv),
    );
    let python = venv.join("bin/python");
    let site = site(&python);
    success(
        uv(env)
            .args(["pip", "install", "--quiet", "--python"])
            .arg(&python)
            .args(jax.args())
            .arg(HOST),
    );
    // Each split binary is a hard link to uv's cache.
    let cache = env.home.path().join("uv-cache");
    let cached: Vec<(PathBuf, RecordHash)> = SPLIT
        .iter()
        .map(|path| {
            let installed = site.join(path);
            assert!(fs_err::metadata(&installed).unwrap().nlink() >= 2, "{path}");
            let copy = same_inode_under(&cache, &installed)
                .unwrap_or_else(|| panic!("{path} is not a hard link into uv's cache"));
            let (hash, _) = RecordHash::of_file(&copy).unwrap();
            assert_eq!(hash, RecordHash::of_bytes(&jax.host_files[*path]));
            (copy, hash)
        })
        .collect();

    let stdout = sync(env, &python, &jax, &["--target", "gfx1100"]);
    insta::assert_snapshot!("fat_in_a_uv_environment", pip_filter(&context, &stdout));
    assert_fat_for(&site, "gfx1100");
    for ((copy, hash), path) in cached.iter().zip(SPLIT) {
        assert_eq!(
            &RecordHash::of_file(copy).unwrap().0,
            hash,
            "uv's cached {path} was written"
        );
        assert_ne!(identity(copy), identity(&site.join(path)));
    }
    assert_records_match(&site);
    let check = success(uv(env).args(["pip", "check", "--python"]).arg(&python));
    assert!(!check.contains("incompatib"), "{check}");

    success(
        uv(env)
            .args(["pip", "uninstall", "--quiet", "--python"])
            .arg(&python)
            .args(["jax-rocm7-plugin-device-gfx1100", HOST, "jax-rocm7-pjrt"]),
    );
    assert_eq!(jax_leftovers(&site), Vec::<String>::new());
    for (copy, hash) in &cached {
        assert_eq!(&RecordHash::of_file(copy).unwrap().0, hash);
    }
}

#[test]
fn a_changed_or_removed_device_distribution_is_followed_by_laying_out_again() {
    let (context, jax, python, site) = host_installed();
    let env = &context.env;
    sync(env, &python, &jax, &["--target", "gfx1100"]);
    assert_fat_for(&site, "gfx1100");

    // Another GPU: its device distribution instead, and fat for it.
    success(pip(&python).args([
        "uninstall",
        "--yes",
        "--quiet",
        "jax-rocm7-plugin-device-gfx1100",
    ]));
    let stdout = sync(env, &python, &jax, &["--target", "gfx90a:xnack-"]);
    insta::assert_snapshot!("fat_for_another_gpu", pip_filter(&context, &stdout));
    assert_fat_for(&site, "gfx90a");
    assert_records_match(&site);

    // The device distribution installed again (new files, the same
    // version): made again, to the same bytes.
    let fat = fs_err::read(site.join(SPLIT[1])).unwrap();
    success(
        pip(&python)
            .args(["install", "--quiet", "--force-reinstall", "--no-deps"])
            .args(jax.args())
            .arg("jax-rocm7-plugin-device-gfx90a"),
    );
    let stdout = sync(env, &python, &jax, &["--target", "gfx90a:xnack-"]);
    insta::assert_snapshot!("fat_again_after_reinstall", pip_filter(&context, &stdout));
    assert!(fs_err::read(site.join(SPLIT[1])).unwrap() == fat);

    // Removed, and no GPU to install for: host-only again, as shipped.
    success(pip(&python).args([
        "uninstall",
        "--yes",
        "--quiet",
        "jax-rocm7-plugin-device-gfx90a",
    ]));
    let stdout = success(
        kpack(env)
            .args(["pip", "sync", "--python"])
            .arg(&python)
            .env("ROCM_BOOTSTRAP_DISABLE_DETECTION", "1"),
    );
    insta::assert_snapshot!("host_only_again", pip_filter(&context, &stdout));
    assert_as_shipped(&site, &jax);
    assert_records_match(&site);
    assert_eq!(
        success(pip(&python).arg("check")).trim(),
        "No broken requirements found."
    );
    success(pip(&python).args(["uninstall", "--yes", "--quiet", HOST, "jax-rocm7-pjrt"]));
    assert_eq!(jax_leftovers(&site), Vec::<String>::new());
}

#[test]
fn the_kpack_layout_leaves_the_installed_binaries_as_shipped() {
    let (context, jax, python, site) = host_installed();
    let env = &context.env;
    let shipped_record = fs_err::read(site.join(DIST_INFO).join("RECORD")).unwrap();

    let stdout = sync(
        env,
        &python,
        &jax,
        &["--target", "gfx1100", "--layout", "kpack"],
    );
    insta::assert_snapshot!("kpack_asked_for", pip_filter(&context, &stdout));
    assert_as_shipped(&site, &jax);
    assert!(fs_err::read(site.join(DIST_INFO).join("RECORD")).unwrap() == shipped_record);
    assert!(!site.join(DIST_INFO).join("kpack").exists());
    assert!(site
        .join("jax_rocm7_plugin/.kpack/rocm_gfx1100.kpack")
        .is_file());

    // A dry run of the fat layout says what it would do, and does nothing.
    let stdout = success(
        kpack(env)
            .args([
                "--target",
                "gfx1100",
                "pip",
                "sync",
                "--dry-run",
                "--python",
            ])
            .arg(&python)
            .env("KPACK_GET_LAYOUT", "fat"),
    );
    insta::assert_snapshot!("fat_dry_run", pip_filter(&context, &stdout));
    assert_as_shipped(&site, &jax);
    assert!(!site.join(DIST_INFO).join("kpack").exists());

    // Made fat (the environment's variable), then kpack again: host-only
    // as shipped.
    let stdout = success(
        kpack(env)
            .args(["--target", "gfx1100", "pip", "sync", "--python"])
            .arg(&python)
            .env("KPACK_GET_LAYOUT", "fat"),
    );
    insta::assert_snapshot!("fat_asked_for", pip_filter(&context, &stdout));
    assert_fat_for(&site, "gfx1100");
    let stdout = sync(
        env,
        &python,
        &jax,
        &["--target", "gfx1100", "--layout", "kpack"],
    );
    insta::assert_snapshot!("kpack_again", pip_filter(&context, &stdout));
    assert_as_shipped(&site, &jax);
    assert_records_match(&site);
}

#[test]
fn a_kpack_aware_runtime_in_the_distributions_run_paths_keeps_the_kpack_layout() {
    let (context, jax, python, site) = host_installed();
    let env = &context.env;
    // TheRock's ROCm beside the plugin, where its run path
    // `$ORIGIN/../_rocm_sdk_core/lib` looks.
    let core = site.join("_rocm_sdk_core/lib");
    build_runtime_named(&core, FakeRuntime::NeedsKpackLibrary, "libamdhip64.so.7");

    let stdout = success(
        kpack(env)
            .args(["--target", "gfx1100", "--json", "pip", "sync", "--python"])
            .arg(&python)
            .arg("--")
            .args(jax.args()),
    );
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let layout = &json["layout"];
    assert_eq!(layout["layout"], "kpack", "{json}");
    assert_eq!(layout["choice"], "auto");
    let runtime = &layout["hip_runtime"];
    assert_eq!(runtime["kpack_aware"], true, "{json}");
    assert_eq!(runtime["found_in"], "runpath");
    let found = PathBuf::from(runtime["path"].as_str().unwrap());
    assert_eq!(
        fs_err::canonicalize(found).unwrap(),
        fs_err::canonicalize(core.join("libamdhip64.so.7")).unwrap()
    );
    let actions: Vec<&str> = layout["binaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["unchanged"; 3]);
    assert_as_shipped(&site, &jax);
    assert!(!site.join(DIST_INFO).join("kpack").exists());

    // The same place holding a runtime without kpack support: fat.
    fs_err::remove_dir_all(site.join("_rocm_sdk_core")).unwrap();
    build_runtime_named(&core, FakeRuntime::BuiltWithoutKpack, "libamdhip64.so.7");
    let stdout = sync(env, &python, &jax, &["--target", "gfx1100"]);
    let stdout = stdout.replace(&site.display().to_string(), "<SITE>");
    let stdout = pip_filter(&context, &stdout);
    insta::assert_snapshot!("fat_for_a_runtime_without_kpack", stdout);
    assert_fat_for(&site, "gfx1100");
    assert_records_match(&site);
    // That runtime (a ROCm 7 one, by its soname) loads compressed bundles:
    // each binary holds them, smaller than the plain ones it would hold.
    let plain_dir = tempfile::tempdir().unwrap();
    for path in SPLIT {
        let installed = site.join(path);
        let data = fs_err::read(&installed).unwrap();
        let fat = FatElf::parse(&data).unwrap().unwrap();
        assert!(
            fat.bundles
                .iter()
                .all(|b| matches!(b.kind, BundleKind::Compressed { version: 3, .. })),
            "{path}"
        );
        // The same binary made fat with plain bundles, from its kept
        // original and the same archives.
        let kept = site.join(DIST_INFO).join("kpack/host").join(path);
        let plain = plain_dir.path().join(path.replace('/', "_"));
        let archives = installed.parent().unwrap().join(".kpack");
        materialize_file(
            &kept,
            &plain,
            &[Target::parse("gfx1100").unwrap()],
            &ArchiveSource::Dir(archives),
            None,
            BundleEncoding::Plain,
        )
        .unwrap();
        let plain_len = fs_err::metadata(&plain).unwrap().len();
        assert!(
            (data.len() as u64) < plain_len,
            "{path}: {} bytes compressed, {plain_len} plain",
            data.len()
        );
    }
    assert_eq!(
        success(pip(&python).arg("check")).trim(),
        "No broken requirements found."
    );
}

#[test]
fn pip_install_lays_out_the_binaries_as_sync_does() {
    let env = Env::new();
    let jax = Jax::split(env.home.path());
    let python = pip_venv(&env.home.path().join("venv"));
    let site = site(&python);
    let out = output(
        kpack(&env)
            .args([
                "--target", "gfx1100", "--json", "pip", "install", HOST, "--python",
            ])
            .arg(&python)
            .arg("--")
            .args(jax.args()),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["layout"]["layout"], "fat", "{json}");
    let binaries = json["layout"]["binaries"].as_array().unwrap();
    let paths: Vec<&str> = binaries
        .iter()
        .map(|b| b["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, SPLIT);
    for binary in binaries {
        assert_eq!(binary["action"], "materialize", "{binary}");
        assert_eq!(binary["targets"], serde_json::json!(["gfx1100"]));
    }
    assert_fat_for(&site, "gfx1100");
    assert_records_match(&site);
    assert_eq!(
        success(pip(&python).arg("check")).trim(),
        "No broken requirements found."
    );
}

/// Each split binary is whole: as shipped, or fat for `processor`.
fn assert_whole(site: &Path, jax: &Jax, processor: &str) {
    for path in SPLIT {
        let bytes = fs_err::read(site.join(path)).unwrap();
        if bytes != jax.host_files[path] {
            assert_eq!(
                fat_processors(&site.join(path)),
                Some(BTreeSet::from([processor.to_owned()])),
                "{path} is neither as shipped nor fat"
            );
        }
    }
}

#[test]
fn a_sync_killed_at_any_moment_leaves_whole_files_and_the_next_one_finishes() {
    let (context, jax, python, site) = host_installed();
    let env = &context.env;
    sync(
        env,
        &python,
        &jax,
        &["--target", "gfx1100", "--layout", "kpack"],
    );
    let layout_sync = |layout: &str| {
        let mut command = kpack(env);
        command
            .args([
                "--target", "gfx1100", "--layout", layout, "pip", "sync", "--python",
            ])
            .arg(&python);
        command
    };
    // How long laying out takes when nothing interrupts it.
    let started = std::time::Instant::now();
    success(&mut layout_sync("fat"));
    let took = started.elapsed();
    success(&mut layout_sync("kpack"));

    let mut seed = 0x5eed_u64;
    // Killed while laying out one way, then finished either way.
    let mut random = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    for round in 0..24 {
        let killed = if round % 2 == 0 { "fat" } else { "kpack" };
        let mut child = layout_sync(killed)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(took.mul_f64(random()));
        let _ = child.kill();
        child.wait().unwrap();
        assert_whole(&site, &jax, "gfx1100");

        let next = if random() < 0.5 { "fat" } else { "kpack" };
        success(&mut layout_sync(next));
        if next == "fat" {
            assert_fat_for(&site, "gfx1100");
        } else {
            assert_as_shipped(&site, &jax);
        }
        assert_records_match(&site);
    }
}

/// A site-packages that is a link out of the environment (as images
/// sharing one have): pip installs through it, and sync lays the binaries
/// out where it leads, as pip would, and says so.
#[test]
fn a_site_packages_linked_out_of_the_environment_is_laid_out_where_it_leads_and_said() {
    let context = TestContext::new();
    let env = &context.env;
    let jax = Jax::split(env.home.path());
    let python = pip_venv(&env.home.path().join("venv"));
    let site = site(&python);
    let shared = env.home.path().join("shared/site-packages");
    fs_err::create_dir_all(shared.parent().unwrap()).unwrap();
    fs_err::rename(&site, &shared).unwrap();
    fs_err::os::unix::fs::symlink(&shared, &site).unwrap();
    success(
        pip(&python)
            .args(["install", "--quiet"])
            .args(jax.args())
            .arg(HOST),
    );
    let out = output(
        kpack(env)
            .args(["--target", "gfx1100", "pip", "sync", "--python"])
            .arg(&python)
            .arg("--")
            .args(jax.args()),
    );
    assert!(out.status.success(), "{}", crate::common::describe(&out));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let note = format!(
        "{} leads to {}, outside the environment",
        site.display(),
        shared.display()
    );
    assert!(said.contains(&note), "{said}");
    assert_fat_for(&shared, "gfx1100");
    assert_records_match(&shared);
    assert!(fs_err::symlink_metadata(&site).unwrap().is_symlink());
}

/// A device distribution whose archive (a few KiB) lists the nine feature
/// variants of gfx90a for a binary's bundle, each 256 MiB of zeros from one
/// frame, is refused by `pip sync`: an archive nothing declares a size for
/// may decode to 256 times its size, at least 64 MiB. It names the archive
/// and both sizes, the installed binaries stay as they were, and memory
/// grows by less than 64 MiB over a good sync.
#[test]
fn a_materialization_bomb_in_a_device_distribution_is_refused_by_sync() {
    use kpack_test_support::measure::run_watched;
    const MIB: u64 = 1 << 20;
    let (context, jax, python, site) = host_installed();
    let env = &context.env;
    let sync_watched = || {
        let mut command = kpack(env);
        command
            .args(["--target", "gfx90a:xnack-", "pip", "sync", "--python"])
            .arg(&python)
            .arg("--")
            .args(jax.args());
        run_watched(
            &mut command,
            std::time::Duration::from_secs(300),
            1024 * MIB,
        )
    };
    let good = sync_watched();
    assert!(
        good.output.status.success(),
        "{}",
        crate::common::describe(&good.output)
    );
    assert_fat_for(&site, "gfx90a");
    let fat: Vec<Vec<u8>> = SPLIT
        .iter()
        .map(|p| fs_err::read(site.join(p)).unwrap())
        .collect();

    let archive = site.join(format!("{PACKAGE}/.kpack/rocm_gfx90a.kpack"));
    let key = rocm_kpack::Archive::open(&archive)
        .unwrap()
        .binaries()
        .next()
        .unwrap()
        .to_owned();
    let bomb = kpack_test_support::zero_bomb_archive(
        &key,
        &kpack_test_support::GFX90A_VARIANTS,
        256 * MIB,
    );
    fs_err::remove_file(&archive).unwrap();
    fs_err::write(&archive, &bomb).unwrap();

    let run = sync_watched();
    let text = String::from_utf8_lossy(&run.output.stderr).into_owned();
    let growth = run.peak_rss.saturating_sub(good.peak_rss);
    eprintln!(
        "pip sync of a bomb: peak RSS {} MiB ({} MiB over a good sync)",
        run.peak_rss / MIB,
        growth / MIB
    );
    assert_eq!(run.killed, None, "{text}");
    assert!(!run.output.status.success(), "{text}");
    for mention in [
        "rocm_gfx90a.kpack",
        &(9 * 256 * MIB).to_string(),
        &(64 * MIB).to_string(),
    ] {
        assert!(text.contains(mention), "no {mention:?} in {text}");
    }
    assert!(growth < 64 * MIB, "grew {growth} bytes");
    for (path, bytes) in SPLIT.iter().zip(&fat) {
        assert!(
            &fs_err::read(site.join(path)).unwrap() == bytes,
            "{path} changed"
        );
    }
}

/// A host distribution `copies` of sixteen copies of the jax plugin's split
/// `_prng.so` (one marker, so one TOC key), offering `device-gfx90a`, and
/// its device distribution holding `rocm_gfx90a.kpack` beside them: an
/// archive of a few KiB listing one code object of `size` bytes for
/// gfx90a:xnack- under that key. Both installed by pip into a new venv;
/// returns its python and site-packages.
fn copies_installed(env: &Env, copies: usize, size: u64) -> (PathBuf, PathBuf) {
    let jax = Jax::split(env.home.path());
    let prng = &jax.host_files[&format!("{PACKAGE}/_prng.so")];
    let split = match kpack_binary::sniff::sniff(prng, Path::new("_prng.so")).unwrap() {
        kpack_binary::sniff::Sniffed::Split(split) => split,
        _ => panic!("_prng.so is not split"),
    };
    let key = format!("{}#{}", split.marker.kernel_name, split.bundles[0]);
    let links = env.home.path().join("copies-links");
    fs_err::create_dir_all(&links).unwrap();
    let files = (0..copies)
        .map(|index| (format!("{PACKAGE}/copy_{index}.so"), prng.clone()))
        .collect();
    let headers = vec![
        "Provides-Extra: device-gfx90a".to_owned(),
        "Requires-Dist: copies-device-gfx90a==1.0; extra == \"device-gfx90a\"".to_owned(),
    ];
    build_wheel(
        &links,
        &WheelSpec {
            name: "copies".into(),
            version: "1.0".into(),
            headers,
            files,
            ..WheelSpec::default()
        },
    );
    let archive = kpack_test_support::zero_bomb_archive(&key, &["gfx90a:xnack-"], size);
    build_wheel(
        &links,
        &WheelSpec {
            name: "copies-device-gfx90a".into(),
            version: "1.0".into(),
            files: vec![(format!("{PACKAGE}/.kpack/rocm_gfx90a.kpack"), archive)],
            ..WheelSpec::default()
        },
    );
    let python = pip_venv(&env.home.path().join("copies-venv"));
    success(
        pip(&python)
            .args(["install", "--quiet", "--no-index", "--find-links"])
            .arg(&links)
            .args(["copies", "copies-device-gfx90a"]),
    );
    let site = site(&python);
    (python, site)
}

/// `kpack-get --target gfx90a:xnack- pip sync` of `python`'s venv.
fn sync_copies(env: &Env, python: &Path) -> std::process::Output {
    output(
        kpack(env)
            .args(["--target", "gfx90a:xnack-", "pip", "sync", "--python"])
            .arg(python),
    )
}

/// Copies of one split binary sharing a marker materialize one TOC entry
/// each: one budget per distribution. An archive that declares no size may
/// decode to 64 MiB: sixteen copies of a 2 MiB code object (32 MiB) are
/// made fat; sixteen of an 8 MiB one (128 MiB, each alone within the
/// allowance) are refused by name, and no file of the venv changes.
#[test]
fn copies_of_one_split_binary_share_one_budget_in_pip_sync() {
    const MIB: u64 = 1 << 20;
    const COPIES: usize = 16;
    let context = TestContext::new();
    let env = &context.env;
    let (python, site) = copies_installed(env, COPIES, 2 * MIB);
    let out = sync_copies(env, &python);
    assert!(out.status.success(), "{}", crate::common::describe(&out));
    for index in 0..COPIES {
        let path = site.join(format!("{PACKAGE}/copy_{index}.so"));
        assert_eq!(
            fat_processors(&path),
            Some(BTreeSet::from(["gfx90a".to_owned()])),
            "{path:?}"
        );
    }

    let archive = site.join(format!("{PACKAGE}/.kpack/rocm_gfx90a.kpack"));
    let key = rocm_kpack::Archive::open(&archive)
        .unwrap()
        .binaries()
        .next()
        .unwrap()
        .to_owned();
    let larger = kpack_test_support::zero_bomb_archive(&key, &["gfx90a:xnack-"], 8 * MIB);
    fs_err::remove_file(&archive).unwrap();
    fs_err::write(&archive, &larger).unwrap();
    let before = crate::common::snapshot(&site);
    let out = sync_copies(env, &python);
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{text}");
    let needed = (COPIES as u64 * 8 * MIB).to_string();
    for mention in [
        "copies",
        "16 split binaries",
        &needed,
        &(64 * MIB).to_string(),
    ] {
        assert!(text.contains(mention), "no {mention:?} in {text}");
    }
    assert_eq!(crate::common::snapshot(&site), before, "the venv changed");
}

//! Installing rocm-rand from a repository built with `kpack-repo` and
//! served over loopback: GPUs detected every way, the cache, upgrades,
//! dependencies, JSON output (the whole chain down to loading the code
//! object is in the workspace's `tests/`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::gpus::{
    fake_hsa, fake_sysfs, FakeAgent, FakeHsaConfig, FakeNode, CAPABILITY_SRAMECC,
};
use crate::common::{installed_bytes, load_installed, pool, success, ENCODED_ARCHIVE, HOST_TREE};
use kpack_test_support::context::TestContext;

const LIBRARY: &str = "lib/librocrand.so.1.1";

#[test]
fn a_second_install_into_another_prefix_comes_from_the_cache() {
    let context = TestContext::new();
    context.install_for("gfx1030");
    context.server.clear_requests();
    let other = context.home().join("other-prefix");
    let installed = context.run(
        context
            .kpack_get(&["--target", "gfx1030"])
            .arg("--prefix")
            .arg(&other)
            .args(["install", "rocm-rand"]),
    );
    insta::assert_snapshot!(installed);
    let gets = context.pool_gets();
    assert!(gets.is_empty(), "{:?}", context.server.requests());
    assert!(other.join(".kpack/rocrand_gfx1030.kpack").is_file());
}

/// Installs rocm-rand with detection pointed at a fake (`variable` =
/// `value`): only the host tree and the gfx90a archive come, and the
/// library loads its code object for an MI210.
fn installs_gfx90a_detected_through(variable: &str, value: &Path, context: &TestContext) {
    let installed = context.run(
        context
            .kpack_get(&["install", "rocm-rand"])
            .env(variable, value),
    );
    let name = format!("installed_through_{}", variable.to_lowercase());
    insta::assert_snapshot!(name, installed);
    assert_eq!(
        context.pool_gets(),
        [pool(HOST_TREE), pool(ENCODED_ARCHIVE)]
    );
    let library = context.env.prefix.join(LIBRARY);
    load_installed(&library, "gfx90a:sramecc+:xnack-");
}

#[test]
fn installs_for_the_gpu_the_hsa_runtime_reports() {
    let context = TestContext::new();
    let hsa_dir = context.home().join("hsa");
    fs_err::create_dir_all(&hsa_dir).unwrap();
    let library = fake_hsa(
        &hsa_dir,
        &FakeHsaConfig::with_agents(vec![
            FakeAgent::cpu("AMD EPYC 7763"),
            FakeAgent::gpu(
                "gfx90a",
                "AMD Instinct MI210",
                &["amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"],
            ),
        ]),
    );
    installs_gfx90a_detected_through("KPACK_GET_HSA_LIBRARY", &library, &context);
}

#[test]
fn installs_for_the_gpu_the_kernel_topology_lists() {
    let context = TestContext::new();
    let sysfs = context.home().join("sysfs");
    fake_sysfs(
        &sysfs,
        &[
            FakeNode::cpu(),
            FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210"),
        ],
    );
    installs_gfx90a_detected_through("KPACK_GET_SYSFS_ROOT", &sysfs, &context);
}

/// What a dry run prints is `snapshots_cli`'s `dry_run`; here, that it
/// changes nothing.
#[test]
fn dry_run_changes_nothing() {
    let context = TestContext::new();
    let args = ["--target", "gfx1030", "install", "rocm-rand", "--dry-run"];
    success(&mut context.kpack_get(&args));
    assert!(context.pool_gets().is_empty());
    assert!(!context.env.prefix.exists());
}

/// Publishes rocm-rand 5.4.0 in the context's private repository: a new
/// host tree holding `lib/librocrand.so.2`, and `more` artifacts.
fn publish_5_4_0(context: &TestContext, more: &[std::path::PathBuf]) {
    let host = context.home().join("rocm-rand-host");
    fs_err::create_dir_all(host.join("lib")).unwrap();
    fs_err::write(host.join("lib/librocrand.so.2"), b"the next version").unwrap();
    kpack_test_support::run(
        std::process::Command::new(crate::common::kpack_repo_exe())
            .arg("add")
            .arg(&context.repo.dir)
            .args(["rocm-rand", "5.4.0"])
            .arg(&host)
            .args(more)
            .arg("--key")
            .arg(&context.repo.secret_key),
    );
}

#[test]
fn upgrade_installs_the_newer_version_and_drops_files_it_no_longer_has() {
    let context = TestContext::private();
    let repo = &context.repo;
    let work = context.home();
    let run = |args: &[&str]| success(&mut context.kpack_get_local(args));
    run(&["--target", "gfx1030", "install", "rocm-rand"]);
    assert!(context.env.prefix.join(LIBRARY).is_file());

    let archive = work.join("rocrand_gfx1030.kpack");
    fs_err::write(
        &archive,
        installed_bytes(&repo.dir, "rocrand_gfx1030.kpack.zst"),
    )
    .unwrap();
    publish_5_4_0(&context, &[archive]);
    run(&["update"]);
    let transcript = |args: &[&str]| {
        context.transcript(&crate::common::output(&mut context.kpack_get_local(args)))
    };
    let plan = transcript(&["--target", "gfx1030", "upgrade", "--dry-run"]);
    insta::assert_snapshot!("upgrade_dry_run", plan);
    assert!(
        context.env.prefix.join(LIBRARY).is_file(),
        "a dry run changes nothing"
    );
    let upgrade = transcript(&["--target", "gfx1030", "upgrade", "--no-progress"]);
    insta::assert_snapshot!("upgrade", upgrade);
    assert!(!context.env.prefix.join(LIBRARY).exists());
    assert_eq!(
        fs_err::read(context.env.prefix.join("lib/librocrand.so.2")).unwrap(),
        b"the next version"
    );
    assert!(context
        .env
        .prefix
        .join(".kpack/rocrand_gfx1030.kpack")
        .is_file());
    insta::assert_snapshot!("upgrade_then_list", transcript(&["list"]));
    run(&["verify"]);
    let again = transcript(&["--target", "gfx1030", "upgrade"]);
    insta::assert_snapshot!("upgrade_again", again);
}

/// A publisher withdrawing the installed version: `upgrade` keeps it, with a
/// warning saying what the repository offers; `upgrade --allow-downgrade`
/// and `install NAME@=V` downgrade when asked.
#[test]
fn upgrade_never_installs_an_older_version_than_the_installed_one() {
    let context = TestContext::private();
    let repo = &context.repo;
    let index = |dir: &Path| -> toml::Table {
        fs_err::read_to_string(dir.join("index.toml"))
            .unwrap()
            .parse()
            .unwrap()
    };
    let first = index(&repo.dir)["packages"]["rocm-rand"]["sha256"]
        .as_str()
        .unwrap()
        .to_owned();
    let first_shard =
        fs_err::read_to_string(repo.dir.join(format!("packages/rocm-rand/{first}.toml"))).unwrap();
    publish_5_4_0(&context, &[]);
    success(&mut context.kpack_get_local(&["--target", "gfx1030", "install", "rocm-rand"]));
    let installed =
        || fs_err::read_to_string(context.env.prefix.join(".kpack/installed.toml")).unwrap();
    let before = installed();
    assert!(before.contains("version = \"5.4.0\""), "{before}");

    // A newer root whose rocm-rand offers 5.3.3 alone.
    crate::common::hostile::publish_shards(repo, &[("rocm-rand", "5.3.3", first_shard)]);
    success(&mut context.kpack_get_local(&["update"]));
    let run = |args: &[&str]| {
        context.transcript(&crate::common::output(&mut context.kpack_get_local(args)))
    };
    insta::assert_snapshot!(run(&["--target", "gfx1030", "--no-progress", "upgrade"]));
    assert_eq!(installed(), before, "the upgrade changed the prefix");
    assert!(context.env.prefix.join("lib/librocrand.so.2").is_file());

    let asked = run(&[
        "--target",
        "gfx1030",
        "--no-progress",
        "upgrade",
        "--allow-downgrade",
    ]);
    assert!(
        asked.contains("downgraded rocm-rand 5.3.3 (was 5.4.0)"),
        "{asked}"
    );
    assert!(installed().contains("version = \"5.3.3\""));
    assert!(context.env.prefix.join(LIBRARY).is_file());
}

/// A client that has not seen the newer root (another admin, a wiped
/// state, a container with another HOME) against a mirror replaying the
/// older, unexpired root: the prefix's record remembers the root version
/// its packages came from, and an older root is refused for it, for
/// upgrades and installs alike, unless `--allow-rollback` says otherwise.
#[test]
fn a_root_older_than_the_prefix_was_installed_from_is_refused_whatever_the_state_remembers() {
    let context = TestContext::private();
    let repo = &context.repo;
    let old = context.home().join("old-mirror");
    kpack_test_support::chain::copy_dir(&repo.dir, &old);
    publish_5_4_0(&context, &[]);
    success(&mut context.kpack_get_local(&["--target", "gfx1030", "install", "rocm-rand"]));
    let installed =
        || fs_err::read_to_string(context.env.prefix.join(".kpack/installed.toml")).unwrap();
    let before = installed();
    assert!(before.contains("repo_version = "), "{before}");

    fs_err::remove_dir_all(&context.env.state).unwrap();
    let old = old.display().to_string();
    let on_old = |args: &[&str]| {
        let mut command = context.env.with_repo(&old, &repo.public_key, args);
        let out = crate::common::output(&mut command);
        context.transcript(&out).replace(&old, "<OLD>")
    };
    let upgrade = on_old(&["--target", "gfx1030", "--no-progress", "upgrade"]);
    let install = on_old(&[
        "--target",
        "gfx1030",
        "--no-progress",
        "install",
        "rocm-rand@=5.3.3",
    ]);
    insta::assert_snapshot!(format!("{upgrade}\n{install}"));
    assert_eq!(installed(), before, "a refused root changed the prefix");

    let allowed = on_old(&[
        "--target",
        "gfx1030",
        "--no-progress",
        "--allow-rollback",
        "install",
        "rocm-rand@=5.3.3",
    ]);
    assert!(allowed.contains("exit: 0"), "{allowed}");
    assert!(
        allowed.contains("accepted anyway (--allow-rollback)"),
        "{allowed}"
    );
    assert!(installed().contains("version = \"5.3.3\""));
    assert!(context.env.prefix.join(LIBRARY).is_file());
}

#[test]
fn json_output_describes_the_plan_and_the_gpus() {
    let context = TestContext::new();
    let stdout = success(&mut context.kpack_get(&[
        "--json",
        "--target",
        "gfx1030",
        "install",
        "rocm-rand",
        "--dry-run",
    ]));
    let plan: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(plan["gpus"], serde_json::json!(["gfx1030"]));
    let artifacts = plan["packages"][0]["artifacts"].as_array().unwrap();
    let paths: Vec<&str> = artifacts
        .iter()
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, [pool(HOST_TREE), pool("rocrand_gfx1030.kpack.zst")]);
    let size: u64 = artifacts.iter().map(|a| a["size"].as_u64().unwrap()).sum();
    assert_eq!(plan["size"].as_u64(), Some(size));
    assert!(plan["full_size"].as_u64().unwrap() > size);

    let sysfs = context.home().join("sysfs");
    fake_sysfs(
        &sysfs,
        &[
            FakeNode::cpu(),
            FakeNode::gpu(110000, 0, "Radeon RX 7900 XTX"),
        ],
    );
    let stdout = success(
        context
            .kpack_get(&["--json", "detect"])
            .env("KPACK_GET_SYSFS_ROOT", &sysfs),
    );
    let detected: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(detected["gpus"][0]["target"], "gfx1100");
    assert_eq!(detected["gpus"][0]["source"], "sysfs");
    assert_eq!(detected["gpus"][0]["product"], "Radeon RX 7900 XTX");
    // rocm-rand has no gfx1100 code: detect says so rather than failing.
    assert_eq!(
        detected["selections"][0]["artifacts"],
        serde_json::json!([])
    );
    assert_eq!(
        detected["selections"][0]["no_device_code"],
        serde_json::json!(["gfx1100"])
    );
}

#[test]
fn detect_names_each_source_once_and_every_gpu_a_package_does_not_serve() {
    let context = TestContext::new();
    let stdout = success(&mut context.kpack_get(&["--target", "gfx1030", "detect"]));
    let gpu_line = stdout
        .lines()
        .find(|l| l.starts_with("0 "))
        .unwrap_or_else(|| panic!("a line for GPU 0:\n{stdout}"));
    assert_eq!(
        gpu_line.split_whitespace().collect::<Vec<_>>(),
        ["0", "-", "gfx1030", "-", "override"],
        "{stdout}"
    );

    // An MI210 rocm-rand has code for, and an RX 7900 XTX it has none for.
    let sysfs = context.home().join("sysfs");
    fake_sysfs(
        &sysfs,
        &[
            FakeNode::cpu(),
            FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210"),
            FakeNode::gpu(110000, 0, "Radeon RX 7900 XTX"),
        ],
    );
    let detected = context.run(
        context
            .kpack_get(&["detect"])
            .env("KPACK_GET_SYSFS_ROOT", &sysfs),
    );
    insta::assert_snapshot!("detect_from_sysfs", detected);
    let stdout = success(
        context
            .kpack_get(&["--json", "detect"])
            .env("KPACK_GET_SYSFS_ROOT", &sysfs),
    );
    let detected: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        detected["selections"][0]["no_device_code"],
        serde_json::json!(["gfx1100"])
    );
    assert_eq!(
        detected["selections"][0]["artifacts"],
        serde_json::json!([pool(ENCODED_ARCHIVE)])
    );
}

/// Publishes a host-only package version from a directory holding `file`.
fn publish_host_only(
    repo: &crate::common::RocrandRepo,
    name: &str,
    version: &str,
    depends: &[&str],
) {
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join(format!("{name}-host"));
    fs_err::create_dir_all(tree.join("share").join(name)).unwrap();
    fs_err::write(tree.join("share").join(name).join("VERSION"), version).unwrap();
    let mut command = std::process::Command::new(crate::common::kpack_repo_exe());
    command
        .arg("add")
        .arg(&repo.dir)
        .args([name, version])
        .arg(&tree)
        .arg("--key")
        .arg(&repo.secret_key);
    for dependency in depends {
        command.args(["--depends", dependency]);
    }
    kpack_test_support::run(&mut command);
}

#[test]
fn info_lists_versions_in_semver_order() {
    let context = TestContext::private();
    let repo = &context.repo;
    for version in ["5.10.0", "5.9.0", "10.0.0", "5.9.1"] {
        publish_host_only(repo, "rocm-core", version, &[]);
    }
    let mut info = context.kpack_get_local(&["--target", "gfx1030", "info", "rocm-core"]);
    insta::assert_snapshot!(context.run(&mut info));
    let stdout = success(&mut context.kpack_get_local(&[
        "--target",
        "gfx1030",
        "--json",
        "info",
        "rocm-core",
    ]));
    let info: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        info["versions"],
        serde_json::json!(["5.9.0", "5.9.1", "5.10.0", "10.0.0"])
    );
}

#[test]
fn dependencies_resolve_to_the_highest_version_every_requirement_allows() {
    let context = TestContext::private();
    let repo = &context.repo;
    publish_host_only(repo, "rocm-core", "5.3.0", &[]);
    publish_host_only(repo, "rocm-core", "5.7.1", &[]);
    publish_host_only(repo, "rocm-core", "6.0.0", &[]);
    publish_host_only(repo, "rocm-app", "1.0.0", &["rocm-core >=5.3, <6"]);
    let installed =
        context.run(&mut context.kpack_get_local(&["--target", "gfx1030", "install", "rocm-app"]));
    insta::assert_snapshot!("highest_allowed_installed", installed);
    assert_eq!(
        fs_err::read_to_string(context.env.prefix.join("share/rocm-core/VERSION")).unwrap(),
        "5.7.1"
    );

    // Asking for rocm-core 6 as well cannot be met: the error names both.
    let out = crate::common::output(&mut context.kpack_get_local(&[
        "--target",
        "gfx1030",
        "install",
        "rocm-app",
        "rocm-core@>=6",
    ]));
    insta::assert_snapshot!(context.transcript(&out));
}

#[test]
fn a_damaged_cached_archive_is_fetched_again_not_installed() {
    let context = TestContext::new();
    context.install_for("gfx1030");
    // Installed archives share their bytes with the cache: damaging one in
    // a prefix (root may write read-only files) damages the cached copy.
    let installed = context.env.prefix.join(".kpack/rocrand_gfx1030.kpack");
    let mut bytes = fs_err::read(&installed).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    fs_err::write(&installed, &bytes).unwrap();
    context.server.clear_requests();
    let other = context.home().join("other-prefix");
    success(
        context
            .kpack_get(&["--target", "gfx1030"])
            .arg("--prefix")
            .arg(&other)
            .args(["install", "rocm-rand"]),
    );
    assert_eq!(context.pool_gets(), [pool("rocrand_gfx1030.kpack.zst")]);
    assert_eq!(
        fs_err::read(other.join(".kpack/rocrand_gfx1030.kpack")).unwrap(),
        installed_bytes(&context.repo.dir, "rocrand_gfx1030.kpack.zst")
    );
    success(
        context
            .env
            .command()
            .arg("--prefix")
            .arg(&other)
            .arg("verify"),
    );
}

/// Files deleted or changed in the prefix: `install` finds the package
/// installed as planned and does nothing; `install --reinstall` writes it
/// anew from the cache, and `verify` passes again.
#[test]
fn reinstall_writes_deleted_and_changed_files_again() {
    let context = TestContext::new();
    context.install_for("gfx1030");
    let prefix = &context.env.prefix;
    let archive = prefix.join(".kpack/rocrand_gfx1030.kpack");
    let library = prefix.join(LIBRARY);
    let original = fs_err::read(&library).unwrap();
    fs_err::remove_file(&archive).unwrap();
    fs_err::write(&library, b"changed").unwrap();
    let args = ["--target", "gfx1030", "install", "rocm-rand"];
    let again = success(&mut context.kpack_get(&args));
    assert!(again.contains("nothing to do"), "{again}");
    assert!(!archive.exists());
    context.server.clear_requests();
    let reinstalled = context.run(&mut context.kpack_get(&[
        "--target",
        "gfx1030",
        "install",
        "--reinstall",
        "rocm-rand",
    ]));
    insta::assert_snapshot!(reinstalled);
    assert!(context.pool_gets().is_empty(), "all from the cache");
    assert!(archive.is_file());
    assert_eq!(fs_err::read(&library).unwrap(), original);
    success(context.env.command().arg("verify"));
}

/// Shards of `count` host-only packages `pkg-NNNNN` 1.0.0, each depending
/// on the packages `depends(i)` names.
fn graph_shards(count: usize, depends: impl Fn(usize) -> Vec<usize>) -> Vec<(String, String)> {
    (0..count)
        .map(|i| {
            let name = format!("pkg-{i:05}");
            let depends: Vec<String> = depends(i)
                .into_iter()
                .map(|d| format!("\"pkg-{d:05} >=1\""))
                .collect();
            let text = format!(
                "name = {name:?}\n\n[[versions]]\nversion = \"1.0.0\"\ndepends = [{}]\n",
                depends.join(", ")
            );
            (name, text)
        })
        .collect()
}

/// `install --dry-run pkg-00000` in a repository of `shards`: the packages
/// the plan lists, and how many times the server was asked for each shard.
fn dry_run_plan(shards: Vec<(String, String)>) -> (usize, BTreeMap<String, usize>) {
    let context = TestContext::private();
    let listed: Vec<(&str, &str, String)> = shards
        .iter()
        .map(|(name, text)| (name.as_str(), "1.0.0", text.clone()))
        .collect();
    crate::common::hostile::publish_shards(&context.repo, &listed);
    context.server.clear_requests();
    let stdout = success(&mut context.kpack_get(&[
        "--target",
        "gfx1030",
        "--json",
        "install",
        "--dry-run",
        "pkg-00000",
    ]));
    let plan: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let mut asked: BTreeMap<String, usize> = BTreeMap::new();
    for request in context.server.requests() {
        if let Some(shard) = request.path.strip_prefix("packages/") {
            *asked.entry(shard.to_owned()).or_default() += 1;
        }
    }
    (plan["packages"].as_array().unwrap().len(), asked)
}

/// A chain of 800 packages plans, each shard fetched once and resolution
/// going on from where it was (how fast is `benches/plan.sh`'s to say).
#[test]
fn a_chain_of_800_dependencies_plans_fetching_each_shard_once() {
    let shards = graph_shards(800, |i| if i + 1 < 800 { vec![i + 1] } else { vec![] });
    let (packages, asked) = dry_run_plan(shards);
    assert_eq!(packages, 800);
    assert_eq!(asked.len(), 800);
    assert!(asked.values().all(|&n| n == 1), "{asked:?}");
}

/// A package depending on 2,000 others plans, each shard fetched once.
#[test]
fn a_fan_out_of_2000_dependencies_plans_fetching_each_shard_once() {
    let shards = graph_shards(2001, |i| if i == 0 { (1..=2000).collect() } else { vec![] });
    let (packages, asked) = dry_run_plan(shards);
    assert_eq!(packages, 2001);
    assert_eq!(asked.len(), 2001);
    assert!(asked.values().all(|&n| n == 1), "{asked:?}");
}

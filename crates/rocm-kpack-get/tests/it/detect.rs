//! GPU detection through the library API, against a fake HSA runtime and
//! fake kfd topologies.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::gpus::{
    capability_asic_revision, fake_hsa, fake_hsa_calls, fake_sysfs, make_node_unreadable,
    FakeAgent, FakeHsaConfig, FakeNode, CAPABILITY_SRAMECC, HSA_PID_NAME,
};
use kpack_gpu::Target;
use rocm_kpack_get::detect::hsa::{self, HsaAgent, HsaError};
use rocm_kpack_get::detect::sysfs::{self, SysfsGpu};
use rocm_kpack_get::detect::{detect, DetectOptions, GpuSource};
use tempfile::TempDir;

const MI210_ISA: &str = "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-";
const GFX9_4_GENERIC_ISA: &str = "amdgcn-amd-amdhsa--gfx9-4-generic:sramecc+:xnack-";
const MI300X_ISA: &str = "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-";
const RX7900_ISA: &str = "amdgcn-amd-amdhsa--gfx1100";
const GFX11_GENERIC_ISA: &str = "amdgcn-amd-amdhsa--gfx11-generic";

fn kpack_get() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kpack-get"))
}

fn target(id: &str) -> Target {
    Target::parse(id).unwrap()
}

fn agent(index: u32, name: &str, product: Option<&str>, isa: &str) -> HsaAgent {
    HsaAgent {
        index,
        name: name.to_owned(),
        product: product.map(str::to_owned),
        isa: isa.to_owned(),
    }
}

fn mi210_and_cpu() -> FakeHsaConfig {
    FakeHsaConfig::with_agents(vec![
        FakeAgent::cpu("AMD EPYC 7763"),
        FakeAgent::gpu("gfx90a", "AMD Instinct MI210", &[MI210_ISA]),
    ])
}

/// Options that consult only what the test set up.
fn options(hsa_library: Option<&Path>, sysfs_root: &Path) -> DetectOptions {
    let mut options = DetectOptions::new(kpack_get());
    options.hsa_library = hsa_library.map(Path::to_owned);
    options.hsa_timeout = Duration::from_secs(20);
    options.sysfs_root = sysfs_root.to_owned();
    options.pci_ids = Vec::new();
    options.gfx_version_overrides.clear();
    options.hsa_xnack = false;
    options.gfx12_strict = None;
    options.visible_devices.clear();
    options
}

// HSA, in this process.

#[test]
fn hsa_keeps_gpu_agents_and_leaves_out_cpus() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(dir.path(), &mi210_and_cpu());

    let agents = hsa::probe_in_process(Some(&library)).unwrap();

    assert_eq!(
        agents,
        vec![agent(0, "gfx90a", Some("AMD Instinct MI210"), MI210_ISA)]
    );
    assert_eq!(fake_hsa_calls(dir.path()), ["hsa_init", "hsa_shut_down"]);
}

#[test]
fn hsa_reports_live_xnack_mode_and_skips_generic_isa() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        dir.path(),
        &FakeHsaConfig::with_agents(vec![FakeAgent::gpu(
            "gfx942",
            "AMD Instinct MI300X",
            &[
                GFX9_4_GENERIC_ISA,
                "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack+",
            ],
        )]),
    );

    let agents = hsa::probe_in_process(Some(&library)).unwrap();

    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0].isa, "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack+");
    let target = target(&agents[0].isa);
    assert_eq!(target.feature("xnack"), Some(true));
    assert!(!target.is_generic());
}

#[test]
fn hsa_takes_the_first_specific_isa_when_generic_comes_after() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        dir.path(),
        &FakeHsaConfig::with_agents(vec![FakeAgent::gpu(
            "gfx1100",
            "Radeon RX 7900 XTX",
            &[RX7900_ISA, GFX11_GENERIC_ISA],
        )]),
    );

    let agents = hsa::probe_in_process(Some(&library)).unwrap();

    assert_eq!(
        agents,
        vec![agent(0, "gfx1100", Some("Radeon RX 7900 XTX"), RX7900_ISA)]
    );
}

#[test]
fn hsa_numbers_gpus_in_agent_order_without_cpus() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        dir.path(),
        &FakeHsaConfig::with_agents(vec![
            FakeAgent::cpu("AMD EPYC 9654"),
            FakeAgent::gpu(
                "gfx942",
                "AMD Instinct MI300X",
                &[MI300X_ISA, GFX9_4_GENERIC_ISA],
            ),
            FakeAgent::cpu("AMD EPYC 9654"),
            FakeAgent::gpu(
                "gfx1100",
                "Radeon RX 7900 XTX",
                &[GFX11_GENERIC_ISA, RX7900_ISA],
            ),
        ]),
    );

    let agents = hsa::probe_in_process(Some(&library)).unwrap();

    assert_eq!(
        agents,
        vec![
            agent(0, "gfx942", Some("AMD Instinct MI300X"), MI300X_ISA),
            agent(1, "gfx1100", Some("Radeon RX 7900 XTX"), RX7900_ISA),
        ]
    );
}

#[test]
fn hsa_gpu_without_product_name_has_none() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        dir.path(),
        &FakeHsaConfig::with_agents(vec![FakeAgent::gpu("gfx90a", "", &[MI210_ISA])]),
    );

    let agents = hsa::probe_in_process(Some(&library)).unwrap();

    assert_eq!(agents, vec![agent(0, "gfx90a", None, MI210_ISA)]);
}

#[test]
fn hsa_with_only_cpu_agents_reports_no_gpus() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        dir.path(),
        &FakeHsaConfig::with_agents(vec![FakeAgent::cpu("AMD Ryzen 9 7950X")]),
    );

    assert_eq!(hsa::probe_in_process(Some(&library)).unwrap(), []);
}

#[test]
fn hsa_init_failure_names_the_status_and_its_meaning() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        dir.path(),
        &FakeHsaConfig {
            init_status: 0x1008,
            ..mi210_and_cpu()
        },
    );

    let error = hsa::probe_in_process(Some(&library)).unwrap_err();

    assert!(
        matches!(error, HsaError::InitFailed { status: 0x1008, .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.starts_with("hsa_init failed: 0x1008 (HSA_STATUS_ERROR_OUT_OF_RESOURCES: "),
        "{message}"
    );
    // Nothing to shut down after a failed init.
    assert_eq!(fake_hsa_calls(dir.path()), ["hsa_init"]);
}

#[test]
fn hsa_agent_iteration_error_is_reported_and_hsa_shut_down() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        dir.path(),
        &FakeHsaConfig {
            agent_callback_error: true,
            ..mi210_and_cpu()
        },
    );

    let error = hsa::probe_in_process(Some(&library)).unwrap_err();

    assert_eq!(
        error.to_string(),
        "hsa_iterate_agents failed: 0x1000 (HSA_STATUS_ERROR: A generic error has occurred.)"
    );
    assert_eq!(fake_hsa_calls(dir.path()), ["hsa_init", "hsa_shut_down"]);
}

#[test]
fn hsa_library_that_cannot_be_loaded_is_named_with_the_loader_message() {
    let dir = TempDir::new().unwrap();
    let library = dir.path().join("libhsa-runtime64.so.1");

    let error = hsa::probe_in_process(Some(&library)).unwrap_err();

    let HsaError::Open { path, message } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(path, &library);
    assert!(message.contains("No such file"), "{message}");
    assert!(
        error
            .to_string()
            .starts_with(&format!("cannot load {}: ", library.display())),
        "{error}"
    );
}

#[test]
fn hsa_library_without_the_hsa_functions_names_the_missing_one() {
    let dir = TempDir::new().unwrap();
    let source = dir.path().join("empty.c");
    fs_err::write(&source, "int not_hsa = 1;\n").unwrap();
    let library = dir.path().join("libhsa-runtime64.so.1");
    let status = kpack_test_support::tool("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .unwrap();
    assert!(status.success());

    let error = hsa::probe_in_process(Some(&library)).unwrap_err();

    assert!(
        matches!(&error, HsaError::MissingSymbol { symbol, .. } if symbol == "hsa_init"),
        "{error:?}"
    );
}

// HSA in a child process (the `kpack-get hsa-probe` subcommand).

#[test]
fn probe_runs_hsa_in_a_child_and_reads_its_answer() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(dir.path(), &mi210_and_cpu());

    let agents = hsa::probe(&kpack_get(), Some(&library), Duration::from_secs(20)).unwrap();

    assert_eq!(
        agents,
        vec![agent(0, "gfx90a", Some("AMD Instinct MI210"), MI210_ISA)]
    );
}

#[test]
fn probe_passes_on_the_childs_init_failure() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        dir.path(),
        &FakeHsaConfig {
            init_status: 0x1008,
            ..mi210_and_cpu()
        },
    );

    let error = hsa::probe(&kpack_get(), Some(&library), Duration::from_secs(20)).unwrap_err();

    assert!(
        matches!(error, HsaError::InitFailed { status: 0x1008, .. }),
        "{error:?}"
    );
}

#[test]
fn probe_kills_a_hanging_hsa_after_the_timeout() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        dir.path(),
        &FakeHsaConfig {
            hang_in_init: true,
            ..mi210_and_cpu()
        },
    );
    let timeout = Duration::from_secs(2);

    let error = hsa::probe(&kpack_get(), Some(&library), timeout).unwrap_err();

    assert!(matches!(error, HsaError::TimedOut { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "the HSA probe did not answer within 2 s and was killed (HSA initialisation hung)"
    );
    // The child got as far as hsa_init, and is gone.
    let pid: i32 = fs_err::read_to_string(dir.path().join(HSA_PID_NAME))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: signal 0 only asks whether the process exists.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    assert!(!alive, "probe child {pid} still running");
}

#[test]
fn probe_that_cannot_start_says_so() {
    let dir = TempDir::new().unwrap();
    let missing = dir.path().join("no-such-kpack-get");

    let error = hsa::probe(&missing, None, Duration::from_secs(20)).unwrap_err();

    assert!(matches!(error, HsaError::Spawn { .. }), "{error:?}");
}

// sysfs.

#[test]
fn sysfs_cpu_only_topology_has_no_gpus() {
    let dir = TempDir::new().unwrap();
    let root = fake_sysfs(dir.path(), &[FakeNode::cpu()]);

    let (gpus, notes) = sysfs::read_topology(&root, false);

    assert_eq!(gpus, []);
    assert_eq!(notes, Vec::<String>::new());
}

#[test]
fn sysfs_dgpu_with_sram_ecc_gets_sramecc_on() {
    let dir = TempDir::new().unwrap();
    let root = fake_sysfs(
        dir.path(),
        &[
            FakeNode::cpu(),
            FakeNode::gpu(90010, 0x2000_0000 | CAPABILITY_SRAMECC, "MI210"),
        ],
    );

    let (gpus, notes) = sysfs::read_topology(&root, false);

    assert_eq!(
        gpus,
        [SysfsGpu {
            node: 1,
            gfx_target_version: 90010,
            asic_revision: 0,
            target: target("gfx90a:sramecc+:xnack-"),
            product: Some("MI210".to_owned()),
            sramecc: true,
            pci_device: Some(0x740f),
        }]
    );
    assert_eq!(notes, Vec::<String>::new());
}

#[test]
fn sysfs_sramecc_off_is_said_only_for_processors_with_the_feature() {
    let dir = TempDir::new().unwrap();
    let root = fake_sysfs(
        dir.path(),
        &[
            FakeNode::cpu(),
            FakeNode::gpu(90006, 0, "Radeon VII"),
            FakeNode::gpu(100300, 0, "Radeon RX 6800"),
        ],
    );

    let (gpus, _) = sysfs::read_topology(&root, false);

    let targets: Vec<String> = gpus.iter().map(|gpu| gpu.target.to_string()).collect();
    assert_eq!(targets, ["gfx906:sramecc-:xnack-", "gfx1030"]);
}

#[test]
fn sysfs_apu_and_dgpu_are_both_listed_in_node_order() {
    let dir = TempDir::new().unwrap();
    let root = fake_sysfs(
        dir.path(),
        &[
            FakeNode::cpu(),
            FakeNode::gpu(110501, 0, "Radeon 8060S"),
            FakeNode::gpu(110000, CAPABILITY_SRAMECC, "Radeon RX 7900 XTX"),
        ],
    );

    let (gpus, notes) = sysfs::read_topology(&root, false);

    let found: Vec<(u32, String, Option<String>)> = gpus
        .iter()
        .map(|gpu| (gpu.node, gpu.target.to_string(), gpu.product.clone()))
        .collect();
    assert_eq!(
        found,
        [
            (1, "gfx1151".to_owned(), Some("Radeon 8060S".to_owned())),
            (
                2,
                "gfx1100".to_owned(),
                Some("Radeon RX 7900 XTX".to_owned())
            ),
        ]
    );
    assert_eq!(notes, Vec::<String>::new());
}

#[test]
fn sysfs_unreadable_node_is_skipped_with_a_note() {
    let dir = TempDir::new().unwrap();
    let root = fake_sysfs(
        dir.path(),
        &[
            FakeNode::cpu(),
            FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210"),
            FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210"),
        ],
    );
    make_node_unreadable(&root, 1);

    let (gpus, notes) = sysfs::read_topology(&root, false);

    assert_eq!(gpus.iter().map(|gpu| gpu.node).collect::<Vec<_>>(), [2]);
    let properties = root.join("1/properties");
    assert_eq!(
        notes,
        [format!(
            "sysfs: node 1 skipped: failed to read from file `{}`: Is a directory",
            properties.display()
        )]
    );
}

#[test]
fn sysfs_nodes_sort_numerically_and_other_entries_are_ignored() {
    let dir = TempDir::new().unwrap();
    let nodes: Vec<FakeNode> = (0..11)
        .map(|i| FakeNode::gpu(110000 + i, 0, &format!("gpu {i}")))
        .collect();
    let root = fake_sysfs(dir.path(), &nodes);
    fs_err::create_dir(root.join("README")).unwrap();

    let (gpus, notes) = sysfs::read_topology(&root, false);

    assert_eq!(
        gpus.iter().map(|gpu| gpu.node).collect::<Vec<_>>(),
        (0..11).collect::<Vec<_>>()
    );
    assert_eq!(gpus[10].target, target("gfx110a"));
    assert_eq!(notes, Vec::<String>::new());
}

#[test]
fn sysfs_missing_root_gives_no_gpus() {
    let dir = TempDir::new().unwrap();
    let root = dir.path().join("nodes");

    let (gpus, notes) = sysfs::read_topology(&root, false);

    assert_eq!(gpus, []);
    assert_eq!(
        notes,
        [format!(
            "sysfs: {} does not exist (the amdgpu kernel driver is not loaded)",
            root.display()
        )]
    );
}

// Merged detection.

#[test]
fn detect_overrides_replace_every_other_source() {
    let dir = TempDir::new().unwrap();
    let root = fake_sysfs(
        &dir.path().join("nodes"),
        &[FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210")],
    );
    let mut options = options(None, &root);
    options.probe_exe = dir.path().join("not-run");
    options.overrides = vec![target("gfx1100"), target("gfx942:xnack-")];

    let detection = detect(&options);

    let found: Vec<(String, GpuSource, &str)> = detection
        .gpus
        .iter()
        .map(|gpu| (gpu.target.to_string(), gpu.source, gpu.id.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("gfx1100".to_owned(), GpuSource::Override, "override"),
            ("gfx942:xnack-".to_owned(), GpuSource::Override, "override"),
        ]
    );
    assert_eq!(detection.notes, Vec::<String>::new());
}

#[test]
fn detect_without_hsa_uses_sysfs() {
    let dir = TempDir::new().unwrap();
    let root = fake_sysfs(
        dir.path(),
        &[
            FakeNode::cpu(),
            FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210"),
            FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210"),
        ],
    );
    let mut options = options(None, &root);
    options.hsa_enabled = false;

    let detection = detect(&options);

    let found: Vec<(String, GpuSource, &str)> = detection
        .gpus
        .iter()
        .map(|gpu| (gpu.target.to_string(), gpu.source, gpu.id.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (
                "gfx90a:sramecc+:xnack-".to_owned(),
                GpuSource::Sysfs,
                "sysfs node 1"
            ),
            (
                "gfx90a:sramecc+:xnack-".to_owned(),
                GpuSource::Sysfs,
                "sysfs node 2"
            ),
        ]
    );
    assert_eq!(detection.targets(), [target("gfx90a:sramecc+:xnack-")]);
    assert_eq!(detection.notes, ["hsa: not consulted (disabled)"]);
}

#[test]
fn detect_falls_back_to_sysfs_when_the_probe_cannot_start() {
    let dir = TempDir::new().unwrap();
    let root = fake_sysfs(
        &dir.path().join("nodes"),
        &[
            FakeNode::cpu(),
            FakeNode::gpu(110000, 0, "Radeon RX 7900 XTX"),
        ],
    );
    let mut options = options(None, &root);
    options.probe_exe = dir.path().join("no-such-kpack-get");

    let detection = detect(&options);

    assert_eq!(detection.targets(), [target("gfx1100")]);
    assert_eq!(detection.notes.len(), 1, "{:?}", detection.notes);
    assert!(
        detection.notes[0].starts_with("hsa: cannot start the HSA probe "),
        "{:?}",
        detection.notes
    );
}

#[test]
fn detect_with_nothing_found_says_why_for_each_source() {
    let dir = TempDir::new().unwrap();
    let root = fake_sysfs(&dir.path().join("nodes"), &[FakeNode::cpu()]);
    let mut options = options(None, &root);
    options.hsa_enabled = false;

    let detection = detect(&options);

    assert!(detection.gpus.is_empty());
    assert_eq!(
        detection.notes,
        [
            "hsa: not consulted (disabled)".to_owned(),
            format!("sysfs: no GPU nodes under {}", root.display()),
        ]
    );
}

#[test]
fn detect_serialises_targets_as_their_ids() {
    let dir = TempDir::new().unwrap();
    let root = fake_sysfs(
        dir.path(),
        &[FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210")],
    );
    let mut options = options(None, &root);
    options.hsa_enabled = false;

    let detection = detect(&options);

    assert_eq!(
        serde_json::to_value(&detection.gpus).unwrap(),
        serde_json::json!([{
            "target": "gfx90a:sramecc+:xnack-",
            "product": "MI210",
            "source": "sysfs",
            "id": "sysfs node 0",
            "integrated": false,
            "node": 0,
        }])
    );
}

// Merged detection with HSA in a child process (needs `kpack-get hsa-probe`).

#[test]
fn detect_prefers_hsa_modes_and_takes_missing_products_from_sysfs() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        &dir.path().join("hsa"),
        &FakeHsaConfig::with_agents(vec![
            FakeAgent::cpu("AMD EPYC 7763"),
            FakeAgent::gpu("gfx90a", "", &[MI210_ISA]),
            FakeAgent::gpu("gfx1100", "Radeon RX 7900 XTX", &[RX7900_ISA]),
        ]),
    );
    let root = fake_sysfs(
        &dir.path().join("nodes"),
        &[
            FakeNode::cpu(),
            FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210"),
            FakeNode::gpu(110000, 0, "Navi 31"),
        ],
    );

    let detection = detect(&options(Some(&library), &root));

    let found: Vec<(String, Option<&str>, GpuSource, &str)> = detection
        .gpus
        .iter()
        .map(|gpu| {
            (
                gpu.target.to_string(),
                gpu.product.as_deref(),
                gpu.source,
                gpu.id.as_str(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "gfx90a:sramecc+:xnack-".to_owned(),
                Some("MI210"),
                GpuSource::Hsa,
                "hsa agent 0"
            ),
            (
                "gfx1100".to_owned(),
                Some("Radeon RX 7900 XTX"),
                GpuSource::Hsa,
                "hsa agent 1"
            ),
        ]
    );
    assert_eq!(detection.notes, Vec::<String>::new());
}

#[test]
fn detect_falls_back_to_sysfs_when_hsa_init_fails() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        &dir.path().join("hsa"),
        &FakeHsaConfig {
            init_status: 0x1008,
            ..mi210_and_cpu()
        },
    );
    let root = fake_sysfs(
        &dir.path().join("nodes"),
        &[
            FakeNode::cpu(),
            FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210"),
        ],
    );

    let detection = detect(&options(Some(&library), &root));

    assert_eq!(detection.targets(), [target("gfx90a:sramecc+:xnack-")]);
    assert_eq!(detection.gpus[0].source, GpuSource::Sysfs);
    assert_eq!(detection.notes.len(), 1, "{:?}", detection.notes);
    assert!(
        detection.notes[0]
            .starts_with("hsa: hsa_init failed: 0x1008 (HSA_STATUS_ERROR_OUT_OF_RESOURCES: "),
        "{:?}",
        detection.notes
    );
}

#[test]
fn detect_notes_gpus_hsa_does_not_see() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        &dir.path().join("hsa"),
        &FakeHsaConfig::with_agents(vec![FakeAgent::gpu(
            "gfx90a",
            "AMD Instinct MI210",
            &[MI210_ISA],
        )]),
    );
    let root = fake_sysfs(
        &dir.path().join("nodes"),
        &[
            FakeNode::cpu(),
            FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210"),
            FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210"),
        ],
    );

    let detection = detect(&options(Some(&library), &root));

    assert_eq!(detection.gpus.len(), 1);
    assert_eq!(detection.notes.len(), 1, "{:?}", detection.notes);
    assert!(
        detection.notes[0].starts_with("hsa: sees 1 of the 2 GPUs the kernel driver lists"),
        "{:?}",
        detection.notes
    );
}

#[test]
fn detect_falls_back_to_sysfs_when_hsa_hangs() {
    let dir = TempDir::new().unwrap();
    let library = fake_hsa(
        &dir.path().join("hsa"),
        &FakeHsaConfig {
            hang_in_init: true,
            ..mi210_and_cpu()
        },
    );
    let root = fake_sysfs(
        &dir.path().join("nodes"),
        &[FakeNode::gpu(90010, CAPABILITY_SRAMECC, "MI210")],
    );
    let mut options = options(Some(&library), &root);
    options.hsa_timeout = Duration::from_secs(2);

    let detection = detect(&options);

    assert_eq!(detection.targets(), [target("gfx90a:sramecc+:xnack-")]);
    assert_eq!(
        detection.notes,
        ["hsa: the HSA probe did not answer within 2 s and was killed (HSA initialisation hung)"]
    );
}

// HSA_OVERRIDE_GFX_VERSION on GPUs read from sysfs, and product names from
// pci.ids.

/// An RX 6700 XT (gfx1031) and a 780M iGPU (gfx1103) behind a CPU node.
fn rx6700xt_and_780m(root: &Path) -> PathBuf {
    fake_sysfs(
        root,
        &[
            FakeNode::cpu(),
            FakeNode::gpu(100301, 0, "ip discovery"),
            FakeNode::gpu(110003, 0, "ip discovery"),
        ],
    )
}

#[test]
fn sysfs_gpus_run_as_hsa_override_gfx_version_says_per_node_first() {
    let dir = TempDir::new().unwrap();
    let mut options = options(None, &rx6700xt_and_780m(dir.path()));
    options.hsa_enabled = false;
    options.gfx_version_overrides = [
        ("HSA_OVERRIDE_GFX_VERSION".to_owned(), "10.3.0".to_owned()),
        ("HSA_OVERRIDE_GFX_VERSION_2".to_owned(), "11.0.0".to_owned()),
    ]
    .into();

    let detection = detect(&options);

    assert_eq!(detection.targets(), [target("gfx1030"), target("gfx1100")]);
    assert_eq!(detection.warnings, Vec::<String>::new());
    assert_eq!(
        serde_json::to_value(&detection.gpus).unwrap(),
        serde_json::json!([
            {
                "target": "gfx1030",
                "product": "RX 6700 / XT",
                "source": "sysfs",
                "id": "sysfs node 1",
                "integrated": false,
                "node": 1,
                "overridden": {
                    "chip": "gfx1031",
                    "variable": "HSA_OVERRIDE_GFX_VERSION",
                    "value": "10.3.0",
                },
            },
            {
                "target": "gfx1100",
                "product": "Radeon 780M iGPU",
                "source": "sysfs",
                "id": "sysfs node 2",
                "integrated": true,
                "node": 2,
                "overridden": {
                    "chip": "gfx1103",
                    "variable": "HSA_OVERRIDE_GFX_VERSION_2",
                    "value": "11.0.0",
                },
            },
        ])
    );
}

#[test]
fn hsa_override_gfx_version_keeps_the_modes_sysfs_knows() {
    let dir = TempDir::new().unwrap();
    let root = fake_sysfs(
        dir.path(),
        &[
            FakeNode::cpu(),
            FakeNode::gpu(90008, CAPABILITY_SRAMECC, ""),
        ],
    );
    let mut options = options(None, &root);
    options.hsa_enabled = false;
    options.gfx_version_overrides =
        [("HSA_OVERRIDE_GFX_VERSION_1".to_owned(), "9.0.10".to_owned())].into();

    let detection = detect(&options);

    assert_eq!(detection.targets(), [target("gfx90a:sramecc+:xnack-")]);
    let chip = &detection.gpus[0].overridden.as_ref().unwrap().chip;
    assert_eq!(chip, &target("gfx908:sramecc+:xnack-"));
}

#[test]
fn a_malformed_hsa_override_gfx_version_is_a_warning_naming_it() {
    let dir = TempDir::new().unwrap();
    let mut options = options(None, &rx6700xt_and_780m(dir.path()));
    options.hsa_enabled = false;
    options.gfx_version_overrides =
        [("HSA_OVERRIDE_GFX_VERSION".to_owned(), "gfx1030".to_owned())].into();

    let detection = detect(&options);

    assert_eq!(detection.targets(), [target("gfx1031"), target("gfx1103")]);
    assert!(detection.gpus.iter().all(|gpu| gpu.overridden.is_none()));
    assert_eq!(
        detection.warnings,
        [
            "HSA_OVERRIDE_GFX_VERSION=\"gfx1030\" is not major.minor.stepping in decimal \
             (like 10.3.0); ignored: sysfs node 1 is taken as its chip's own target gfx1031",
            "HSA_OVERRIDE_GFX_VERSION=\"gfx1030\" is not major.minor.stepping in decimal \
             (like 10.3.0); ignored: sysfs node 2 is taken as its chip's own target gfx1103",
        ]
    );
}

#[test]
fn hsa_gpus_are_not_overridden_twice() {
    let dir = TempDir::new().unwrap();
    // HSA applied the override itself: it reports gfx1030 for the gfx1031.
    let library = fake_hsa(
        &dir.path().join("hsa"),
        &FakeHsaConfig::with_agents(vec![FakeAgent::gpu(
            "gfx1030",
            "AMD Radeon RX 6700 XT",
            &["amdgcn-amd-amdhsa--gfx1030"],
        )]),
    );
    let root = fake_sysfs(
        &dir.path().join("nodes"),
        &[FakeNode::cpu(), FakeNode::gpu(100301, 0, "")],
    );
    let mut options = options(Some(&library), &root);
    options.gfx_version_overrides =
        [("HSA_OVERRIDE_GFX_VERSION".to_owned(), "10.3.0".to_owned())].into();

    let detection = detect(&options);

    assert_eq!(detection.targets(), [target("gfx1030")]);
    let gpu = &detection.gpus[0];
    assert_eq!(gpu.source, GpuSource::Hsa);
    assert_eq!(gpu.overridden.as_ref().unwrap().chip, target("gfx1031"));
}

/// A small pci.ids: another vendor, AMD's section with a subsystem line,
/// then another vendor.
const PCI_IDS: &str = "# pci.ids for tests\n\
    1000  Broadcom / LSI\n\
    \t744c  Not an AMD device\n\
    1002  Advanced Micro Devices, Inc. [AMD/ATI]\n\
    \t73df  Navi 22 [Radeon RX 6700/6700 XT/6750 XT / 6800M/6850M XT]\n\
    \t744c  Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]\n\
    \t\t1002 0e3b  Radeon RX 7900 XTX\n\
    1003  ULSI Systems\n";

/// A GPU node with PCI device id `device`.
fn gpu_with_device(gfx_target_version: u32, device: u16, name: &str) -> FakeNode {
    let mut node = FakeNode::gpu(gfx_target_version, 0, name);
    node.properties = node
        .properties
        .replace("device_id 29711", &format!("device_id {device}"));
    node
}

#[test]
fn sysfs_gpus_are_named_from_pci_ids_when_it_is_there() {
    let dir = TempDir::new().unwrap();
    let root = fake_sysfs(
        &dir.path().join("nodes"),
        &[
            FakeNode::cpu(),
            gpu_with_device(110000, 0x744c, "ip discovery"),
            gpu_with_device(100301, 0x73df, "ip discovery"),
            gpu_with_device(110000, 0x7fff, "ip discovery"),
        ],
    );
    let pci_ids = dir.path().join("pci.ids");
    fs_err::write(&pci_ids, PCI_IDS).unwrap();
    let mut options = options(None, &root);
    options.hsa_enabled = false;
    options.pci_ids = vec![dir.path().join("missing.ids"), pci_ids];

    let products: Vec<Option<String>> = detect(&options)
        .gpus
        .into_iter()
        .map(|gpu| gpu.product)
        .collect();
    assert_eq!(
        products,
        [
            Some("Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]".to_owned()),
            Some("Navi 22 [Radeon RX 6700/6700 XT/6750 XT / 6800M/6850M XT]".to_owned()),
            // A device the database lacks: the GPU table's name.
            Some("RX 7900 XTX".to_owned()),
        ]
    );

    // Without a database, the kernel's phrase is no name either: the GPU
    // table names each processor.
    options.pci_ids = vec![dir.path().join("missing.ids")];
    let products: Vec<Option<String>> = detect(&options)
        .gpus
        .into_iter()
        .map(|gpu| gpu.product)
        .collect();
    assert_eq!(
        products,
        [
            Some("RX 7900 XTX".to_owned()),
            Some("RX 6700 / XT".to_owned()),
            Some("RX 7900 XTX".to_owned()),
        ]
    );
}

#[test]
fn detect_says_which_variable_made_a_gpu_run_as_another_target() {
    // The test environment, so that the machine's own HIP runtime and GPU
    // overrides stay out.
    let env = kpack_test_support::chain::Env::new();
    let root = fake_sysfs(
        &env.home.path().join("nodes"),
        &[
            FakeNode::cpu(),
            gpu_with_device(100301, 0x73df, "ip discovery"),
        ],
    );
    let pci_ids = env.home.path().join("pci.ids");
    fs_err::write(&pci_ids, PCI_IDS).unwrap();
    let run = |value: &str, json: bool| {
        let mut command = env.command();
        command
            .env("KPACK_GET_SYSFS_ROOT", &root)
            .env("KPACK_GET_PCI_IDS", &pci_ids)
            .env("HSA_OVERRIDE_GFX_VERSION", value)
            .args(["--no-hsa", "detect"]);
        if json {
            command.arg("--json");
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };

    let home = env.home.path().display().to_string();
    let transcript = |stdout: &str, stderr: &str| {
        format!("--- stdout\n{stdout}--- stderr\n{stderr}").replace(&home, "<HOME>")
    };
    let (stdout, stderr) = run("10.3.0", false);
    insta::assert_snapshot!("overridden", transcript(&stdout, &stderr));
    let (stdout, _) = run("10.3.0", true);
    let detected: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(detected["gpus"][0]["target"], "gfx1030");
    assert_eq!(
        detected["gpus"][0]["overridden"],
        serde_json::json!({
            "chip": "gfx1031",
            "variable": "HSA_OVERRIDE_GFX_VERSION",
            "value": "10.3.0",
        })
    );

    let (stdout, stderr) = run("10.3", false);
    insta::assert_snapshot!("override_not_understood", transcript(&stdout, &stderr));
    let (stdout, _) = run("10.3", true);
    let detected: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(detected["gpus"][0]["target"], "gfx1031");
    assert_eq!(
        detected["warnings"].as_array().unwrap().len(),
        1,
        "{stdout}"
    );
}

// gfx1154, gfx1170 and gfx1250 A0 and B0 silicon, whose ASIC revision
// sysfs tells.

/// A gfx1170 iGPU, a gfx1154, and gfx1250 A0 and B0 silicon behind a CPU
/// node.
fn new_targets(root: &Path) -> PathBuf {
    fake_sysfs(
        root,
        &[
            FakeNode::cpu(),
            FakeNode::gpu(110700, 0, "gfx1170 iGPU"),
            FakeNode::gpu(110504, 0, "gfx1154"),
            FakeNode::gpu(120500, capability_asic_revision(0), "MI450 A0"),
            FakeNode::gpu(120500, capability_asic_revision(1), "MI450 B0"),
        ],
    )
}

#[test]
fn sysfs_tells_gfx1250_a0_silicon_from_b0_by_the_asic_revision() {
    let dir = TempDir::new().unwrap();
    let root = new_targets(dir.path());

    let (gpus, notes) = sysfs::read_topology(&root, false);

    let found: Vec<(u32, String, u64, u8)> = gpus
        .iter()
        .map(|gpu| {
            (
                gpu.node,
                gpu.target.to_string(),
                gpu.gfx_target_version,
                gpu.asic_revision,
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (1, "gfx1170".to_owned(), 110700, 0),
            (2, "gfx1154".to_owned(), 110504, 0),
            (3, "gfx1250-strict".to_owned(), 120500, 0),
            (4, "gfx1250".to_owned(), 120500, 1),
        ]
    );
    assert_eq!(notes, Vec::<String>::new());
}

#[test]
fn a0_silicon_is_reported_as_hsa_disable_gfx12_strict_says_and_installed_for_both_names() {
    let dir = TempDir::new().unwrap();
    let mut options = options(None, &new_targets(dir.path()));
    options.hsa_enabled = false;
    // (HSA_DISABLE_GFX12_STRICT, the A0's reported target, every target
    // to install for, the targets reported.)
    let cases = [
        (
            None,
            "gfx1250",
            ["gfx1170", "gfx1154", "gfx1250", "gfx1250-strict"],
            vec!["gfx1170", "gfx1154", "gfx1250"],
        ),
        (
            Some("0"),
            "gfx1250-strict",
            ["gfx1170", "gfx1154", "gfx1250-strict", "gfx1250"],
            vec!["gfx1170", "gfx1154", "gfx1250-strict", "gfx1250"],
        ),
        (
            Some("1"),
            "gfx1250",
            ["gfx1170", "gfx1154", "gfx1250", "gfx1250-strict"],
            vec!["gfx1170", "gfx1154", "gfx1250"],
        ),
    ];
    for (value, a0, install, reported) in cases {
        options.gfx12_strict = value.map(str::to_owned);

        let detection = detect(&options);

        let names = |targets: Vec<Target>| -> Vec<String> {
            targets.iter().map(ToString::to_string).collect()
        };
        assert_eq!(names(detection.targets()), install, "{value:?}");
        assert_eq!(names(detection.reported_targets()), reported, "{value:?}");
        assert_eq!(detection.warnings, Vec::<String>::new());
        let gpus = serde_json::to_value(&detection.gpus).unwrap();
        assert_eq!(
            gpus[2],
            serde_json::json!({
                "id": "sysfs node 3",
                "integrated": false,
                "node": 3,
                "product": "MI450 A0",
                "silicon": {
                    "asic_revision": 0,
                    "target": "gfx1250-strict",
                    "value": value,
                    "variable": "HSA_DISABLE_GFX12_STRICT",
                },
                "source": "sysfs",
                "target": a0,
            }),
            "{value:?}"
        );
        // B0 is plain gfx1250, whatever the variable.
        assert_eq!(gpus[3]["target"], "gfx1250");
        assert_eq!(gpus[3].get("silicon"), None);
        assert_eq!(
            detection.strict_warnings().len(),
            usize::from(a0 == "gfx1250"),
            "{value:?}"
        );
    }
}

#[test]
fn hsa_says_which_name_a0_reports_and_sysfs_what_the_silicon_is() {
    let dir = TempDir::new().unwrap();
    // The runtime in use reports A0 by its strict name, whatever this
    // process's environment says.
    let library = fake_hsa(
        &dir.path().join("hsa"),
        &FakeHsaConfig::with_agents(vec![
            FakeAgent::gpu(
                "gfx1250",
                "AMD Instinct MI450",
                &["amdgcn-amd-amdhsa--gfx1250-strict"],
            ),
            FakeAgent::gpu("gfx1250", "", &["amdgcn-amd-amdhsa--gfx1250"]),
        ]),
    );
    let root = fake_sysfs(
        &dir.path().join("nodes"),
        &[
            FakeNode::cpu(),
            FakeNode::gpu(120500, capability_asic_revision(0), "A0"),
            FakeNode::gpu(120500, capability_asic_revision(1), "B0"),
        ],
    );

    let detection = detect(&options(Some(&library), &root));

    let found: Vec<(String, GpuSource, Option<String>, Option<&str>)> = detection
        .gpus
        .iter()
        .map(|gpu| {
            (
                gpu.target.to_string(),
                gpu.source,
                gpu.silicon.as_ref().map(|s| s.target.to_string()),
                gpu.product.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "gfx1250-strict".to_owned(),
                GpuSource::Hsa,
                Some("gfx1250-strict".to_owned()),
                Some("AMD Instinct MI450")
            ),
            ("gfx1250".to_owned(), GpuSource::Hsa, None, Some("B0")),
        ]
    );
    assert_eq!(
        detection.targets(),
        [target("gfx1250-strict"), target("gfx1250")]
    );
    assert_eq!(detection.strict_warnings(), Vec::<String>::new());

    // Without sysfs, the strict name alone says A0.
    let detection = detect(&options(Some(&library), &dir.path().join("no-nodes")));
    assert_eq!(
        detection.gpus[0]
            .silicon
            .as_ref()
            .map(|s| s.target.to_string()),
        Some("gfx1250-strict".to_owned())
    );
    assert_eq!(detection.gpus[1].silicon, None);
    assert_eq!(
        detection.targets(),
        [target("gfx1250-strict"), target("gfx1250")]
    );
}

// Overrides the runtime refuses (rocm-systems#5686).

/// A gfx1100 and a gfx1103 behind a CPU node.
fn rx7900_and_780m(root: &Path) -> PathBuf {
    fake_sysfs(
        root,
        &[
            FakeNode::cpu(),
            FakeNode::gpu(110000, 0, "Radeon RX 7900 XTX"),
            FakeNode::gpu(110003, 0, "Radeon 780M"),
        ],
    )
}

/// Detection from sysfs alone with the override variables `variables`.
fn detect_overridden(root: &Path, variables: &[(&str, &str)]) -> rocm_kpack_get::detect::Detection {
    let mut options = options(None, root);
    options.hsa_enabled = false;
    options.gfx_version_overrides = variables
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    detect(&options)
}

#[test]
fn an_override_within_the_major_version_is_used() {
    let dir = TempDir::new().unwrap();
    let root = rx7900_and_780m(dir.path());

    let detection = detect_overridden(&root, &[("HSA_OVERRIDE_GFX_VERSION_2", "11.0.0")]);

    assert_eq!(detection.targets(), [target("gfx1100")]);
    assert_eq!(
        detection.gpus[1].overridden.as_ref().unwrap().chip,
        target("gfx1103")
    );
    assert_eq!(detection.warnings, Vec::<String>::new());
}

#[test]
fn an_override_across_the_major_version_is_a_warning_and_not_used() {
    let dir = TempDir::new().unwrap();
    let root = rx7900_and_780m(dir.path());

    let detection = detect_overridden(&root, &[("HSA_OVERRIDE_GFX_VERSION", "10.3.0")]);

    assert_eq!(detection.targets(), [target("gfx1100"), target("gfx1103")]);
    assert!(detection.gpus.iter().all(|gpu| gpu.overridden.is_none()));
    assert_eq!(
        detection.warnings,
        [1, 2].map(|node| format!(
            "HSA_OVERRIDE_GFX_VERSION=10.3.0 would change the major version (11 to 10), \
             which the HSA runtime refuses (rocm-systems#5686); ignored: sysfs node {node} \
             is taken as its chip's own target {}",
            ["gfx1100", "gfx1103"][node - 1]
        ))
    );
}

#[test]
fn a_per_node_override_across_the_major_version_is_refused_and_the_global_one_not_tried() {
    let dir = TempDir::new().unwrap();
    let root = rx7900_and_780m(dir.path());

    let detection = detect_overridden(
        &root,
        &[
            ("HSA_OVERRIDE_GFX_VERSION", "11.0.2"),
            ("HSA_OVERRIDE_GFX_VERSION_2", "12.0.1"),
        ],
    );

    assert_eq!(detection.targets(), [target("gfx1102"), target("gfx1103")]);
    assert_eq!(detection.warnings.len(), 1, "{:?}", detection.warnings);
    assert!(
        detection.warnings[0].starts_with("HSA_OVERRIDE_GFX_VERSION_2=12.0.1 would change"),
        "{:?}",
        detection.warnings
    );
}

#[test]
fn an_override_set_empty_is_unset() {
    let dir = TempDir::new().unwrap();
    let root = rx7900_and_780m(dir.path());

    let detection = detect_overridden(&root, &[("HSA_OVERRIDE_GFX_VERSION", "")]);

    assert_eq!(detection.targets(), [target("gfx1100"), target("gfx1103")]);
    assert!(detection.gpus.iter().all(|gpu| gpu.overridden.is_none()));
    assert_eq!(detection.warnings, Vec::<String>::new());
    assert_eq!(
        detection.notes,
        [
            "hsa: not consulted (disabled)",
            "sysfs: HSA_OVERRIDE_GFX_VERSION is set empty, which the HSA runtime takes as unset",
        ]
    );

    // A per-node one set empty leaves the one for every GPU to apply.
    let detection = detect_overridden(
        &root,
        &[
            ("HSA_OVERRIDE_GFX_VERSION", "11.0.0"),
            ("HSA_OVERRIDE_GFX_VERSION_2", ""),
        ],
    );
    assert_eq!(detection.targets(), [target("gfx1100")]);
    assert_eq!(
        detection.gpus[1].overridden.as_ref().unwrap().variable,
        "HSA_OVERRIDE_GFX_VERSION"
    );
}

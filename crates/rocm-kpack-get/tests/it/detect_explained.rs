//! `detect` explains itself, on a machine with a discrete and an
//! integrated GPU (an RX 7900 XTX, gfx1100, on kfd node 1 and a Raphael
//! iGPU, gfx1036, on node 2): products from `pci.ids` or else the GPU
//! table, the iGPU marked, each GPU's node, a global
//! `HSA_OVERRIDE_GFX_VERSION` meant for one of them, visibility variables
//! sysfs cannot honour, and `hsa_init` refused `/dev/kfd`.

use std::path::PathBuf;
use std::process::Command;

use crate::common::gpus::{fake_hsa, fake_sysfs, FakeAgent, FakeHsaConfig, FakeNode};
use crate::common::{output, success, Env};

/// AMD's section of `pci.ids` for the two GPUs.
const PCI_IDS: &str = "1002  Advanced Micro Devices, Inc. [AMD/ATI]\n\
    \t164e  Raphael\n\
    \t744c  Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]\n\
    1003  ULSI Systems\n";

/// A GPU node of `gfx_target_version` with PCI device id `device`, named
/// as kernels with IP discovery name it.
fn node(gfx_target_version: u32, device: u16) -> FakeNode {
    let mut node = FakeNode::gpu(gfx_target_version, 0, "ip discovery");
    node.properties = node
        .properties
        .replace("device_id 29711", &format!("device_id {device}"));
    node
}

/// The machine: its kfd topology, a `pci.ids` beside it, no HSA.
struct Machine {
    env: Env,
    pci_ids: PathBuf,
}

impl Machine {
    fn new() -> Machine {
        let env = Env::new();
        fake_sysfs(
            &env.sysfs,
            &[FakeNode::cpu(), node(110000, 0x744c), node(100306, 0x164e)],
        );
        let pci_ids = env.home.path().join("pci.ids");
        fs_err::write(&pci_ids, PCI_IDS).unwrap();
        Machine { env, pci_ids }
    }

    /// `kpack-get detect` with `pci.ids` and the variables `set`.
    fn detect(&self, set: &[(&str, &str)]) -> Command {
        let mut command = self.env.command();
        command
            .env("KPACK_GET_PCI_IDS", &self.pci_ids)
            .envs(set.iter().copied())
            .args(["--no-progress", "detect"]);
        command
    }

    /// The same without a `pci.ids`.
    fn detect_without_pci_ids(&self) -> Command {
        let mut command = self.detect(&[]);
        command.env("KPACK_GET_PCI_IDS", self.env.home.path().join("no-pci.ids"));
        command
    }

    fn transcript(&self, command: &mut Command) -> String {
        let home = self.env.home.path().display().to_string();
        kpack_test_support::transcript(&output(command), &[(home.as_str(), "<HOME>")])
    }

    fn json(&self, command: &mut Command) -> serde_json::Value {
        serde_json::from_str(&success(command.arg("--json"))).unwrap()
    }
}

#[test]
fn each_gpu_shows_its_node_its_product_from_pci_ids_and_the_igpu_is_marked() {
    let machine = Machine::new();

    insta::assert_snapshot!(
        "dgpu_and_igpu",
        machine.transcript(&mut machine.detect(&[]))
    );
    let detected = machine.json(&mut machine.detect(&[]));
    let gpus = &detected["gpus"];
    assert_eq!(gpus[0]["node"], 1);
    assert_eq!(gpus[0]["integrated"], false);
    assert_eq!(gpus[1]["node"], 2);
    assert_eq!(gpus[1]["integrated"], true);
    assert_eq!(gpus[1]["product"], "Raphael");
}

#[test]
fn without_pci_ids_the_gpu_table_names_the_products() {
    let machine = Machine::new();

    insta::assert_snapshot!(
        "dgpu_and_igpu_without_pci_ids",
        machine.transcript(&mut machine.detect_without_pci_ids())
    );
    let detected = machine.json(&mut machine.detect_without_pci_ids());
    assert_eq!(detected["gpus"][0]["product"], "RX 7900 XTX");
    assert_eq!(detected["gpus"][1]["product"], "Raphael iGPU");
}

#[test]
fn a_global_override_meant_for_the_igpu_is_warned_of_with_its_per_node_form() {
    let machine = Machine::new();
    let global = [("HSA_OVERRIDE_GFX_VERSION", "10.3.0")];

    insta::assert_snapshot!(
        "global_override",
        machine.transcript(&mut machine.detect(&global))
    );
    let detected = machine.json(&mut machine.detect(&global));
    let warnings = detected["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("set HSA_OVERRIDE_GFX_VERSION_2=10.3.0 instead")),
        "{warnings:?}"
    );

    // The per-node form it suggests retargets the iGPU alone, unwarned.
    let per_node = [("HSA_OVERRIDE_GFX_VERSION_2", "10.3.0")];
    let out = output(&mut machine.detect(&per_node));
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    let detected = machine.json(&mut machine.detect(&per_node));
    assert_eq!(detected["gpus"][0]["target"], "gfx1100");
    assert_eq!(detected["gpus"][1]["target"], "gfx1030");
}

#[test]
fn visibility_variables_sysfs_cannot_honour_are_named() {
    let machine = Machine::new();
    let hidden = [("ROCR_VISIBLE_DEVICES", "0"), ("CUDA_VISIBLE_DEVICES", "0")];

    insta::assert_snapshot!(
        "visibility_variables",
        machine.transcript(&mut machine.detect(&hidden))
    );

    // When HSA answers, it has honoured them: nothing to say.
    let library = fake_hsa(
        &machine.env.home.path().join("hsa"),
        &FakeHsaConfig::with_agents(vec![FakeAgent::gpu(
            "gfx1100",
            "Radeon RX 7900 XTX",
            &["amdgcn-amd-amdhsa--gfx1100"],
        )]),
    );
    let mut command = machine.detect(&hidden);
    command.env("KPACK_GET_HSA_LIBRARY", &library);
    let stdout = success(&mut command);
    assert!(stdout.contains("hsa agent 0"), "{stdout}");
    assert!(!stdout.contains("sysfs: ROCR_VISIBLE_DEVICES"), "{stdout}");
}

#[test]
fn hsa_refused_dev_kfd_while_the_driver_is_loaded_suggests_the_render_group() {
    let machine = Machine::new();
    let library = fake_hsa(
        &machine.env.home.path().join("hsa"),
        &FakeHsaConfig {
            init_status: 0x1008,
            ..FakeHsaConfig::default()
        },
    );
    let mut command = machine.detect(&[]);
    command.env("KPACK_GET_HSA_LIBRARY", &library);

    insta::assert_snapshot!("kfd_denied", machine.transcript(&mut command));

    // Without the driver, the group is not the answer.
    fs_err::remove_dir_all(&machine.env.sysfs).unwrap();
    let out = output(&mut command);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("render"));
}

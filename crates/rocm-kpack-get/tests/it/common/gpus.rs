//! Fake GPUs for tests: a fake `libhsa-runtime64.so.1` built from
//! `tests/c/fake_hsa.c` and configured by a file beside it, and fake kfd
//! topology trees for sysfs detection.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The file name the fake library is installed under.
pub const HSA_LIBRARY_NAME: &str = "libhsa-runtime64.so.1";

/// The configuration the fake library reads from beside itself.
pub const HSA_CONFIG_NAME: &str = "fake-hsa.conf";

/// Where a hanging fake writes its process id.
pub const HSA_PID_NAME: &str = "fake-hsa.pid";

/// The calls the fake logs, one function name a line.
pub const HSA_LOG_NAME: &str = "fake-hsa.log";

/// Builds the fake library once per test process and returns its path
/// (under the target's tmp dir; built to a private name, then renamed, so
/// test processes building at once do not trip over each other).
fn built_fake_hsa() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/fake_hsa.c");
        let directory = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-hsa");
        fs_err::create_dir_all(&directory).unwrap();
        let building = directory.join(format!("{HSA_LIBRARY_NAME}.{}", std::process::id()));
        let output = kpack_test_support::tool("cc")
            .args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
            .arg(&building)
            .arg(&source)
            .arg("-ldl")
            .output()
            .expect("run cc");
        assert!(
            output.status.success(),
            "cc failed on {}:\n{}",
            source.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        let library = directory.join(HSA_LIBRARY_NAME);
        fs_err::rename(&building, &library).unwrap();
        library
    })
}

/// Puts a fresh copy of the fake library in `directory` (which gets its own
/// configuration, log and pid file) and returns its absolute path. Each
/// copy is a separate file, so loading several in one process gives each its
/// own state.
pub fn install_fake_hsa(directory: &Path) -> PathBuf {
    fs_err::create_dir_all(directory).unwrap();
    let library = directory.join(HSA_LIBRARY_NAME);
    fs_err::copy(built_fake_hsa(), &library).unwrap();
    std::path::absolute(library).unwrap()
}

/// An agent of the fake runtime.
#[derive(Debug, Clone)]
pub enum FakeAgent {
    /// A CPU agent.
    Cpu { name: String },
    /// A GPU agent with its ISA names in the order reported (an empty
    /// product makes the product name empty).
    Gpu {
        name: String,
        product: String,
        isas: Vec<String>,
    },
}

impl FakeAgent {
    pub fn cpu(name: &str) -> FakeAgent {
        FakeAgent::Cpu {
            name: name.to_owned(),
        }
    }

    pub fn gpu(name: &str, product: &str, isas: &[&str]) -> FakeAgent {
        FakeAgent::Gpu {
            name: name.to_owned(),
            product: product.to_owned(),
            isas: isas.iter().map(|isa| (*isa).to_owned()).collect(),
        }
    }
}

/// What the fake runtime does.
#[derive(Debug, Clone, Default)]
pub struct FakeHsaConfig {
    /// What `hsa_init` returns (0x1008: no `/dev/kfd`).
    pub init_status: u32,
    /// `hsa_init` sleeps forever, after writing its pid to `fake-hsa.pid`.
    pub hang_in_init: bool,
    /// `hsa_iterate_agents` fails with HSA_STATUS_ERROR after the first agent.
    pub agent_callback_error: bool,
    pub agents: Vec<FakeAgent>,
}

impl FakeHsaConfig {
    pub fn with_agents(agents: Vec<FakeAgent>) -> FakeHsaConfig {
        FakeHsaConfig {
            agents,
            ..FakeHsaConfig::default()
        }
    }

    /// The configuration file's text.
    pub fn render(&self) -> String {
        let mut text = String::new();
        writeln!(text, "init_status {:#x}", self.init_status).unwrap();
        writeln!(text, "hang_in_init {}", u8::from(self.hang_in_init)).unwrap();
        writeln!(
            text,
            "agent_callback_error {}",
            u8::from(self.agent_callback_error)
        )
        .unwrap();
        for agent in &self.agents {
            match agent {
                FakeAgent::Cpu { name } => writeln!(text, "agent cpu \"{name}\"").unwrap(),
                FakeAgent::Gpu {
                    name,
                    product,
                    isas,
                } => {
                    write!(text, "agent gpu \"{name}\" \"{product}\"").unwrap();
                    for isa in isas {
                        write!(text, " {isa}").unwrap();
                    }
                    text.push('\n');
                }
            }
        }
        text
    }

    /// Writes the configuration beside the fake library in `directory`.
    pub fn write(&self, directory: &Path) {
        fs_err::write(directory.join(HSA_CONFIG_NAME), self.render()).unwrap();
    }
}

/// A fake runtime in `directory`, configured; returns the library's path.
pub fn fake_hsa(directory: &Path, config: &FakeHsaConfig) -> PathBuf {
    let library = install_fake_hsa(directory);
    config.write(directory);
    library
}

/// The calls the fake runtime in `directory` logged.
pub fn fake_hsa_calls(directory: &Path) -> Vec<String> {
    fs_err::read_to_string(directory.join(HSA_LOG_NAME))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A node of a fake kfd topology.
#[derive(Debug, Clone)]
pub struct FakeNode {
    /// The `properties` file's text.
    pub properties: String,
    /// The `name` file's text.
    pub name: String,
}

impl FakeNode {
    /// A CPU node.
    pub fn cpu() -> FakeNode {
        FakeNode {
            properties: "cpu_cores_count 64\nsimd_count 0\nmem_banks_count 1\n\
                         gfx_target_version 0\nvendor_id 0\ndevice_id 0\ncapability 0\n"
                .to_owned(),
            name: String::new(),
        }
    }

    /// A GPU node with a `gfx_target_version`, its `capability` and name.
    pub fn gpu(gfx_target_version: u32, capability: u64, name: &str) -> FakeNode {
        FakeNode {
            properties: format!(
                "cpu_cores_count 0\nsimd_count 416\nmem_banks_count 1\ncaches_count 253\n\
                 max_waves_per_simd 8\nwave_front_size 64\nsimd_per_cu 4\n\
                 gfx_target_version {gfx_target_version}\nvendor_id 4098\ndevice_id 29711\n\
                 location_id 768\ndrm_render_minor 128\nhive_id 0\ncapability {capability}\n\
                 unique_id 18446744073709551615\nnum_xcc 1\n"
            ),
            name: format!("{name}\n"),
        }
    }
}

/// The `capability` bit for SRAM ECC.
pub const CAPABILITY_SRAMECC: u64 = 0x0400_0000;

/// The `capability` bits saying ASIC revision `revision` (bits 25:22; 0
/// is A0).
pub const fn capability_asic_revision(revision: u64) -> u64 {
    revision << 22
}

/// Writes a kfd topology under `root`: node directories `0`, `1`, ... in
/// the order given. Returns `root`.
pub fn fake_sysfs(root: &Path, nodes: &[FakeNode]) -> PathBuf {
    fs_err::create_dir_all(root).unwrap();
    for (index, node) in nodes.iter().enumerate() {
        let directory = root.join(index.to_string());
        fs_err::create_dir_all(&directory).unwrap();
        fs_err::write(directory.join("properties"), &node.properties).unwrap();
        fs_err::write(directory.join("name"), &node.name).unwrap();
        fs_err::write(
            directory.join("gpu_id"),
            if node.name.is_empty() {
                "0\n"
            } else {
                "1234\n"
            },
        )
        .unwrap();
    }
    root.to_owned()
}

/// Makes node `node` under `root` unreadable even to root: its `properties`
/// becomes a directory.
pub fn make_node_unreadable(root: &Path, node: u32) {
    let properties = root.join(node.to_string()).join("properties");
    let _ = fs_err::remove_file(&properties);
    fs_err::create_dir_all(&properties).unwrap();
}

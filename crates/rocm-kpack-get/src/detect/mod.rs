//! Which GPUs this machine has, and their targets.
//!
//! Sources, in order (05-kpack-get.md): targets given by the user, which
//! replace detection; the HSA runtime, run in a child process because its
//! initialisation can hang ([`hsa`]); the kernel driver's topology in sysfs
//! ([`sysfs`]). HSA knows the live xnack and sramecc modes, so when it finds
//! GPUs they are the answer; sysfs, which works before ROCm is installed,
//! answers when HSA cannot. Finding no GPU is not an error: the
//! [`Detection`] then says in its notes why each source found nothing.
//!
//! [`hip_runtime`] finds the HIP runtime installed libraries would load,
//! which decides how they are installed ([`crate::layout`]).

pub mod choice;
pub mod gfx_override;
pub mod hip_runtime;
pub mod hsa;
pub mod pci_ids;
pub mod sysfs;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use kpack_gpu::Target;
use serde::{Serialize, Serializer};

/// Where the kernel driver's topology lives.
pub const DEFAULT_SYSFS_ROOT: &str = "/sys/class/kfd/kfd/topology/nodes";

/// How long the HSA probe may take by default.
pub const DEFAULT_HSA_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a GPU's target came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuSource {
    /// Given by the user (`--target`, `KPACK_GET_TARGETS`).
    Override,
    /// Reported by the HSA runtime.
    Hsa,
    /// Read from the kernel driver's topology.
    Sysfs,
}

/// A GPU found (or named by the user). Fields in the order its JSON has
/// always listed them, by name.
#[derive(Debug, Clone, Serialize)]
pub struct Gpu {
    /// Which agent or node it is: `hsa agent 0`, `sysfs node 1`, `override`.
    pub id: String,
    /// Set when an `HSA_OVERRIDE_GFX_VERSION` variable makes the runtime
    /// run this GPU as `target` rather than as the chip it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overridden: Option<TargetOverride>,
    /// The product name, when a source knows it.
    pub product: Option<String>,
    /// Where the target came from.
    pub source: GpuSource,
    /// Its target, with the feature modes the source knows.
    #[serde(serialize_with = "serialize_display")]
    pub target: Target,
}

/// The chip's own target and the variable that replaced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetOverride {
    /// What the kernel driver says the chip is.
    #[serde(serialize_with = "serialize_display")]
    pub chip: Target,
    /// Its value (`10.3.0`).
    pub value: String,
    /// `HSA_OVERRIDE_GFX_VERSION` or `HSA_OVERRIDE_GFX_VERSION_<node>`.
    pub variable: String,
}

fn serialize_display<S: Serializer>(target: &Target, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(target)
}

/// What to consult, and how.
#[derive(Debug, Clone)]
pub struct DetectOptions {
    /// Targets given by the user; when there are any, nothing else is
    /// consulted.
    pub overrides: Vec<Target>,
    /// The HSA runtime to load; `None` searches for
    /// `libhsa-runtime64.so.1` with the dynamic loader, then in
    /// `$ROCM_PATH/lib` and `/opt/rocm/lib`.
    pub hsa_library: Option<PathBuf>,
    /// Whether to ask HSA at all.
    pub hsa_enabled: bool,
    /// How long the HSA probe may take before it is killed.
    pub hsa_timeout: Duration,
    /// The executable run as the HSA probe (`PROBE hsa-probe`), normally
    /// kpack-get itself.
    pub probe_exe: PathBuf,
    /// The directory of topology nodes.
    pub sysfs_root: PathBuf,
    /// PCI id databases to name sysfs GPUs from; the first that can be read
    /// is used.
    pub pci_ids: Vec<PathBuf>,
    /// `HSA_OVERRIDE_GFX_VERSION` and `HSA_OVERRIDE_GFX_VERSION_<node>`, by
    /// name, applied to sysfs GPUs as the runtime applies them.
    pub gfx_version_overrides: BTreeMap<String, String>,
    /// Whether the HSA runtime will turn xnack on (`HSA_XNACK=1`; the
    /// kernel's default is off), the mode sysfs GPUs' code will run in.
    pub hsa_xnack: bool,
}

impl DetectOptions {
    /// Detection from every source, with the default HSA search, timeout and
    /// sysfs root.
    pub fn new(probe_exe: PathBuf) -> DetectOptions {
        DetectOptions {
            overrides: Vec::new(),
            hsa_library: None,
            hsa_enabled: true,
            hsa_timeout: DEFAULT_HSA_TIMEOUT,
            probe_exe,
            sysfs_root: PathBuf::from(DEFAULT_SYSFS_ROOT),
            pci_ids: pci_ids::DEFAULT_PATHS.iter().map(PathBuf::from).collect(),
            gfx_version_overrides: gfx_override::from_environment(),
            hsa_xnack: std::env::var(kpack_env::EnvVars::HSA_XNACK)
                .is_ok_and(|value| value.trim() == "1"),
        }
    }
}

/// The GPUs found, and why sources that found none did not.
#[derive(Debug, Clone, Default)]
pub struct Detection {
    /// The GPUs, in the order their source lists them.
    pub gpus: Vec<Gpu>,
    /// One line for people per source that found nothing or had trouble,
    /// starting with the source (`hsa: ...`, `sysfs: ...`).
    pub notes: Vec<String>,
    /// What the user set wrong and should hear about even without -v (a
    /// malformed `HSA_OVERRIDE_GFX_VERSION`).
    pub warnings: Vec<String>,
}

impl Detection {
    /// The distinct targets of the GPUs, in GPU order.
    pub fn targets(&self) -> Vec<Target> {
        let mut targets: Vec<Target> = Vec::new();
        for gpu in &self.gpus {
            if !targets.contains(&gpu.target) {
                targets.push(gpu.target.clone());
            }
        }
        targets
    }
}

/// Finds the GPUs: the overrides if there are any, else what HSA reports,
/// else what sysfs lists.
pub fn detect(options: &DetectOptions) -> Detection {
    if !options.overrides.is_empty() {
        let gpus = options
            .overrides
            .iter()
            .map(|target| Gpu {
                target: target.clone(),
                product: None,
                source: GpuSource::Override,
                id: "override".to_owned(),
                overridden: None,
            })
            .collect();
        return Detection {
            gpus,
            ..Detection::default()
        };
    }

    let mut notes = Vec::new();
    let hsa_gpus = if options.hsa_enabled {
        hsa_gpus(options, &mut notes)
    } else {
        notes.push("hsa: not consulted (disabled)".to_owned());
        Vec::new()
    };

    let (sysfs_gpus, sysfs_notes) = sysfs::read_topology(&options.sysfs_root, options.hsa_xnack);
    let sysfs_silent = sysfs_notes.is_empty();
    notes.extend(sysfs_notes);
    if sysfs_gpus.is_empty() && sysfs_silent {
        notes.push(format!(
            "sysfs: no GPU nodes under {}",
            options.sysfs_root.display()
        ));
    }
    let mut warnings = Vec::new();
    let sysfs_gpus = sysfs_as_run(options, sysfs_gpus, &mut warnings);

    if hsa_gpus.is_empty() {
        return Detection {
            gpus: sysfs_gpus,
            notes,
            warnings,
        };
    }

    if sysfs_gpus.len() > hsa_gpus.len() {
        notes.push(format!(
            "hsa: sees {} of the {} GPUs the kernel driver lists \
             (ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES or render node permissions hide the others)",
            hsa_gpus.len(),
            sysfs_gpus.len()
        ));
    }
    // Pair each HSA GPU with the next sysfs node of the same processor (as
    // the runtime runs it), for the product name when HSA has none and the
    // chip behind an override HSA applied itself.
    let mut unpaired: Vec<Option<Gpu>> = sysfs_gpus.into_iter().map(Some).collect();
    let gpus = hsa_gpus
        .into_iter()
        .map(|mut gpu| {
            let pair = unpaired.iter_mut().find(|node| {
                node.as_ref()
                    .is_some_and(|node| node.target.processor() == gpu.target.processor())
            });
            if let Some(node) = pair.and_then(Option::take) {
                if gpu.product.is_none() {
                    gpu.product = node.product;
                }
                gpu.overridden = node.overridden;
            }
            gpu
        })
        .collect();
    Detection {
        gpus,
        notes,
        warnings,
    }
}

/// The sysfs GPUs as the runtime will run them: named from `pci.ids` (read
/// only when a GPU has a PCI id), their targets replaced where an
/// `HSA_OVERRIDE_GFX_VERSION` variable says; a value that names no target
/// is a warning, and the chip's own target stays.
fn sysfs_as_run(
    options: &DetectOptions,
    sysfs_gpus: Vec<sysfs::SysfsGpu>,
    warnings: &mut Vec<String>,
) -> Vec<Gpu> {
    let names = if sysfs_gpus.iter().any(|gpu| gpu.pci_device.is_some()) {
        pci_ids::load_amd_devices(&options.pci_ids)
    } else {
        None
    };
    sysfs_gpus
        .into_iter()
        .map(|gpu| {
            let name = gpu
                .pci_device
                .and_then(|device| names.as_ref()?.get(&device).cloned());
            let mut found = Gpu {
                target: gpu.target.clone(),
                product: name.or(gpu.product),
                source: GpuSource::Sysfs,
                id: format!("sysfs node {}", gpu.node),
                overridden: None,
            };
            let Some((variable, value)) =
                gfx_override::for_node(&options.gfx_version_overrides, gpu.node)
            else {
                return found;
            };
            let target = gfx_override::processor(variable, value)
                .map_err(|error| error.to_string())
                .and_then(|processor| {
                    sysfs::target_for(&processor, gpu.sramecc, options.hsa_xnack)
                        .map_err(|error| error.to_string())
                });
            match target {
                Ok(target) => {
                    found.target = target;
                    found.overridden = Some(TargetOverride {
                        chip: gpu.target,
                        variable: variable.to_owned(),
                        value: value.trim().to_owned(),
                    });
                }
                Err(error) => warnings.push(format!(
                    "{error}; ignored: sysfs node {} is taken as its chip's own target {}",
                    gpu.node, gpu.target
                )),
            }
            found
        })
        .collect()
}

/// The GPUs HSA reports, with a note when it reports none.
fn hsa_gpus(options: &DetectOptions, notes: &mut Vec<String>) -> Vec<Gpu> {
    let agents = match hsa::probe(
        &options.probe_exe,
        options.hsa_library.as_deref(),
        options.hsa_timeout,
    ) {
        Ok(agents) => agents,
        Err(error) => {
            notes.push(format!("hsa: {}", kpack_error::one_line(&error)));
            return Vec::new();
        }
    };
    let mut gpus = Vec::new();
    for agent in agents {
        match Target::parse(&agent.isa) {
            Ok(target) => gpus.push(Gpu {
                target,
                product: agent.product,
                source: GpuSource::Hsa,
                id: format!("hsa agent {}", agent.index),
                overridden: None,
            }),
            Err(error) => notes.push(format!(
                "hsa: agent {} ({}): {error}, skipped",
                agent.index, agent.name
            )),
        }
    }
    if gpus.is_empty() {
        notes.push("hsa: no GPU agents".to_owned());
    } else if let Some(version) = options
        .gfx_version_overrides
        .get(kpack_env::EnvVars::HSA_OVERRIDE_GFX_VERSION)
    {
        notes.push(format!(
            "hsa: HSA_OVERRIDE_GFX_VERSION={version} is set, so HSA reports that target rather than the chip's"
        ));
    }
    gpus
}

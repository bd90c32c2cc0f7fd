//! Which GPUs this machine has, and their targets.
//!
//! Sources, in order (05-kpack-get.md): targets given by the user, which
//! replace detection; the HSA runtime, run in a child process because its
//! initialisation can hang ([`hsa`]); the kernel driver's topology in sysfs
//! ([`sysfs`]). HSA knows the live xnack and sramecc modes, so when it finds
//! GPUs they are the answer; sysfs, which works before ROCm is installed,
//! answers when HSA cannot. Finding no GPU is not an error: the
//! [`Detection`] then says in its notes why each source found nothing.
//! gfx1250 A0 silicon has two names ([`gfx12_strict`]): a GPU says which
//! the runtime reports and what the silicon is, and is installed for both.
//!
//! [`hip_runtime`] finds the HIP runtime installed libraries would load,
//! which decides how they are installed ([`crate::layout`]).

pub mod choice;
mod explain;
pub mod gfx12_strict;
pub mod gfx_override;
pub mod hsa;
pub mod pci_ids;
pub mod sysfs;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use kpack_gpu::Target;
use serde::{Serialize, Serializer};

/// Where the kernel driver's topology lives.
pub(crate) const DEFAULT_SYSFS_ROOT: &str = "/sys/class/kfd/kfd/topology/nodes";

/// How long the HSA probe may take by default.
pub(crate) const DEFAULT_HSA_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// Whether the chip is an APU's integrated GPU (the GPU table says,
    /// [`kpack_gpu::gpus::Processor::is_integrated`]).
    pub integrated: bool,
    /// Its kfd topology node, when sysfs lists it: the `<node>` of the
    /// per-GPU `HSA_OVERRIDE_GFX_VERSION_<node>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    /// Set when an `HSA_OVERRIDE_GFX_VERSION` variable makes the runtime
    /// run this GPU as `target` rather than as the chip it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overridden: Option<TargetOverride>,
    /// The product name: as HSA or `pci.ids` gives it, else the node's
    /// `name`, else the GPU table's for the chip's processor.
    pub product: Option<String>,
    /// Set for gfx1250 A0 silicon, whose own target (`gfx1250-strict`)
    /// `target` may not be: the runtime reports either name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub silicon: Option<Silicon>,
    /// Where the target came from.
    pub source: GpuSource,
    /// Its target as the runtime reports it, with the feature modes the
    /// source knows.
    #[serde(serialize_with = "serialize_display")]
    pub target: Target,
}

impl Gpu {
    /// The targets to install for: the one the runtime reports, and for
    /// A0 silicon its other name too, so that code chosen by either name
    /// is there.
    pub(crate) fn install_targets(&self) -> Vec<Target> {
        let mut targets = vec![self.target.clone()];
        if self.silicon.is_some() {
            targets.extend(gfx12_strict::other_name(&self.target));
        }
        targets
    }

    /// For A0 silicon the runtime reports by B0's name (`gfx1250`): what
    /// goes wrong and how to change it.
    pub(crate) fn strict_warning(&self) -> Option<String> {
        let silicon = self.silicon.as_ref()?;
        if self.target.processor() != gfx12_strict::PLAIN {
            return None;
        }
        Some(format!(
            "{} is gfx1250 A0 silicon, which needs {} code, but the HSA runtime reports it as {} ({}): \
             libraries that choose code by that name run B0 code on it; {} for the runtime to report {}",
            self.id,
            silicon.target,
            self.target,
            gfx12_strict::describe(silicon.value.as_deref()),
            gfx12_strict::strict_setting(),
            silicon.target,
        ))
    }
}

/// What gfx1250 A0 silicon is, beside the name the runtime reports for it.
/// Fields in JSON order, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Silicon {
    /// The ASIC revision (0: A0).
    pub asic_revision: u8,
    /// The target its code is built for (`gfx1250-strict`).
    #[serde(serialize_with = "serialize_display")]
    pub target: Target,
    /// The value of `variable`, `None` when unset.
    pub value: Option<String>,
    /// `HSA_DISABLE_GFX12_STRICT`, which decides the name reported.
    pub variable: &'static str,
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
    /// `HSA_DISABLE_GFX12_STRICT`, when set: which name the runtime
    /// reports for gfx1250 A0 silicon.
    pub gfx12_strict: Option<String>,
    /// The visibility variables set (`ROCR_VISIBLE_DEVICES`, ...), by
    /// name: HSA and HIP honour them, sysfs does not.
    pub visible_devices: BTreeMap<String, String>,
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
            gfx12_strict: std::env::var_os(gfx12_strict::VARIABLE)
                .map(|value| value.to_string_lossy().into_owned()),
            visible_devices: explain::visibility_from_environment(),
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
    /// malformed `HSA_OVERRIDE_GFX_VERSION`, or one the runtime refuses).
    pub warnings: Vec<String>,
}

impl Detection {
    /// The distinct targets to install for, in GPU order: each GPU's
    /// [`Gpu::install_targets`].
    pub fn targets(&self) -> Vec<Target> {
        distinct(self.gpus.iter().flat_map(Gpu::install_targets))
    }

    /// The distinct targets the runtime reports, in GPU order: what a
    /// check judges by.
    pub fn reported_targets(&self) -> Vec<Target> {
        distinct(self.gpus.iter().map(|gpu| gpu.target.clone()))
    }

    /// A warning for each GPU of gfx1250 A0 silicon the runtime reports by
    /// B0's name ([`Gpu::strict_warning`]).
    pub fn strict_warnings(&self) -> Vec<String> {
        self.gpus.iter().filter_map(Gpu::strict_warning).collect()
    }
}

fn distinct(all: impl Iterator<Item = Target>) -> Vec<Target> {
    let mut targets: Vec<Target> = Vec::new();
    for target in all {
        if !targets.contains(&target) {
            targets.push(target);
        }
    }
    targets
}

/// Finds the GPUs: the overrides if there are any, else what HSA reports,
/// else what sysfs lists.
pub fn detect(options: &DetectOptions) -> Detection {
    if !options.overrides.is_empty() {
        return given(&options.overrides);
    }

    let mut notes = Vec::new();
    let (hsa_gpus, hsa_error) = if options.hsa_enabled {
        hsa_gpus(options, &mut notes)
    } else {
        notes.push("hsa: not consulted (disabled)".to_owned());
        (Vec::new(), None)
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
    warnings.extend(explain::kfd_denied(hsa_error.as_ref(), sysfs_gpus.len()));
    let chips: Vec<gfx_override::Chip<'_>> = sysfs_gpus
        .iter()
        .map(|gpu| (gpu.node, gpu.target.processor(), gpu.gfx_target_version))
        .collect();
    warnings.extend(gfx_override::global_warning(
        &options.gfx_version_overrides,
        &chips,
    ));
    let sysfs_gpus = sysfs_as_run(options, sysfs_gpus, &mut warnings);
    for (variable, value) in &options.gfx_version_overrides {
        if gfx_override::is_unset(value) {
            notes.push(format!(
                "sysfs: {variable} is set empty, which the HSA runtime takes as unset"
            ));
        }
    }

    if hsa_gpus.is_empty() {
        if !sysfs_gpus.is_empty() {
            notes.extend(explain::visibility_ignored(&options.visible_devices));
        }
        return Detection {
            gpus: explain::described(sysfs_gpus),
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
    Detection {
        gpus: explain::described(paired(hsa_gpus, sysfs_gpus)),
        notes,
        warnings,
    }
}

/// The targets the user gave, as GPUs.
fn given(targets: &[Target]) -> Detection {
    let gpus = targets
        .iter()
        .map(|target| Gpu {
            target: target.clone(),
            product: None,
            source: GpuSource::Override,
            id: "override".to_owned(),
            integrated: false,
            node: None,
            overridden: None,
            silicon: None,
        })
        .collect();
    Detection {
        gpus,
        ..Detection::default()
    }
}

/// The HSA GPUs, each with what its sysfs node adds.
fn paired(hsa_gpus: Vec<Gpu>, sysfs_gpus: Vec<Gpu>) -> Vec<Gpu> {
    // Pair each HSA GPU with the next sysfs node of the same chip (as the
    // runtime runs it; either name of gfx1250), for the product name when
    // HSA has none, the chip behind an override HSA applied itself, and
    // what A0 silicon is whichever name HSA reports.
    let mut unpaired: Vec<Option<Gpu>> = sysfs_gpus.into_iter().map(Some).collect();
    hsa_gpus
        .into_iter()
        .map(|mut gpu| {
            let pair = unpaired.iter_mut().find(|node| {
                node.as_ref().is_some_and(|node| {
                    gfx12_strict::same_chip(node.target.processor(), gpu.target.processor())
                })
            });
            if let Some(node) = pair.and_then(Option::take) {
                if gpu.product.is_none() {
                    gpu.product = node.product;
                }
                gpu.node = node.node;
                gpu.overridden = node.overridden;
                if node.silicon.is_some() {
                    gpu.silicon = node.silicon;
                }
            }
            gpu
        })
        .collect()
}

/// The sysfs GPUs as the runtime will run them: named from `pci.ids` (read
/// only when a GPU has a PCI id), gfx1250 A0 silicon by the name the
/// runtime reports for it, their targets replaced where an
/// `HSA_OVERRIDE_GFX_VERSION` variable says; a value that names no target,
/// or that the runtime refuses, is a warning, and the chip's own target
/// stays.
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
    let strict = options.gfx12_strict.as_deref();
    sysfs_gpus
        .into_iter()
        .map(|gpu| {
            let name = gpu
                .pci_device
                .and_then(|device| names.as_ref()?.get(&device).cloned());
            let silicon = (gpu.target.processor() == gfx12_strict::STRICT).then(|| Silicon {
                asic_revision: gpu.asic_revision,
                target: gpu.target.clone(),
                value: options.gfx12_strict.clone(),
                variable: gfx12_strict::VARIABLE,
            });
            let mut found = Gpu {
                target: gfx12_strict::reported(&gpu.target, strict)
                    .unwrap_or_else(|_| gpu.target.clone()),
                product: name.or(gpu.product),
                source: GpuSource::Sysfs,
                id: format!("sysfs node {}", gpu.node),
                integrated: false,
                node: Some(gpu.node),
                overridden: None,
                silicon,
            };
            let Some((variable, value)) =
                gfx_override::for_node(&options.gfx_version_overrides, gpu.node)
            else {
                return found;
            };
            let target = gfx_override::processor(variable, value, gpu.gfx_target_version)
                .map_err(|error| error.to_string())
                .and_then(|processor| {
                    sysfs::target_for(&processor, gpu.sramecc, options.hsa_xnack)
                        .map_err(|error| error.to_string())
                });
            match target {
                Ok(target) => {
                    // The runtime runs it as another target altogether.
                    found.target = target;
                    found.silicon = None;
                    found.overridden = Some(TargetOverride {
                        chip: gpu.target,
                        variable: variable.to_owned(),
                        value: value.trim().to_owned(),
                    });
                }
                Err(error) => warnings.push(format!(
                    "{error}; ignored: sysfs node {} is taken as its chip's own target {}",
                    gpu.node, found.target
                )),
            }
            found
        })
        .collect()
}

/// The GPUs HSA reports, with a note when it reports none, and why the
/// probe failed.
fn hsa_gpus(options: &DetectOptions, notes: &mut Vec<String>) -> (Vec<Gpu>, Option<hsa::HsaError>) {
    let agents = match hsa::probe(
        &options.probe_exe,
        options.hsa_library.as_deref(),
        options.hsa_timeout,
    ) {
        Ok(agents) => agents,
        Err(error) => {
            notes.push(format!("hsa: {}", kpack_error::one_line(&error)));
            return (Vec::new(), Some(error));
        }
    };
    let mut gpus = Vec::new();
    for agent in agents {
        match Target::parse(&agent.isa) {
            Ok(target) => gpus.push(Gpu {
                // Only A0 silicon is reported by its strict name.
                silicon: (target.processor() == gfx12_strict::STRICT).then(|| Silicon {
                    asic_revision: 0,
                    target: target.clone(),
                    value: options.gfx12_strict.clone(),
                    variable: gfx12_strict::VARIABLE,
                }),
                target,
                product: agent.product,
                source: GpuSource::Hsa,
                id: format!("hsa agent {}", agent.index),
                integrated: false,
                node: None,
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
        .filter(|version| !gfx_override::is_unset(version))
    {
        notes.push(format!(
            "hsa: HSA_OVERRIDE_GFX_VERSION={version} is set, so HSA reports that target rather than the chip's"
        ));
    }
    (gpus, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(id: &str) -> Target {
        Target::parse(id).unwrap()
    }

    /// A sysfs GPU reported as `reported`, of A0 silicon when `a0`.
    fn gpu(reported: &str, a0: bool, value: Option<&str>) -> Gpu {
        Gpu {
            id: "sysfs node 1".to_owned(),
            integrated: false,
            node: Some(1),
            overridden: None,
            product: None,
            silicon: a0.then(|| Silicon {
                asic_revision: 0,
                target: target(gfx12_strict::STRICT),
                value: value.map(str::to_owned),
                variable: gfx12_strict::VARIABLE,
            }),
            source: GpuSource::Sysfs,
            target: target(reported),
        }
    }

    #[test]
    fn a0_silicon_is_installed_for_both_names_reported_name_first() {
        assert_eq!(
            gpu("gfx1250", true, None).install_targets(),
            [target("gfx1250"), target("gfx1250-strict")]
        );
        assert_eq!(
            gpu("gfx1250-strict", true, Some("0")).install_targets(),
            [target("gfx1250-strict"), target("gfx1250")]
        );
        assert_eq!(
            gpu("gfx1250", false, None).install_targets(),
            [target("gfx1250")]
        );
    }

    #[test]
    fn a_detection_installs_for_every_name_and_reports_one_per_gpu() {
        let detection = Detection {
            gpus: vec![
                gpu("gfx1250", true, None),
                gpu("gfx1250", false, None),
                gpu("gfx1100", false, None),
            ],
            ..Detection::default()
        };
        assert_eq!(
            detection.targets(),
            [
                target("gfx1250"),
                target("gfx1250-strict"),
                target("gfx1100")
            ]
        );
        assert_eq!(
            detection.reported_targets(),
            [target("gfx1250"), target("gfx1100")]
        );
    }

    #[test]
    fn only_a0_silicon_reported_by_b0s_name_is_warned_of() {
        assert_eq!(
            gpu("gfx1250", true, Some("1")).strict_warning().as_deref(),
            Some(
                "sysfs node 1 is gfx1250 A0 silicon, which needs gfx1250-strict code, \
                 but the HSA runtime reports it as gfx1250 (HSA_DISABLE_GFX12_STRICT=1): \
                 libraries that choose code by that name run B0 code on it; \
                 set HSA_DISABLE_GFX12_STRICT=0 for the runtime to report gfx1250-strict"
            )
        );
        assert_eq!(
            gpu("gfx1250-strict", true, Some("0")).strict_warning(),
            None
        );
        assert_eq!(gpu("gfx1250", false, None).strict_warning(), None);
    }

    #[test]
    fn a0_silicon_says_so_in_json() {
        assert_eq!(
            serde_json::to_value(gpu("gfx1250", true, None)).unwrap(),
            serde_json::json!({
                "id": "sysfs node 1",
                "integrated": false,
                "node": 1,
                "product": null,
                "silicon": {
                    "asic_revision": 0,
                    "target": "gfx1250-strict",
                    "value": null,
                    "variable": "HSA_DISABLE_GFX12_STRICT",
                },
                "source": "sysfs",
                "target": "gfx1250",
            })
        );
    }
}

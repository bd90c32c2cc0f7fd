//! GPUs as the kernel driver's topology in sysfs lists them.
//!
//! Works before any ROCm is installed. Each node directory under
//! `/sys/class/kfd/kfd/topology/nodes` has a `properties` file of
//! `key value` lines (decimal) and a `name` file; GPU nodes have
//! `simd_count > 0` and a `gfx_target_version`. sysfs knows a GPU's
//! sramecc mode (a capability bit) but not its xnack mode, and its ASIC
//! revision (capability bits 25:22), which tells gfx1250 A0 silicon
//! (`gfx1250-strict`) from B0 and later ([`super::gfx12_strict`]).

use std::io;
use std::path::Path;

use kpack_gpu::Target;

use super::gfx12_strict;

/// The `capability` bit saying SRAM ECC is enabled (`HSA_CAP_SRAM_EDCSUPPORTED`).
pub const CAPABILITY_SRAMECC: u64 = 0x0400_0000;

/// A GPU node of the topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsGpu {
    /// The node number (the directory name).
    pub node: u32,
    /// Its `gfx_target_version` (major * 10000 + minor * 100 + stepping).
    pub gfx_target_version: u64,
    /// The ASIC revision (0 is A0).
    pub asic_revision: u8,
    /// The silicon's target: the processor (`gfx1250-strict` for gfx1250
    /// A0), with the sramecc mode for processors that have that feature
    /// (sysfs does not know xnack).
    pub target: Target,
    /// The node's `name` file, when not empty.
    pub product: Option<String>,
    /// Whether the capability bit for SRAM ECC is set.
    pub sramecc: bool,
    /// The PCI device id of an AMD GPU (`vendor_id` 4098), for its name in
    /// `pci.ids`.
    pub pci_device: Option<u16>,
}

/// The processor name for a `gfx_target_version`
/// (major * 10000 + minor * 100 + stepping): `gfx` + decimal major + hex
/// minor + hex stepping, so 90010 is `gfx90a` and 110501 `gfx1151`.
/// `None` when the number has no such reading.
pub(crate) fn processor_for_gfx_target_version(version: u64) -> Option<String> {
    let major = version / 10_000;
    let minor = version / 100 % 100;
    let stepping = version % 100;
    if major == 0 || minor > 15 || stepping > 15 {
        return None;
    }
    Some(format!("gfx{major}{minor:x}{stepping:x}"))
}

/// Whether a processor has the xnack feature (the GPU table says).
pub(crate) fn has_xnack_feature(processor: &str) -> bool {
    kpack_gpu::gpus::processor(processor).is_some_and(|p| p.xnack)
}

/// Whether a processor has the sramecc feature (the GPU table says).
pub(crate) fn has_sramecc_feature(processor: &str) -> bool {
    kpack_gpu::gpus::processor(processor).is_some_and(|p| p.sramecc)
}

/// The value of a `key value` line of a `properties` file, if it is there
/// and decimal.
fn property(properties: &str, key: &str) -> Option<u64> {
    properties.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        if words.next()? != key {
            return None;
        }
        words.next()?.parse().ok()
    })
}

/// An I/O error for people: the message without "(os error N)".
fn describe_io(error: &io::Error) -> String {
    let message = error.to_string();
    match message.rfind(" (os error ") {
        Some(at) if message.ends_with(')') => message[..at].to_owned(),
        _ => message,
    }
}

/// What one node directory holds.
enum Node {
    Cpu,
    Gpu(SysfsGpu),
}

fn read_node(node: u32, directory: &Path, xnack: bool) -> Result<Node, String> {
    let properties = fs_err::read_to_string(directory.join("properties"))
        .map_err(|error| format!("sysfs: node {node} skipped: {}", describe_io(&error)))?;
    let Some(simd_count) = property(&properties, "simd_count") else {
        return Err(format!("sysfs: node {node} has no simd_count, skipped"));
    };
    if simd_count == 0 {
        return Ok(Node::Cpu);
    }
    let version = property(&properties, "gfx_target_version").unwrap_or(0);
    let Some(processor) = processor_for_gfx_target_version(version) else {
        return Err(format!(
            "sysfs: node {node} has gfx_target_version {version}, which names no GPU target, skipped"
        ));
    };
    let capability = property(&properties, "capability").unwrap_or(0);
    let sramecc = capability & CAPABILITY_SRAMECC != 0;
    let asic_revision = gfx12_strict::asic_revision(capability);
    let processor = gfx12_strict::silicon_processor(&processor, asic_revision);
    let target = target_for(processor, sramecc, xnack)
        .map_err(|error| format!("sysfs: node {node}: {error}, skipped"))?;
    // The name is a nicety; a node without a readable one still counts.
    // Kernels with IP discovery write that phrase there, not a name.
    let product = fs_err::read_to_string(directory.join("name"))
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty() && name != "ip discovery");
    let pci_device = (property(&properties, "vendor_id") == Some(super::pci_ids::AMD_VENDOR_ID))
        .then(|| property(&properties, "device_id"))
        .flatten()
        .and_then(|id| u16::try_from(id).ok());
    Ok(Node::Gpu(SysfsGpu {
        node,
        gfx_target_version: version,
        asic_revision,
        target,
        product,
        sramecc,
        pci_device,
    }))
}

/// The target a processor runs as, with the modes sysfs can tell: sramecc
/// from the capability bit, xnack as the HSA runtime will set it
/// (`xnack`).
pub(crate) fn target_for(
    processor: &str,
    sramecc: bool,
    xnack: bool,
) -> Result<Target, kpack_gpu::target::ParseTargetError> {
    let mut id = processor.to_owned();
    if has_sramecc_feature(processor) {
        id.push_str(if sramecc { ":sramecc+" } else { ":sramecc-" });
    }
    // sysfs does not know the xnack mode: it is the one the HSA runtime
    // will set (`xnack`, see `DetectOptions::hsa_xnack`).
    if has_xnack_feature(processor) {
        id.push_str(if xnack { ":xnack+" } else { ":xnack-" });
    }
    Target::parse(&id)
}

/// Reads the GPU nodes under `root` (`/sys/class/kfd/kfd/topology/nodes`),
/// in node order.
///
/// CPU nodes are left out. A node that cannot be read or makes no sense is
/// skipped with a note naming the file and the error (`sysfs: node 3
/// skipped: failed to open file ...: Permission denied`); so is a root
/// that cannot be listed. A missing root (no amdgpu driver) gives no GPUs
/// and one note. Notes start with `sysfs: `.
pub fn read_topology(root: &Path, xnack: bool) -> (Vec<SysfsGpu>, Vec<String>) {
    let mut gpus = Vec::new();
    let mut notes = Vec::new();
    let entries = match fs_err::read_dir(root) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            notes.push(format!(
                "sysfs: {} does not exist (the amdgpu kernel driver is not loaded)",
                root.display()
            ));
            return (gpus, notes);
        }
        Err(error) => {
            notes.push(format!(
                "sysfs: cannot list {}: {}",
                root.display(),
                describe_io(&error)
            ));
            return (gpus, notes);
        }
    };
    let mut nodes = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => {
                if let Some(node) = entry
                    .file_name()
                    .to_str()
                    .and_then(|n| n.parse::<u32>().ok())
                {
                    nodes.push((node, entry.path()));
                }
            }
            Err(error) => notes.push(format!(
                "sysfs: cannot list {}: {}",
                root.display(),
                describe_io(&error)
            )),
        }
    }
    nodes.sort();
    for (node, directory) in nodes {
        match read_node(node, &directory, xnack) {
            Ok(Node::Gpu(gpu)) => gpus.push(gpu),
            Ok(Node::Cpu) => {}
            Err(note) => notes.push(note),
        }
    }
    (gpus, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_xnack_mode_is_the_one_the_hsa_runtime_is_told_to_set() {
        let target = |sramecc, xnack| target_for("gfx90a", sramecc, xnack).unwrap().to_string();
        assert_eq!(target(true, true), "gfx90a:sramecc+:xnack+");
        assert_eq!(target(false, false), "gfx90a:sramecc-:xnack-");
        // A processor without the feature gets no mode.
        assert_eq!(
            target_for("gfx1100", false, true).unwrap().to_string(),
            "gfx1100"
        );
    }

    #[test]
    fn gfx_target_version_is_decimal_major_hex_minor_hex_stepping() {
        let cases = [
            (90010, "gfx90a"),
            (90012, "gfx90c"),
            (90006, "gfx906"),
            (90400, "gfx940"),
            (90402, "gfx942"),
            (90500, "gfx950"),
            (100300, "gfx1030"),
            (110000, "gfx1100"),
            (110501, "gfx1151"),
            (110504, "gfx1154"),
            (110700, "gfx1170"),
            (110702, "gfx1172"),
            (120001, "gfx1201"),
            (120500, "gfx1250"),
        ];
        for (version, processor) in cases {
            assert_eq!(
                processor_for_gfx_target_version(version).as_deref(),
                Some(processor),
                "{version}"
            );
        }
    }

    #[test]
    fn gfx_target_version_without_a_target_reading_is_refused() {
        assert_eq!(processor_for_gfx_target_version(0), None);
        assert_eq!(processor_for_gfx_target_version(42), None);
        assert_eq!(processor_for_gfx_target_version(90016), None);
        assert_eq!(processor_for_gfx_target_version(91600), None);
    }

    #[test]
    fn properties_are_decimal_key_value_lines() {
        let properties = "cpu_cores_count 0\nsimd_count 416\ncapability 746325632\n\
                          unique_id 18446744073709551615\nbogus\nname_like abc\n";
        assert_eq!(property(properties, "simd_count"), Some(416));
        assert_eq!(property(properties, "capability"), Some(746_325_632));
        assert_eq!(property(properties, "unique_id"), Some(u64::MAX));
        assert_eq!(property(properties, "name_like"), None);
        assert_eq!(property(properties, "simd"), None);
        assert_eq!(property(properties, "gfx_target_version"), None);
    }

    #[test]
    fn io_errors_are_described_without_the_os_error_number() {
        let error = io::Error::from_raw_os_error(libc::EACCES);
        assert_eq!(describe_io(&error), "Permission denied");
    }
}

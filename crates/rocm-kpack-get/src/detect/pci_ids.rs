//! Product names for GPUs from the system's PCI id database (`pci.ids`, as
//! `lspci` uses it): sysfs gives only the PCI device id. The file is 1.4 MB;
//! only the AMD vendor section (1002) is parsed, and only when a GPU needs
//! a name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where distributions install the database.
pub(crate) const DEFAULT_PATHS: [&str; 2] =
    ["/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"];

/// AMD's PCI vendor id.
pub(crate) const AMD_VENDOR_ID: u64 = 0x1002;

/// The AMD device names of the first database in `paths` that can be read;
/// `None` when there is none (names are a nicety, never an error).
pub(crate) fn load_amd_devices(paths: &[PathBuf]) -> Option<BTreeMap<u16, String>> {
    paths
        .iter()
        .find_map(|path| fs_err::read(Path::new(path)).ok())
        .map(|bytes| amd_devices(&String::from_utf8_lossy(&bytes)))
}

/// The device lines (`\t744c  Navi 31 [...]`) of the vendor 1002 section of
/// a `pci.ids` text, by device id; subsystem lines (two tabs) are skipped.
pub(crate) fn amd_devices(text: &str) -> BTreeMap<u16, String> {
    let mut devices = BTreeMap::new();
    let section = if text.starts_with("1002 ") {
        Some(0)
    } else {
        text.find("\n1002 ").map(|at| at + 1)
    };
    let Some(start) = section else {
        return devices;
    };
    // The vendor line itself, then its devices until the next vendor.
    for line in text[start..].lines().skip(1) {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some(device) = line.strip_prefix('\t') else {
            break;
        };
        if device.starts_with('\t') {
            continue;
        }
        let Some((id, name)) = device.split_once(char::is_whitespace) else {
            continue;
        };
        if let Ok(id) = u16::from_str_radix(id, 16) {
            devices.insert(id, name.trim().to_owned());
        }
    }
    devices
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_the_amd_section_and_skips_subsystems() {
        let text = "# comment\n1000  Broadcom / LSI\n\t0001  53c810\n\
                    1002  Advanced Micro Devices, Inc. [AMD/ATI]\n\
                    \t73bf  Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]\n\
                    \t\t1002 0e3a  Radeon RX 6900 XT\n\
                    # a comment inside\n\
                    \t744c  Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]\n\
                    1003  ULSI Systems\n\t0201  US201\n";
        let devices = amd_devices(text);
        assert_eq!(
            devices,
            BTreeMap::from([
                (
                    0x73bf,
                    "Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]".to_owned()
                ),
                (
                    0x744c,
                    "Navi 31 [Radeon RX 7900 XT/7900 XTX/7900 GRE/7900M]".to_owned()
                ),
            ])
        );
        assert!(amd_devices("1000  Broadcom\n\t0001  x\n").is_empty());
    }
}

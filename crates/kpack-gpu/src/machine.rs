//! What an AMDGPU code object's ELF header says of its processor: the
//! `EF_AMDGPU_MACH` field of `e_flags` (LLVM's `AMDGPUUsage`, "AMDGPU ELF
//! Header") and the bits of the xnack and sramecc settings of code object
//! v4 and later ([`Target::of_flags`](crate::Target::of_flags) reads them).

/// The `e_flags` bits holding the machine.
pub const EF_AMDGPU_MACH: u32 = 0x0ff;
/// The `e_flags` bits holding the xnack setting (v4 and later).
pub const EF_AMDGPU_FEATURE_XNACK_V4: u32 = 0x300;
/// The `e_flags` bits holding the sramecc setting (v4 and later).
pub const EF_AMDGPU_FEATURE_SRAMECC_V4: u32 = 0xc00;

/// Each AMDGCN machine value and its processor, generic targets and
/// `gfx1250-strict` included (R600 machines are not code objects ROCm
/// loads).
#[rustfmt::skip]
pub const MACHINES: &[(u8, &str)] = &[
    (0x20, "gfx600"), (0x21, "gfx601"), (0x22, "gfx700"), (0x23, "gfx701"),
    (0x24, "gfx702"), (0x25, "gfx703"), (0x26, "gfx704"), (0x28, "gfx801"),
    (0x29, "gfx802"), (0x2a, "gfx803"), (0x2b, "gfx810"), (0x2c, "gfx900"),
    (0x2d, "gfx902"), (0x2e, "gfx904"), (0x2f, "gfx906"), (0x30, "gfx908"),
    (0x31, "gfx909"), (0x32, "gfx90c"), (0x33, "gfx1010"), (0x34, "gfx1011"),
    (0x35, "gfx1012"), (0x36, "gfx1030"), (0x37, "gfx1031"), (0x38, "gfx1032"),
    (0x39, "gfx1033"), (0x3a, "gfx602"), (0x3b, "gfx705"), (0x3c, "gfx805"),
    (0x3d, "gfx1035"), (0x3e, "gfx1034"), (0x3f, "gfx90a"), (0x40, "gfx940"),
    (0x41, "gfx1100"), (0x42, "gfx1013"), (0x43, "gfx1150"), (0x44, "gfx1103"),
    (0x45, "gfx1036"), (0x46, "gfx1101"), (0x47, "gfx1102"), (0x48, "gfx1200"),
    (0x49, "gfx1250"), (0x4a, "gfx1151"), (0x4b, "gfx941"), (0x4c, "gfx942"),
    (0x4e, "gfx1201"), (0x4f, "gfx950"), (0x50, "gfx1310"),
    (0x51, "gfx9-generic"), (0x52, "gfx10-1-generic"), (0x53, "gfx10-3-generic"),
    (0x54, "gfx11-generic"), (0x55, "gfx1152"), (0x57, "gfx1154"), (0x58, "gfx1153"),
    (0x59, "gfx12-generic"), (0x5a, "gfx1251"), (0x5b, "gfx12-5-generic"),
    (0x5c, "gfx1172"), (0x5d, "gfx1170"), (0x5e, "gfx1171"), (0x5f, "gfx9-4-generic"),
    (0x62, "gfx11-7-generic"), (0x63, "gfx13-generic"), (0xeb, "gfx1250-strict"),
];

/// The processor machine value `mach` stands for.
pub fn processor_of_machine(mach: u8) -> Option<&'static str> {
    MACHINES
        .iter()
        .find(|(value, _)| *value == mach)
        .map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_values_name_one_processor_each() {
        for (i, (value, name)) in MACHINES.iter().enumerate() {
            assert!(
                MACHINES[i + 1..]
                    .iter()
                    .all(|(v, n)| v != value && n != name),
                "{value:#x} {name}"
            );
        }
    }

    #[test]
    fn every_processor_of_the_gpu_table_has_a_machine_value() {
        for processor in crate::gpus::PROCESSORS {
            assert!(
                MACHINES.iter().any(|(_, name)| *name == processor.name),
                "{}",
                processor.name
            );
            if let Some(generic) = processor.generic {
                assert!(
                    MACHINES.iter().any(|(_, name)| *name == generic),
                    "{generic}"
                );
            }
        }
    }
}

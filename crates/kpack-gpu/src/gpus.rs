//! The one table of GPU facts (07-gpu-targets.md): every processor the
//! tools know, its product, the TheRock families it belongs to, its generic
//! target, whether it has the xnack and sramecc features, and the
//! packaging levels it is owned at (rocm-bootstrap's sub-family and
//! family, and the processor whose package carries its code). Families,
//! generic targets, owners and detection all read this table.

/// What is known about one GPU processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Processor {
    /// `gfx90a`.
    pub name: &'static str,
    /// The products it ships in, for people (`MI210 / MI250`).
    pub product: &'static str,
    /// TheRock's families, most specific packaging family first; empty for
    /// processors TheRock does not build (gfx803, gfx902, ...).
    pub families: &'static [&'static str],
    /// The generic target whose code runs on it.
    pub generic: Option<&'static str>,
    /// Whether it has the xnack feature (retry on page faults).
    pub xnack: bool,
    /// Whether it has the sramecc feature (ECC on SRAM).
    pub sramecc: bool,
    /// rocm-bootstrap's sub-family key (`gfx110x`); `None` for processors
    /// its packaging does not know (gfx803, gfx940, gfx941).
    pub subfamily: Option<&'static str>,
    /// The processor whose device package carries this one's code, when
    /// not its own: `gfx1250-strict` is its own target but packaged with
    /// `gfx1250`.
    pub packaged_with: Option<&'static str>,
}

/// One of rocm-bootstrap's sub-families and the family it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubFamily {
    /// `gfx12_0`.
    pub key: &'static str,
    /// `gfx12`.
    pub family: &'static str,
}

/// rocm-bootstrap 0.3.0's sub-families (`targets.py`), in its order.
#[rustfmt::skip]
pub const SUBFAMILIES: &[SubFamily] = &[
    SubFamily { key: "gfx9_0", family: "gfx9" },
    SubFamily { key: "gfx9_4", family: "gfx9" },
    SubFamily { key: "gfx9_5", family: "gfx9" },
    SubFamily { key: "gfx10_1", family: "gfx10" },
    SubFamily { key: "gfx10_3", family: "gfx10" },
    SubFamily { key: "gfx110x", family: "gfx11" },
    SubFamily { key: "gfx115x", family: "gfx11" },
    SubFamily { key: "gfx12_0", family: "gfx12" },
    SubFamily { key: "gfx12_5", family: "gfx12" },
];

/// Other spellings of sub-family keys: rocm-bootstrap's aliases.
pub const SUBFAMILY_ALIASES: &[(&str, &str)] = &[("gfx11_0", "gfx110x"), ("gfx11_5", "gfx115x")];

const fn gpu(
    name: &'static str,
    product: &'static str,
    families: &'static [&'static str],
    generic: Option<&'static str>,
    (xnack, sramecc): (bool, bool),
    subfamily: Option<&'static str>,
) -> Processor {
    Processor {
        name,
        product,
        families,
        generic,
        xnack,
        sramecc,
        subfamily,
        packaged_with: None,
    }
}

/// A processor packaged with another's device package.
const fn packaged_with(owner: &'static str, processor: Processor) -> Processor {
    Processor {
        packaged_with: Some(owner),
        ..processor
    }
}

const NONE: (bool, bool) = (false, false);
const XNACK: (bool, bool) = (true, false);
const BOTH: (bool, bool) = (true, true);
const GFX9: Option<&str> = Some("gfx9-generic");
const GFX9_4: Option<&str> = Some("gfx9-4-generic");
const GFX10_1: Option<&str> = Some("gfx10-1-generic");
const GFX10_3: Option<&str> = Some("gfx10-3-generic");
const GFX11: Option<&str> = Some("gfx11-generic");
const GFX12: Option<&str> = Some("gfx12-generic");
const GFX12_5: Option<&str> = Some("gfx12-5-generic");
const GFX11_7: Option<&str> = Some("gfx11-7-generic");
const S9_0: Option<&str> = Some("gfx9_0");
const S9_4: Option<&str> = Some("gfx9_4");
const S9_5: Option<&str> = Some("gfx9_5");
const S10_1: Option<&str> = Some("gfx10_1");
const S10_3: Option<&str> = Some("gfx10_3");
const S11_0: Option<&str> = Some("gfx110x");
const S11_5: Option<&str> = Some("gfx115x");
const S12_0: Option<&str> = Some("gfx12_0");
const S12_5: Option<&str> = Some("gfx12_5");

/// Every known processor (one row each: a table, kept one line a row).
#[rustfmt::skip]
pub const PROCESSORS: &[Processor] = &[
    gpu("gfx803", "Fiji / Polaris (RX 480/580)", &[], None, NONE, None),
    gpu("gfx900", "Vega 10 / MI25", &["gfx900-dgpu", "dgpu-all"], GFX9, XNACK, S9_0),
    gpu("gfx902", "Raven Ridge iGPU", &[], GFX9, XNACK, S9_0),
    gpu("gfx904", "Vega 12", &[], GFX9, XNACK, S9_0),
    gpu("gfx906", "Radeon VII / MI50", &["gfx906-dgpu", "dgpu-all"], GFX9, BOTH, S9_0),
    gpu("gfx908", "MI100", &["gfx908-dcgpu", "dcgpu-all"], None, BOTH, S9_0),
    gpu("gfx909", "Raven 2 iGPU", &[], GFX9, XNACK, S9_0),
    gpu("gfx90a", "MI210 / MI250", &["gfx90a-dcgpu", "dcgpu-all"], None, BOTH, S9_0),
    gpu("gfx90c", "Renoir/Lucienne/Cezanne iGPU", &["gfx90c-igpu", "igpu-all"], GFX9, XNACK, S9_0),
    gpu("gfx940", "MI300 (early)", &[], None, BOTH, None),
    gpu("gfx941", "MI300 (early)", &[], None, BOTH, None),
    gpu("gfx942", "MI300A / MI300X", &["gfx94X-all", "gfx94X-dcgpu", "dcgpu-all"], GFX9_4, BOTH, S9_4),
    gpu("gfx950", "MI350X / MI355X", &["gfx950-all", "gfx950-dcgpu", "dcgpu-all"], GFX9_4, BOTH, S9_5),
    gpu("gfx1010", "RX 5700", &["gfx101X-all", "gfx101X-dgpu", "dgpu-all"], GFX10_1, XNACK, S10_1),
    gpu("gfx1011", "Radeon Pro V520", &["gfx101X-all", "gfx101X-dgpu", "dgpu-all"], GFX10_1, XNACK, S10_1),
    gpu("gfx1012", "RX 5500", &["gfx101X-all", "gfx101X-dgpu", "dgpu-all"], GFX10_1, XNACK, S10_1),
    gpu("gfx1013", "Cyan Skillfish", &[], GFX10_1, XNACK, S10_1),
    gpu("gfx1030", "RX 6800 / XT", &["gfx103X-all", "gfx103X-dgpu", "dgpu-all"], GFX10_3, NONE, S10_3),
    gpu("gfx1031", "RX 6700 / XT", &["gfx103X-all", "gfx103X-dgpu", "dgpu-all"], GFX10_3, NONE, S10_3),
    gpu("gfx1032", "RX 6600", &["gfx103X-all", "gfx103X-dgpu", "dgpu-all"], GFX10_3, NONE, S10_3),
    gpu("gfx1033", "Van Gogh iGPU", &["gfx103X-all", "gfx103X-igpu", "igpu-all"], GFX10_3, NONE, S10_3),
    gpu("gfx1034", "RX 6500 XT", &["gfx103X-all", "gfx103X-dgpu", "dgpu-all"], GFX10_3, NONE, S10_3),
    gpu("gfx1035", "Radeon 680M iGPU", &["gfx103X-all", "gfx103X-igpu", "igpu-all"], GFX10_3, NONE, S10_3),
    gpu("gfx1036", "Raphael iGPU", &["gfx103X-all", "gfx103X-igpu", "igpu-all"], GFX10_3, NONE, S10_3),
    gpu("gfx1100", "RX 7900 XTX", &["gfx110X-all", "gfx110X-dgpu", "dgpu-all"], GFX11, NONE, S11_0),
    gpu("gfx1101", "RX 7800 XT", &["gfx110X-all", "gfx110X-dgpu", "dgpu-all"], GFX11, NONE, S11_0),
    gpu("gfx1102", "RX 7700S", &["gfx110X-all", "gfx110X-dgpu", "dgpu-all"], GFX11, NONE, S11_0),
    gpu("gfx1103", "Radeon 780M iGPU", &["gfx110X-all", "gfx110X-igpu", "igpu-all"], GFX11, NONE, S11_0),
    gpu("gfx1150", "Strix Point iGPU", &["gfx115X-all", "gfx115X-igpu", "igpu-all"], GFX11, NONE, S11_5),
    gpu("gfx1151", "Strix Halo iGPU", &["gfx115X-all", "gfx115X-igpu", "igpu-all"], GFX11, NONE, S11_5),
    gpu("gfx1152", "Krackan iGPU", &["gfx115X-all", "gfx115X-igpu", "igpu-all"], GFX11, NONE, S11_5),
    gpu("gfx1153", "Radeon 820M iGPU", &["gfx115X-all", "gfx115X-igpu", "igpu-all"], GFX11, NONE, S11_5),
    gpu("gfx1154", "", &[], None, NONE, None),
    gpu("gfx1170", "gfx1170 iGPU", &["gfx117X-all", "gfx117X-igpu", "igpu-all"], GFX11_7, NONE, None),
    gpu("gfx1171", "gfx117X iGPU", &["gfx117X-all", "gfx117X-igpu", "igpu-all"], GFX11_7, NONE, None),
    gpu("gfx1172", "gfx117X iGPU", &["gfx117X-all", "gfx117X-igpu", "igpu-all"], GFX11_7, NONE, None),
    gpu("gfx1200", "RX 9060 / XT", &["gfx120X-all", "dgpu-all"], GFX12, NONE, S12_0),
    gpu("gfx1201", "RX 9070 / XT", &["gfx120X-all", "dgpu-all"], GFX12, NONE, S12_0),
    gpu("gfx1250", "MI450 series", &["gfx125X-all", "gfx125X-dcgpu", "dcgpu-all"], GFX12_5, NONE, S12_5),
    packaged_with("gfx1250", gpu("gfx1250-strict", "MI450 series, strict mode", &["gfx125X-all", "gfx125X-dcgpu", "dcgpu-all"], None, NONE, S12_5)),
    gpu("gfx1251", "", &[], GFX12_5, NONE, S12_5),
];

/// APUs TheRock does not build, whose GPUs are integrated all the same.
const OTHER_INTEGRATED: &[&str] = &["gfx902", "gfx909"];

impl Processor {
    /// Whether it is an APU's integrated GPU: TheRock puts it in
    /// `igpu-all`, or it is an older APU's (Raven Ridge, Raven 2). The
    /// kernel's topology does not say (ROCr asks the DRM driver), so this
    /// table does.
    pub fn is_integrated(&self) -> bool {
        self.families.contains(&"igpu-all") || OTHER_INTEGRATED.contains(&self.name)
    }
}

/// The facts about processor `name`, if it is known.
pub fn processor(name: &str) -> Option<&'static Processor> {
    PROCESSORS.iter().find(|p| p.name == name)
}

/// The sub-family `key` (an alias such as `gfx11_0` read as its key), if
/// it is one.
pub fn subfamily(key: &str) -> Option<&'static SubFamily> {
    let key = SUBFAMILY_ALIASES
        .iter()
        .find(|(alias, _)| *alias == key)
        .map_or(key, |(_, canonical)| canonical);
    SUBFAMILIES.iter().find(|s| s.key == key)
}

/// Whether `key` is one of rocm-bootstrap's families (`gfx11`).
pub fn is_family(key: &str) -> bool {
    SUBFAMILIES.iter().any(|s| s.family == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_processor_is_listed_once() {
        for (i, p) in PROCESSORS.iter().enumerate() {
            assert!(
                PROCESSORS[i + 1..].iter().all(|q| q.name != p.name),
                "{}",
                p.name
            );
        }
    }

    #[test]
    fn every_xnack_processor_the_spec_names_is_known_to_have_it() {
        // The processors that disagreed across earlier tables.
        for name in ["gfx902", "gfx904", "gfx909", "gfx940", "gfx941", "gfx1013"] {
            let p = processor(name).unwrap();
            assert!(p.xnack, "{name}");
        }
        assert!(processor("gfx90a").unwrap().sramecc);
        assert!(!processor("gfx1100").unwrap().xnack);
    }

    #[test]
    fn generic_targets_have_the_members_the_spec_lists() {
        let members = |generic: &str| -> Vec<&str> {
            PROCESSORS
                .iter()
                .filter(|p| p.generic == Some(generic))
                .map(|p| p.name)
                .collect()
        };
        assert_eq!(
            members("gfx9-generic"),
            ["gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"]
        );
        assert_eq!(members("gfx9-4-generic"), ["gfx942", "gfx950"]);
        assert_eq!(members("gfx12-5-generic"), ["gfx1250", "gfx1251"]);
        assert_eq!(members("gfx11-generic").len(), 8);
        assert_eq!(
            members("gfx11-7-generic"),
            ["gfx1170", "gfx1171", "gfx1172"]
        );
    }

    #[test]
    fn apus_are_integrated_and_the_rest_are_not() {
        let integrated: Vec<&str> = PROCESSORS
            .iter()
            .filter(|p| p.is_integrated())
            .map(|p| p.name)
            .collect();
        assert_eq!(
            integrated,
            [
                "gfx902", "gfx909", "gfx90c", "gfx1033", "gfx1035", "gfx1036", "gfx1103",
                "gfx1150", "gfx1151", "gfx1152", "gfx1153", "gfx1170", "gfx1171", "gfx1172"
            ]
        );
        // Every one says so in its product too.
        assert!(PROCESSORS
            .iter()
            .all(|p| p.is_integrated() == p.product.ends_with("iGPU")));
    }

    #[test]
    fn every_name_is_a_target_and_every_subfamily_is_known() {
        for p in PROCESSORS {
            assert!(crate::Target::bare(p.name).is_ok(), "{}", p.name);
            if let Some(key) = p.subfamily {
                assert!(subfamily(key).is_some(), "{}: {key}", p.name);
            }
            if let Some(owner) = p.packaged_with {
                assert!(processor(owner).is_some_and(|o| o.packaged_with.is_none()));
            }
        }
        assert_eq!(subfamily("gfx11_5").unwrap().key, "gfx115x");
        assert!(is_family("gfx10") && !is_family("gfx10_3"));
    }
}

//! Target families as ROCm's TheRock build names them (07-gpu-targets.md):
//! every processor belongs to umbrella families (`dgpu-all`, ...) and to
//! per-generation ones (`gfx110X-all`, `gfx110X-dgpu`); every processor is
//! also a family of its own. Older names (`gfx90X-all`, `gfx110x`) are
//! aliases a repository index resolves; they are not listed here.

/// Families of each known processor, most specific packaging family first
/// where the generation has one.
const FAMILIES: &[(&str, &[&str])] = &[
    ("gfx900", &["gfx900-dgpu", "dgpu-all"]),
    ("gfx90c", &["gfx90c-igpu", "igpu-all"]),
    ("gfx906", &["gfx906-dgpu", "dgpu-all"]),
    ("gfx908", &["gfx908-dcgpu", "dcgpu-all"]),
    ("gfx90a", &["gfx90a-dcgpu", "dcgpu-all"]),
    ("gfx942", &["gfx94X-all", "gfx94X-dcgpu", "dcgpu-all"]),
    ("gfx950", &["gfx950-all", "gfx950-dcgpu", "dcgpu-all"]),
    ("gfx1010", &["gfx101X-all", "gfx101X-dgpu", "dgpu-all"]),
    ("gfx1011", &["gfx101X-all", "gfx101X-dgpu", "dgpu-all"]),
    ("gfx1012", &["gfx101X-all", "gfx101X-dgpu", "dgpu-all"]),
    ("gfx1030", &["gfx103X-all", "gfx103X-dgpu", "dgpu-all"]),
    ("gfx1031", &["gfx103X-all", "gfx103X-dgpu", "dgpu-all"]),
    ("gfx1032", &["gfx103X-all", "gfx103X-dgpu", "dgpu-all"]),
    ("gfx1033", &["gfx103X-all", "gfx103X-igpu", "igpu-all"]),
    ("gfx1034", &["gfx103X-all", "gfx103X-dgpu", "dgpu-all"]),
    ("gfx1035", &["gfx103X-all", "gfx103X-igpu", "igpu-all"]),
    ("gfx1036", &["gfx103X-all", "gfx103X-igpu", "igpu-all"]),
    ("gfx1100", &["gfx110X-all", "gfx110X-dgpu", "dgpu-all"]),
    ("gfx1101", &["gfx110X-all", "gfx110X-dgpu", "dgpu-all"]),
    ("gfx1102", &["gfx110X-all", "gfx110X-dgpu", "dgpu-all"]),
    ("gfx1103", &["gfx110X-all", "gfx110X-igpu", "igpu-all"]),
    ("gfx1150", &["gfx115X-all", "gfx115X-igpu", "igpu-all"]),
    ("gfx1151", &["gfx115X-all", "gfx115X-igpu", "igpu-all"]),
    ("gfx1152", &["gfx115X-all", "gfx115X-igpu", "igpu-all"]),
    ("gfx1153", &["gfx115X-all", "gfx115X-igpu", "igpu-all"]),
    ("gfx1200", &["gfx120X-all", "dgpu-all"]),
    ("gfx1201", &["gfx120X-all", "dgpu-all"]),
    ("gfx1250", &["gfx125X-all", "gfx125X-dcgpu", "dcgpu-all"]),
];

/// The families a processor belongs to (its own name not included); empty
/// for processors outside the table.
pub fn families_of(processor: &str) -> &'static [&'static str] {
    FAMILIES
        .iter()
        .find(|(p, _)| *p == processor)
        .map_or(&[], |(_, families)| families)
}

/// The family a packer groups a processor's code under: its generation's
/// `-all` family (`gfx110X-all`), else its own per-chip family
/// (`gfx90a-dcgpu`), else the processor itself (`gfx803`).
pub fn packaging_family(processor: &str) -> &str {
    let families = families_of(processor);
    families
        .iter()
        .find(|f| f.starts_with("gfx") && f.ends_with("X-all"))
        .or_else(|| families.first())
        .copied()
        .unwrap_or(processor)
}

/// Every processor the table knows, in table order.
pub fn processors() -> impl Iterator<Item = &'static &'static str> {
    FAMILIES.iter().map(|(processor, _)| processor)
}

/// Every processor of a family (a processor name is its own family).
pub fn members_of(family: &str) -> Vec<&'static str> {
    FAMILIES
        .iter()
        .filter(|(processor, families)| *processor == family || families.contains(&family))
        .map(|(processor, _)| *processor)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packaging_families_prefer_the_generation() {
        assert_eq!(packaging_family("gfx1101"), "gfx110X-all");
        assert_eq!(packaging_family("gfx942"), "gfx94X-all");
        assert_eq!(packaging_family("gfx90a"), "gfx90a-dcgpu");
        assert_eq!(packaging_family("gfx900"), "gfx900-dgpu");
        assert_eq!(packaging_family("gfx803"), "gfx803");
    }

    #[test]
    fn families_list_their_members() {
        assert_eq!(
            members_of("gfx110X-all"),
            ["gfx1100", "gfx1101", "gfx1102", "gfx1103"]
        );
        assert_eq!(
            members_of("gfx110X-dgpu"),
            ["gfx1100", "gfx1101", "gfx1102"]
        );
        assert!(members_of("dcgpu-all").contains(&"gfx90a"));
        assert_eq!(members_of("gfx1030"), ["gfx1030"]);
        assert!(members_of("gfx803").is_empty());
    }
}

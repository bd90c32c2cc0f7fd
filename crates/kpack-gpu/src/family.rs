//! Target families as ROCm's TheRock build names them (07-gpu-targets.md):
//! every processor belongs to umbrella families (`dgpu-all`, ...) and to
//! per-generation ones (`gfx110X-all`, `gfx110X-dgpu`); every processor is
//! also a family of its own. Older names (`gfx90X-all`, `gfx110x`) are
//! aliases a repository index resolves; they are not listed here.

use crate::gpus::PROCESSORS;

/// The families a processor belongs to (its own name not included); empty
/// for processors TheRock does not build.
pub fn families_of(processor: &str) -> &'static [&'static str] {
    crate::gpus::processor(processor).map_or(&[], |p| p.families)
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

/// Every processor TheRock builds, in table order.
pub fn processors() -> impl Iterator<Item = &'static &'static str> {
    PROCESSORS
        .iter()
        .filter(|p| !p.families.is_empty())
        .map(|p| &p.name)
}

/// Every processor of a family (a processor name is its own family).
pub fn members_of(family: &str) -> Vec<&'static str> {
    PROCESSORS
        .iter()
        .filter(|p| !p.families.is_empty())
        .filter(|p| p.name == family || p.families.contains(&family))
        .map(|p| p.name)
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

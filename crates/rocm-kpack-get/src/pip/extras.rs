//! Which `device-*` extras this machine needs from a distribution: per GPU,
//! the first the distribution provides of `device-<processor>` (and the
//! package it is packaged with: `gfx1250` for `gfx1250-strict`), then
//! `device-<family>` for its TheRock families (generation families), its
//! rocm-bootstrap sub-family (`device-gfx12-0`), the generation's short
//! lowercase key, its rocm-bootstrap family (`device-gfx12`), the umbrella
//! `dgpu-all`-style ones, then `device-<generic>`; never `device-all`
//! unless every target is asked for. Device distributions named at any of
//! these levels (`amd-torch-device-gfx12-0`) come with their extras.

use kpack_gpu::family::families_of;
use kpack_gpu::{Level, Owner, Target};
use kpack_wheel::ExtraName;

/// The extra covering every target.
pub const ALL: &str = "device-all";

/// Whether a GPU is integrated (an APU's), from its families.
pub fn is_integrated(target: &Target) -> bool {
    families_of(target.processor())
        .iter()
        .any(|family| family.ends_with("-igpu") || *family == "igpu-all")
}

/// The GPUs with the discrete ones first (a machine's dGPU is what the
/// user means to compute on; an APU's iGPU often shadows it).
pub fn discrete_first(mut targets: Vec<Target>) -> Vec<Target> {
    targets.sort_by_key(is_integrated);
    targets
}

/// The extras that would serve one GPU, most specific first.
pub fn candidates(target: &Target) -> Vec<ExtraName> {
    let processor = target.processor();
    let families = families_of(processor);
    let umbrella = |f: &str| !f.starts_with("gfx");
    let chain = Owner::chain(target);
    let level = |level: Level| chain.iter().filter(move |o| o.level() == level);
    let mut names: Vec<String> = vec![processor.to_owned()];
    names.extend(level(Level::Target).map(Owner::dist_key));
    for family in families.iter().filter(|f| !umbrella(f)) {
        names.push((*family).to_owned());
    }
    names.extend(level(Level::SubFamily).map(Owner::dist_key));
    // The short keys older indexes use (`gfx110x` for `gfx110X-all`).
    for family in families.iter().filter(|f| !umbrella(f)) {
        if let Some((generation, _)) = family.split_once("X-") {
            names.push(format!("{generation}x"));
        }
    }
    names.extend(level(Level::Family).map(Owner::dist_key));
    for family in families.iter().filter(|f| umbrella(f)) {
        names.push((*family).to_owned());
    }
    if let Some(generic) = target.generic() {
        names.push(generic.processor().to_owned());
    }
    let mut out: Vec<ExtraName> = Vec::new();
    for name in names {
        if let Ok(extra) = ExtraName::device(&name) {
            if !out.contains(&extra) {
                out.push(extra);
            }
        }
    }
    out
}

/// The extras chosen for one distribution, and the GPUs it has nothing for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtraChoice {
    /// One per GPU served, deduplicated, in GPU order.
    pub extras: Vec<ExtraName>,
    /// GPUs none of whose candidates the distribution provides.
    pub unmatched: Vec<Target>,
}

/// The `device-*` extras a distribution provides.
pub(crate) fn device_extras(provided: &[ExtraName]) -> Vec<ExtraName> {
    provided
        .iter()
        .filter(|e| e.device_suffix().is_some())
        .cloned()
        .collect()
}

/// Chooses a distribution's extras for these GPUs (already in preference
/// order). With `all_targets`, `device-all`, or every device extra when the
/// distribution has no `device-all`.
pub fn choose(provided: &[ExtraName], targets: &[Target], all_targets: bool) -> ExtraChoice {
    let device = device_extras(provided);
    if device.is_empty() {
        return ExtraChoice::default();
    }
    if all_targets {
        let all = device.iter().find(|e| e.as_str() == ALL);
        let extras = match all {
            Some(all) => vec![all.clone()],
            None => device,
        };
        return ExtraChoice {
            extras,
            unmatched: Vec::new(),
        };
    }
    let mut choice = ExtraChoice::default();
    for target in targets {
        match candidates(target).into_iter().find(|c| device.contains(c)) {
            Some(extra) if !choice.extras.contains(&extra) => choice.extras.push(extra),
            Some(_) => {}
            None => choice.unmatched.push(target.clone()),
        }
    }
    choice
}

/// Joins extras for people: `device-gfx1100, device-all`.
pub(crate) fn join_extras(extras: &[ExtraName]) -> String {
    extras
        .iter()
        .map(ExtraName::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The warning for a distribution with no device code for a GPU.
pub(crate) fn unmatched_warning(dist: &str, target: &Target, offered: &[ExtraName]) -> String {
    format!(
        "{dist} has no device code for {target}: it offers {} (--all-targets takes device-all)",
        join_extras(offered)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(list: &[&str]) -> Vec<Target> {
        list.iter().map(|t| Target::parse(t).unwrap()).collect()
    }

    fn extras(list: &[&str]) -> Vec<ExtraName> {
        list.iter().map(|e| ExtraName::new(e).unwrap()).collect()
    }

    fn names(list: &[ExtraName]) -> Vec<&str> {
        list.iter().map(ExtraName::as_str).collect()
    }

    #[test]
    fn candidates_go_from_processor_to_family_to_generic() {
        let list = candidates(&Target::parse("gfx1100").unwrap());
        assert_eq!(
            names(&list),
            [
                "device-gfx1100",
                "device-gfx110x-all",
                "device-gfx110x-dgpu",
                "device-gfx110x",
                "device-gfx11",
                "device-dgpu-all",
                "device-gfx11-generic"
            ]
        );
        let list = candidates(&Target::parse("gfx90a:xnack-").unwrap());
        assert_eq!(list[0].as_str(), "device-gfx90a");
    }

    #[test]
    fn candidates_take_rocm_bootstraps_sub_families_and_families() {
        let list = candidates(&Target::parse("gfx1201").unwrap());
        assert_eq!(
            names(&list),
            [
                "device-gfx1201",
                "device-gfx120x-all",
                "device-gfx12-0",
                "device-gfx120x",
                "device-gfx12",
                "device-dgpu-all",
                "device-gfx12-generic"
            ]
        );
        let list = candidates(&Target::parse("gfx942:sramecc+:xnack-").unwrap());
        assert_eq!(
            &names(&list)[..5],
            [
                "device-gfx942",
                "device-gfx94x-all",
                "device-gfx94x-dcgpu",
                "device-gfx9-4",
                "device-gfx94x"
            ]
        );
        assert!(names(&list).contains(&"device-gfx9"));
        let list = candidates(&Target::parse("gfx1250-strict").unwrap());
        assert_eq!(
            &names(&list)[..2],
            ["device-gfx1250-strict", "device-gfx1250"]
        );
    }

    #[test]
    fn each_gpu_takes_the_most_specific_level_provided_and_the_union_is_installed() {
        let provided = extras(&[
            "device-gfx1201",
            "device-gfx12-0",
            "device-gfx12",
            "device-gfx11",
            "device-all",
        ]);
        let gpus = targets(&["gfx1201", "gfx1200", "gfx1151", "gfx1250"]);
        let choice = choose(&provided, &gpus, false);
        assert_eq!(
            names(&choice.extras),
            [
                "device-gfx1201",
                "device-gfx12-0",
                "device-gfx11",
                "device-gfx12"
            ]
        );
        assert!(choice.unmatched.is_empty());
    }

    #[test]
    fn the_first_provided_candidate_is_chosen() {
        let provided = extras(&["device-gfx1100", "device-gfx110X-all", "device-all"]);
        let choice = choose(&provided, &targets(&["gfx1101"]), false);
        assert_eq!(names(&choice.extras), ["device-gfx110x-all"]);
        let choice = choose(&provided, &targets(&["gfx1100"]), false);
        assert_eq!(names(&choice.extras), ["device-gfx1100"]);
        let provided = extras(&["device-gfx11-generic"]);
        let choice = choose(&provided, &targets(&["gfx1151"]), false);
        assert_eq!(names(&choice.extras), ["device-gfx11-generic"]);
    }

    #[test]
    fn device_all_only_when_asked() {
        let provided = extras(&["device-gfx90a", "device-all"]);
        let choice = choose(&provided, &targets(&["gfx1100"]), false);
        assert!(choice.extras.is_empty());
        assert_eq!(choice.unmatched, targets(&["gfx1100"]));
        let choice = choose(&provided, &targets(&["gfx1100"]), true);
        assert_eq!(names(&choice.extras), ["device-all"]);
    }

    #[test]
    fn one_extra_per_gpu_deduplicated() {
        let provided = extras(&["device-gfx1100", "device-gfx90a", "device-gfx1151"]);
        let gpus = discrete_first(targets(&[
            "gfx1151",
            "gfx90a:xnack-",
            "gfx1100",
            "gfx90a:xnack+",
        ]));
        let choice = choose(&provided, &gpus, false);
        assert_eq!(
            names(&choice.extras),
            ["device-gfx90a", "device-gfx1100", "device-gfx1151"]
        );
    }

    #[test]
    fn integrated_gpus_sort_last() {
        let gpus = discrete_first(targets(&["gfx1103", "gfx1100"]));
        assert_eq!(gpus, targets(&["gfx1100", "gfx1103"]));
        assert!(is_integrated(&Target::parse("gfx1151").unwrap()));
        assert!(!is_integrated(&Target::parse("gfx942").unwrap()));
    }

    #[test]
    fn distributions_without_device_extras_are_left_alone() {
        let choice = choose(&extras(&["cuda", "dev"]), &targets(&["gfx1100"]), false);
        assert_eq!(choice, ExtraChoice::default());
    }
}

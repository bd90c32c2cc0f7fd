//! Shrinking an environment installed from an every-GPU index (RFC0012's
//! `whl/`, 06-python.md "Environments from an every-GPU index"): the
//! device distributions none of the machine's GPUs needs are uninstalled
//! with the environment's own installer, and each entry distribution's
//! requirement that demanded all of them (`torch[device-all]`, or
//! `torch-device-all`) leaves its installed METADATA, so that `pip check`
//! stays clean. Nothing is removed that an installed distribution still
//! requires for another reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_cli::ByteSize;
use kpack_gpu::Target;
use kpack_wheel::record::{Record, RecordHash};
use kpack_wheel::{DistName, ExtraName, MetadataEditor, RequiresDist};
use serde::Serialize;

use super::dist_file::read_dist_info_file;
use super::environment::{InstalledDist, PythonEnvironment};
use super::extras::{choose, ALL};
use super::installer::Installer;
use super::PipError;
use crate::output::Output;

/// The file a prune leaves in an entry distribution's `.dist-info`: the
/// requirements it took out of METADATA and the distributions it
/// uninstalled, so later syncs and `pip check` know.
pub const PRUNED_FILE: &str = "kpack-get-pruned.json";

/// An entry distribution's requirement that demands every device
/// distribution, which a prune takes out of its METADATA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Demand {
    /// The entry distribution.
    pub host: DistName,
    /// The requirement as its METADATA writes it (`torch[device-all]`).
    pub requirement: String,
}

/// What a prune does to an environment, decided from its distributions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrunePlan {
    /// The requirements that go from their entry distributions' METADATA.
    pub demands: Vec<Demand>,
    /// The distributions to uninstall, by name.
    pub remove: BTreeSet<DistName>,
    /// Unneeded device distributions kept, each with an installed
    /// distribution that still requires it.
    pub kept: BTreeMap<DistName, DistName>,
}

impl PrunePlan {
    /// Whether the prune changes nothing.
    pub fn is_empty(&self) -> bool {
        self.demands.is_empty() && self.remove.is_empty()
    }
}

/// Plans the prune of `installed` for `targets` (every target with
/// `all_targets`, which removes nothing).
pub fn plan_prune(installed: &[InstalledDist], targets: &[Target], all_targets: bool) -> PrunePlan {
    if all_targets {
        return PrunePlan::default();
    }
    let present: BTreeSet<&DistName> = installed.iter().map(|d| &d.metadata.name).collect();
    let mut needed = BTreeSet::new();
    let mut device = BTreeSet::new();
    let mut demands = Vec::new();
    for dist in installed {
        let metadata = &dist.metadata;
        let choice = choose(&metadata.provides_extra, targets, false);
        for requirement in &metadata.requires_dist {
            let Some(extra) = requirement.extra().filter(|e| e.device_suffix().is_some()) else {
                continue;
            };
            device.insert(requirement.name.clone());
            if choice.extras.contains(&extra) {
                needed.insert(requirement.name.clone());
            }
        }
        for requirement in metadata.requires_dist.iter().filter(|r| r.marker.is_none()) {
            if let Some(all) = demanded_all(&metadata.name, requirement) {
                demands.push(Demand {
                    host: metadata.name.clone(),
                    requirement: requirement.text.clone(),
                });
                if let Some(all) = all {
                    device.insert(all);
                }
            }
        }
    }
    let mut remove: BTreeSet<DistName> = device
        .into_iter()
        .filter(|name| present.contains(name) && !needed.contains(name))
        .collect();
    let kept = keep_required(installed, &demands, &mut remove);
    PrunePlan {
        demands,
        remove,
        kept,
    }
}

/// Whether `requirement` of `host` demands every device distribution: its
/// own `device-all` extra (`Some(None)`), or its `-device-all`
/// distribution (`Some(Some(name))`).
pub(crate) fn demanded_all(
    host: &DistName,
    requirement: &RequiresDist,
) -> Option<Option<DistName>> {
    let all = ExtraName::new(ALL).ok()?;
    if requirement.name == *host && requirement.extras().contains(&all) {
        return Some(None);
    }
    let meta = host.device("all").ok()?;
    (requirement.name == meta).then_some(Some(meta))
}

/// Takes out of `remove` (to a fixpoint) every distribution an installed
/// distribution not being removed still requires unconditionally, other
/// than by a demand that goes; returns each kept one with a requirer.
fn keep_required(
    installed: &[InstalledDist],
    demands: &[Demand],
    remove: &mut BTreeSet<DistName>,
) -> BTreeMap<DistName, DistName> {
    let mut kept = BTreeMap::new();
    loop {
        let mut required = Vec::new();
        for dist in installed
            .iter()
            .filter(|d| !remove.contains(&d.metadata.name))
        {
            let host = &dist.metadata.name;
            for requirement in &dist.metadata.requires_dist {
                let dropped = demands
                    .iter()
                    .any(|d| &d.host == host && d.requirement == requirement.text);
                if requirement.extra().is_none() && !dropped && remove.contains(&requirement.name) {
                    required.push((requirement.name.clone(), host.clone()));
                }
            }
        }
        if required.is_empty() {
            return kept;
        }
        for (name, host) in required {
            remove.remove(&name);
            kept.entry(name).or_insert(host);
        }
    }
}

/// A distribution a prune uninstalls, and the bytes its RECORD lists.
#[derive(Debug, Clone, Serialize)]
pub struct Removed {
    pub name: DistName,
    pub version: String,
    pub bytes: u64,
}

/// What a prune did, or would do with `dry_run`.
#[derive(Debug, Clone, Serialize)]
pub struct PruneOutcome {
    pub dry_run: bool,
    /// The requirements taken out of entry distributions' METADATA.
    pub requirements: Vec<String>,
    pub removed: Vec<Removed>,
    /// The bytes the removed distributions' RECORDs list.
    pub freed: u64,
    /// Unneeded device distributions kept, with what requires each.
    pub kept: BTreeMap<DistName, DistName>,
    /// The installer that uninstalled them.
    pub installer: Option<String>,
}

/// Prunes `env` for `targets`: takes each demand for every device
/// distribution out of its entry distribution's METADATA (its RECORD row
/// updated, [`PRUNED_FILE`] written), then uninstalls the device
/// distributions none of them needs with the environment's installer.
/// Everything is read and checked before anything changes.
pub fn prune_environment(
    env: &PythonEnvironment,
    targets: &[Target],
    all_targets: bool,
    dry_run: bool,
    output: &dyn Output,
) -> Result<PruneOutcome, PipError> {
    let installed = env.installed()?.dists;
    let plan = if targets.is_empty() && !all_targets {
        output.warn(
            "no GPU found: nothing is pruned (--target names the GPUs whose device code stays)",
        );
        PrunePlan::default()
    } else {
        plan_prune(&installed, targets, all_targets)
    };
    let removed = plan
        .remove
        .iter()
        .filter_map(|name| installed.iter().find(|d| &d.metadata.name == name))
        .map(removal)
        .collect::<Result<Vec<_>, _>>()?;
    let mut by_host: BTreeMap<&DistName, Vec<String>> = BTreeMap::new();
    for demand in &plan.demands {
        by_host
            .entry(&demand.host)
            .or_default()
            .push(demand.requirement.clone());
    }
    let edits = by_host
        .into_iter()
        .filter_map(|(host, requirements)| {
            let dist = installed.iter().find(|d| &d.metadata.name == host)?;
            Some(edit(dist, requirements, &removed))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut outcome = PruneOutcome {
        dry_run,
        requirements: plan.demands.iter().map(|d| d.requirement.clone()).collect(),
        freed: removed.iter().map(|r| r.bytes).sum(),
        removed,
        kept: plan.kept.clone(),
        installer: None,
    };
    if !targets.is_empty() || all_targets {
        say(&plan, &outcome, output);
    }
    if plan.is_empty() || dry_run {
        return Ok(outcome);
    }
    for edit in &edits {
        edit.apply()?;
    }
    if !outcome.removed.is_empty() {
        let installer = Installer::for_environment(env)?;
        let names: Vec<String> = outcome.removed.iter().map(|r| r.name.to_string()).collect();
        installer.uninstall(&names)?;
        output.line(&format!(
            "removed {} with {}; freed {}",
            names.join(" "),
            installer.describe_uninstall(),
            ByteSize(outcome.freed)
        ));
        outcome.installer = Some(installer.describe_uninstall());
    }
    Ok(outcome)
}

/// Says what the prune finds to do.
fn say(plan: &PrunePlan, outcome: &PruneOutcome, output: &dyn Output) {
    if plan.is_empty() {
        output.line("nothing to prune: every installed device distribution serves a GPU here");
    }
    for (name, by) in &plan.kept {
        output.note(&format!("{name} is kept: {by} requires it"));
    }
    let verb = if outcome.dry_run {
        "would drop"
    } else {
        "drops"
    };
    for demand in &plan.demands {
        output.line(&format!(
            "{}: {verb} `{}` from its METADATA (it demands every GPU's device code)",
            demand.host, demand.requirement
        ));
    }
    for removed in &outcome.removed {
        output.detail(&format!(
            "{} {} ({})",
            removed.name,
            removed.version,
            ByteSize(removed.bytes)
        ));
    }
    if outcome.dry_run && !outcome.removed.is_empty() {
        let names: Vec<&str> = outcome.removed.iter().map(|r| r.name.as_str()).collect();
        output.line(&format!(
            "would remove {}; frees {}",
            names.join(" "),
            ByteSize(outcome.freed)
        ));
    }
}

/// `dist` to uninstall, with the bytes its RECORD lists (a distribution
/// without a readable RECORD is refused: no installer could remove it).
fn removal(dist: &InstalledDist) -> Result<Removed, PipError> {
    let (record, _) = read_record(&dist.dist_info)?;
    Ok(Removed {
        name: dist.metadata.name.clone(),
        version: dist.metadata.version.clone(),
        bytes: record.rows().iter().filter_map(|row| row.size).sum(),
    })
}

/// The RECORD of the distribution at `dist_info`, and its path.
fn read_record(dist_info: &Path) -> Result<(Record, PathBuf), PipError> {
    let path = dist_info.join("RECORD");
    let text = read_dist_info_file(&path).map_err(|error| PipError::DistInfo {
        reason: error.to_string(),
    })?;
    let record = Record::parse(&text).map_err(|error| PipError::DistInfo {
        reason: format!("{}: {error}", path.display()),
    })?;
    Ok((record, path))
}

/// The new METADATA, RECORD and [`PRUNED_FILE`] of an entry distribution,
/// made before anything is written.
#[derive(Debug)]
struct Edit {
    files: Vec<(PathBuf, String)>,
}

impl Edit {
    /// Writes each file atomically; a failure restores those written.
    fn apply(&self) -> Result<(), PipError> {
        let mut written: Vec<(&Path, Option<String>)> = Vec::new();
        for (path, text) in &self.files {
            let before = read_dist_info_file(path).ok();
            if let Err(error) = kpack_fs::write_atomic(path, text.as_bytes()) {
                for (path, before) in written {
                    match before {
                        Some(text) => drop(kpack_fs::write_atomic(path, text.as_bytes())),
                        None => drop(fs_err::remove_file(path)),
                    }
                }
                return Err(PipError::Write {
                    path: path.clone(),
                    source: error.source,
                });
            }
            written.push((path, before));
        }
        Ok(())
    }
}

/// The edit of entry distribution `host`: its METADATA without
/// `requirements`, [`PRUNED_FILE`] saying what went (with `removed`),
/// RECORD rows for both.
fn edit(
    host: &InstalledDist,
    requirements: Vec<String>,
    removed: &[Removed],
) -> Result<Edit, PipError> {
    let metadata_path = host.dist_info.join("METADATA");
    let text = read_dist_info_file(&metadata_path).map_err(|error| PipError::DistInfo {
        reason: error.to_string(),
    })?;
    let mut editor = MetadataEditor::new(&text);
    for requirement in &requirements {
        editor.remove_requires_dist(requirement);
    }
    let metadata = editor.finish();
    let pruned = serde_json::to_string_pretty(&Pruned {
        schema: 1,
        requirements,
        uninstalled: removed.iter().map(|r| r.name.to_string()).collect(),
    })
    .unwrap_or_default();
    let (mut record, record_path) = read_record(&host.dist_info)?;
    let dir = host
        .dist_info
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    record.set(
        &format!("{dir}/METADATA"),
        Some(RecordHash::of_bytes(metadata.as_bytes())),
        Some(metadata.len() as u64),
    );
    record.set(
        &format!("{dir}/{PRUNED_FILE}"),
        Some(RecordHash::of_bytes(pruned.as_bytes())),
        Some(pruned.len() as u64),
    );
    Ok(Edit {
        files: vec![
            (host.dist_info.join(PRUNED_FILE), pruned),
            (metadata_path, metadata),
            (record_path, record.to_text()),
        ],
    })
}

/// What [`PRUNED_FILE`] holds.
#[derive(Debug, Serialize)]
struct Pruned {
    schema: u32,
    requirements: Vec<String>,
    uninstalled: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kpack_wheel::Metadata;
    use std::path::PathBuf;

    fn dist(text: &str) -> InstalledDist {
        InstalledDist {
            metadata: Metadata::parse(text).unwrap(),
            dist_info: PathBuf::from("x.dist-info"),
        }
    }

    /// `demo` from an every-GPU index: device extras for two GPUs and
    /// `device-all`, demanded by itself.
    fn whl_host(demand: &str) -> InstalledDist {
        let mut text = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n".to_owned();
        for gpu in ["gfx1100", "gfx90a"] {
            text.push_str(&format!(
                "Provides-Extra: device-{gpu}\nRequires-Dist: demo-device-{gpu}==1.0; extra == \"device-{gpu}\"\n"
            ));
        }
        text.push_str("Provides-Extra: device-all\n");
        for gpu in ["gfx1100", "gfx90a"] {
            text.push_str(&format!(
                "Requires-Dist: demo-device-{gpu}==1.0; extra == \"device-all\"\n"
            ));
        }
        text.push_str(&format!("Requires-Dist: {demand}\n"));
        dist(&text)
    }

    fn device(gpu: &str) -> InstalledDist {
        dist(&format!(
            "Metadata-Version: 2.1\nName: demo-device-{gpu}\nVersion: 1.0\nRequires-Dist: demo==1.0\n"
        ))
    }

    fn names(set: &BTreeSet<DistName>) -> Vec<&str> {
        set.iter().map(DistName::as_str).collect()
    }

    #[test]
    fn the_unneeded_device_distributions_go_with_the_demand_for_all() {
        let installed = [
            whl_host("demo[device-all]"),
            device("gfx1100"),
            device("gfx90a"),
        ];
        let gfx1100 = [Target::parse("gfx1100").unwrap()];
        let plan = plan_prune(&installed, &gfx1100, false);
        assert_eq!(names(&plan.remove), ["demo-device-gfx90a"]);
        assert_eq!(plan.demands.len(), 1);
        assert_eq!(plan.demands[0].requirement, "demo[device-all]");
        assert!(plan.kept.is_empty());
        assert!(plan_prune(&installed, &gfx1100, true).is_empty());
    }

    #[test]
    fn a_device_all_distribution_goes_with_what_only_it_required() {
        let meta = dist(
            "Metadata-Version: 2.1\nName: demo-device-all\nVersion: 1.0\n\
             Requires-Dist: demo-device-gfx1100==1.0\nRequires-Dist: demo-device-gfx90a==1.0\n",
        );
        let installed = [
            whl_host("demo-device-all==1.0"),
            meta,
            device("gfx1100"),
            device("gfx90a"),
        ];
        let plan = plan_prune(&installed, &[Target::parse("gfx1100").unwrap()], false);
        assert_eq!(
            names(&plan.remove),
            ["demo-device-all", "demo-device-gfx90a"]
        );
    }

    #[test]
    fn a_device_distribution_another_distribution_requires_stays() {
        let user = dist(
            "Metadata-Version: 2.1\nName: tool\nVersion: 2\nRequires-Dist: demo-device-gfx90a\n",
        );
        let installed = [
            whl_host("demo[device-all]"),
            device("gfx1100"),
            device("gfx90a"),
            user,
        ];
        let plan = plan_prune(&installed, &[Target::parse("gfx1100").unwrap()], false);
        assert!(plan.remove.is_empty());
        assert_eq!(
            plan.kept.values().map(DistName::as_str).collect::<Vec<_>>(),
            ["tool"]
        );
    }

    #[test]
    fn one_edit_takes_every_demand_out_and_records_it() {
        let site = tempfile::tempdir().unwrap();
        let dist_info = site.path().join("demo-1.0.dist-info");
        fs_err::create_dir_all(&dist_info).unwrap();
        let text = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\
                    Requires-Dist: demo[device-all]\nRequires-Dist: demo-device-all==1.0\n\
                    Requires-Dist: numpy\n\nBody\n";
        fs_err::write(dist_info.join("METADATA"), text).unwrap();
        fs_err::write(
            dist_info.join("RECORD"),
            "demo-1.0.dist-info/METADATA,sha256=x,1\ndemo-1.0.dist-info/RECORD,,\n",
        )
        .unwrap();
        let host = InstalledDist {
            metadata: Metadata::parse(text).unwrap(),
            dist_info: dist_info.clone(),
        };
        let demands = vec![
            "demo[device-all]".to_owned(),
            "demo-device-all==1.0".to_owned(),
        ];
        edit(&host, demands, &[]).unwrap().apply().unwrap();
        let metadata = fs_err::read_to_string(dist_info.join("METADATA")).unwrap();
        assert_eq!(
            metadata,
            "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: numpy\n\nBody\n"
        );
        let record = fs_err::read_to_string(dist_info.join("RECORD")).unwrap();
        let hash = RecordHash::of_bytes(metadata.as_bytes());
        assert!(
            record.contains(&format!(
                "demo-1.0.dist-info/METADATA,{hash},{}",
                metadata.len()
            )),
            "{record}"
        );
        assert!(
            record.contains(&format!("demo-1.0.dist-info/{PRUNED_FILE},sha256=")),
            "{record}"
        );
        assert!(
            record.ends_with("demo-1.0.dist-info/RECORD,,\n"),
            "{record}"
        );
        let pruned = fs_err::read_to_string(dist_info.join(PRUNED_FILE)).unwrap();
        assert!(pruned.contains("demo-device-all==1.0"), "{pruned}");
    }
}

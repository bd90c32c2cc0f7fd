//! `install` and `upgrade`: plan, download, stage, commit.

use std::path::Path;
use std::sync::Arc;

use kpack_gpu::Target;
use kpack_repo_index::fetch::{Client, Progress};
use kpack_repo_index::ResolveError;
use kpack_repo_index::{ByteSize, Dependency, Explanation, PackageName};
use rocm_kpack_get::install::plan::{check_prefix_roots, make_plan, Plan, PlanError};
use rocm_kpack_get::install::record::InstalledRecord;
use rocm_kpack_get::install::InstallError;
use rocm_kpack_get::layout::Layout;
use rocm_kpack_get::repo::Repo;
use serde_json::json;

use super::{parse_request, Context, Failure};
use crate::printer::{artifact_json, artifact_line, fetched, saving};
use crate::progress::{Bars, Lines};

/// What to install: packages asked for, or newer versions of installed
/// ones (all, or those named), decided from the record read under the lock.
enum Wanted {
    /// Packages asked for; with `reinstall`, installed again even when
    /// installed as planned.
    Dependencys {
        requests: Vec<Dependency>,
        reinstall: bool,
    },
    /// Installed packages to upgrade (all when none are named); with
    /// `allow_downgrade`, to the highest version offered even if older.
    Upgrades {
        names: Vec<PackageName>,
        allow_downgrade: bool,
    },
}

pub fn install(
    context: &Context,
    packages: &[String],
    dry_run: bool,
    reinstall: bool,
) -> Result<(), Failure> {
    let requests = packages
        .iter()
        .map(|p| parse_request(p))
        .collect::<Result<Vec<_>, _>>()?;
    run(
        context,
        Wanted::Dependencys {
            requests,
            reinstall,
        },
        dry_run,
    )
}

pub fn upgrade(
    context: &Context,
    packages: &[PackageName],
    dry_run: bool,
    allow_downgrade: bool,
) -> Result<(), Failure> {
    let wanted = Wanted::Upgrades {
        names: packages.to_vec(),
        allow_downgrade,
    };
    run(context, wanted, dry_run)
}

/// The requests an upgrade makes: every installed package named (or all),
/// at its installed version or newer, never older: a repository offering
/// only older versions (a stale mirror replaying an older root, a version
/// withdrawn) must not downgrade silently. With `allow_downgrade`, at
/// the highest version offered.
fn upgrade_requests(
    record: &InstalledRecord,
    packages: &[PackageName],
    allow_downgrade: bool,
    prefix: &Path,
) -> Result<Vec<Dependency>, Failure> {
    if let Some(name) = packages.iter().find(|n| !record.packages.contains_key(*n)) {
        return Err(InstallError::NotInstalled {
            name: name.clone(),
            prefix: prefix.to_owned(),
        }
        .into());
    }
    Ok(record
        .packages
        .iter()
        .filter(|(name, _)| packages.is_empty() || packages.contains(name))
        .map(|(name, installed)| match allow_downgrade {
            true => Dependency::any(name.clone()),
            false => Dependency::at_least(name.clone(), &installed.version),
        })
        .collect())
}

/// What a plan is made from, besides the requests.
struct Planning<'a> {
    client: &'a Client,
    repos: &'a [Repo],
    gpus: &'a [Target],
    layout: Layout,
    record: &'a InstalledRecord,
}

impl Planning<'_> {
    fn plan(&self, context: &Context, requests: &[Dependency]) -> Result<Plan, PlanError> {
        let (client, repos, record) = (self.client, self.repos, self.record);
        make_plan(
            client,
            &context.cache,
            repos,
            requests,
            self.gpus,
            self.layout,
            record,
        )
    }
}

/// Plans `requests`; for an upgrade, a package the repositories offer no
/// version of at or above the installed one is kept as it is, with a
/// warning saying what they offer, and the rest planned again.
fn plan_keeping_newer(
    context: &Context,
    planning: &Planning<'_>,
    mut requests: Vec<Dependency>,
    upgrading: bool,
) -> Result<(Plan, Vec<Dependency>), Failure> {
    let record = planning.record;
    loop {
        let planned = planning.plan(context, &requests);
        let error = match planned {
            Ok(plan) => return Ok((plan, requests)),
            Err(error) => error,
        };
        let PlanError::Resolve(ResolveError::NoVersion {
            name, available, ..
        }) = &error
        else {
            return Err(error.into());
        };
        let kept = upgrading
            .then(|| record.packages.get(name))
            .flatten()
            .filter(|installed| available.iter().all(|v| *v < installed.version));
        let Some(installed) = kept else {
            return Err(error.into());
        };
        let offered = available
            .iter()
            .max()
            .map_or("no version".to_owned(), ToString::to_string);
        context.printer.warn(format!(
            "{name}: the repositories offer {offered}, older than the installed {}; kept (`kpack-get upgrade --allow-downgrade {name}` or `kpack-get install {name}@={offered}` downgrades)",
            installed.version
        ));
        let name = name.clone();
        requests.retain(|r| r.name != name);
    }
}

fn run(context: &Context, wanted: Wanted, dry_run: bool) -> Result<(), Failure> {
    let printer = &context.printer;
    let prefix = context.prefix(!dry_run)?;
    // A dry run reads the record without the lock; it changes nothing.
    let lock = if dry_run {
        None
    } else {
        Some(context.lock(&prefix)?)
    };
    let record = prefix.record()?;
    let upgrading = matches!(wanted, Wanted::Upgrades { .. });
    let (requests, reinstall) = match wanted {
        Wanted::Dependencys {
            requests,
            reinstall,
        } => (requests, reinstall),
        Wanted::Upgrades {
            names,
            allow_downgrade,
        } => (
            upgrade_requests(&record, &names, allow_downgrade, prefix.root())?,
            false,
        ),
    };
    if requests.is_empty() {
        printer.line("nothing is installed; nothing to upgrade");
        printer.json(&json!({ "packages": [] }));
        return Ok(());
    }
    let client = context.client()?;
    let repos = context.repos(&client)?;
    for warning in check_prefix_roots(&repos, &record, context.trust.allow_rollback)? {
        printer.warn(warning);
    }
    let gpus = choose_gpus(context, &record, upgrading)?;
    let (search, decision) = super::layout::search_for_new_library(context);
    let requests = with_relayout(requests, &record, decision.layout);
    let planning = Planning {
        client: &client,
        repos: &repos,
        gpus: &gpus,
        layout: decision.layout,
        record: &record,
    };
    let (mut plan, requests) = plan_keeping_newer(context, &planning, requests, upgrading)?;
    if reinstall {
        plan.reinstall(&requests);
    }
    show_plan(context, &plan, dry_run);
    let runtime = super::layout::show(context, &search, &decision, false);
    let Some(lock) = lock else {
        printer.json(&with_runtime(plan_json(context, &plan, false), &runtime));
        return Ok(());
    };
    if plan.pending().next().is_none() {
        printer.line(format!(
            "nothing to do: already installed in {}",
            prefix.root().display()
        ));
        printer.json(&with_runtime(plan_json(context, &plan, true), &runtime));
        return Ok(());
    }
    let cached = plan
        .size()
        .saturating_sub(plan.download_size(&context.cache));
    download(context, &client, &plan)?;
    let applied = prefix.apply(&lock, &plan.installs(&context.cache), &[])?;
    for package in plan.pending() {
        let verb = match &package.installed {
            Some(old) if *old > package.version => "downgraded",
            _ if upgrading => "upgraded",
            _ => "installed",
        };
        let from = match &package.installed {
            Some(old) if *old != package.version => format!(" (was {old})"),
            _ => String::new(),
        };
        printer.line(format!("{verb} {} {}{from}", package.name, package.version));
    }
    printer.line(format!(
        "{} files into {}; {}",
        applied.files_added,
        prefix.root().display(),
        fetched(plan.size(), plan.full_size(), cached)
    ));
    if plan.layout == Layout::Fat {
        printer.line(format!(
            "layout fat: {} made fat for {}; no .kpack/ archives installed",
            match applied.materialized {
                1 => "1 binary".to_owned(),
                n => format!("{n} binaries"),
            },
            describe_targets(&plan.gpus)
        ));
    }
    printer.json(&with_runtime(plan_json(context, &plan, true), &runtime));
    Ok(())
}

/// `requests`, plus every installed package whose layout is not `layout`
/// at the version installed: a change of layout rewrites them all.
fn with_relayout(
    mut requests: Vec<Dependency>,
    record: &InstalledRecord,
    layout: Layout,
) -> Vec<Dependency> {
    for (name, package) in &record.packages {
        if package.layout != layout && !requests.iter().any(|r| &r.name == name) {
            requests.push(Dependency::exact(name.clone(), &package.version));
        }
    }
    requests
}

fn describe_targets(gpus: &[Target]) -> String {
    if gpus.is_empty() {
        "no GPU (host entries only)".to_owned()
    } else {
        kpack_gpu::target::join_targets(gpus)
    }
}

/// `json` with the runtime found and the layout's fields added.
fn with_runtime(mut json: serde_json::Value, runtime: &serde_json::Value) -> serde_json::Value {
    if let (Some(json), Some(runtime)) = (json.as_object_mut(), runtime.as_object()) {
        json.extend(runtime.clone());
    }
    json
}

/// The GPUs to install for: those detected (or given), else, when
/// upgrading, the targets the packages were installed for; none is said.
fn choose_gpus(
    context: &Context,
    record: &InstalledRecord,
    upgrading: bool,
) -> Result<Vec<Target>, Failure> {
    let (gpus, detection) = context.gpus()?;
    let gpus = if gpus.is_empty() && upgrading {
        recorded_targets(record)
    } else {
        gpus
    };
    if gpus.is_empty() {
        context.printer.warn(format!(
            "no GPU found ({}): installing host parts only; --target chooses GPU targets",
            if detection.notes.is_empty() {
                "no source reported one".to_owned()
            } else {
                detection.notes.join("; ")
            }
        ));
    } else {
        context
            .printer
            .detail(format!("GPUs: {}", kpack_gpu::target::join_targets(&gpus)));
    }
    Ok(gpus)
}

/// Fetches the chosen artifacts of the pending packages into the cache,
/// with bars on a terminal and lines otherwise.
fn download(context: &Context, client: &Client, plan: &Plan) -> Result<(), Failure> {
    let downloads = plan.downloads();
    let printer = &context.printer;
    let bars = printer
        .bars
        .then(|| Arc::new(Bars::new(plan.download_size(&context.cache))));
    let progress: Arc<dyn Progress> = match &bars {
        Some(bars) => bars.clone(),
        None => Arc::new(Lines::new(*printer)),
    };
    let fetched = client.fetch_all(&context.cache, &downloads, progress);
    if let Some(bars) = &bars {
        bars.finish();
    }
    Ok(fetched?)
}

fn recorded_targets(record: &InstalledRecord) -> Vec<Target> {
    let mut targets: Vec<Target> = record
        .packages
        .values()
        .flat_map(|p| p.targets.iter().cloned())
        .collect();
    targets.sort();
    targets.dedup();
    targets
}

/// Each package, each chosen artifact with its size, and the totals.
fn show_plan(context: &Context, plan: &Plan, dry_run: bool) {
    let printer = &context.printer;
    for package in &plan.packages {
        if package.up_to_date {
            printer.line(format!(
                "{} {} is installed already",
                package.name, package.version
            ));
            continue;
        }
        printer.line(format!(
            "{} {} from {}: {}",
            package.name,
            package.version,
            package.repo.name,
            saving(package.size(), package.full_size)
        ));
        for artifact in &package.chosen {
            let cached = context.cache.get(&artifact.sha256, artifact.size).is_some();
            printer.line(format!(
                "  {}{}",
                artifact_line(artifact),
                if cached { " (cached)" } else { "" }
            ));
        }
        for explanation in &package.explanations {
            match explanation {
                // A package without any device code (host only) is no
                // cause for a warning.
                Explanation::NoDeviceCode { offered, .. } if !offered.is_empty() => {
                    printer.warn(explanation.to_string())
                }
                _ => printer.detail(format!("  why: {explanation}")),
            }
        }
    }
    if dry_run {
        printer.line(format!(
            "would download {} (downloads {})",
            ByteSize(plan.download_size(&context.cache)),
            saving(plan.size(), plan.full_size())
        ));
    }
}

fn plan_json(context: &Context, plan: &Plan, done: bool) -> serde_json::Value {
    json!({
        "prefix": context.settings.prefix,
        "gpus": plan.gpus.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "done": done,
        "size": plan.size(),
        "full_size": plan.full_size(),
        "download_size": if done { serde_json::Value::Null } else { plan.download_size(&context.cache).into() },
        "packages": plan.packages.iter().map(|p| json!({
            "name": p.name.as_str(),
            "version": p.version.to_string(),
            "repo": p.repo.name,
            "installed": p.installed.as_ref().map(ToString::to_string),
            "up_to_date": p.up_to_date,
            "size": p.size(),
            "full_size": p.full_size,
            "artifacts": p.chosen.iter().map(artifact_json).collect::<Vec<_>>(),
            "why": p.explanations.iter().map(ToString::to_string).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

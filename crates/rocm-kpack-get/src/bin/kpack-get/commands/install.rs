//! `install` and `upgrade`: plan, download, stage, commit.

use kpack_cli::counted;
use std::path::Path;
use std::sync::Arc;

use kpack_cli::ByteSize;
use kpack_gpu::target::join_targets;
use kpack_gpu::Target;
use kpack_repo_index::fetch::{Client, Progress};
use kpack_repo_index::schema::BuiltFrom;
use kpack_repo_index::ResolveError;
use kpack_repo_index::{Dependency, Explanation, PackageName};
use rocm_kpack_get::detect::choice::ChosenTargets;
use rocm_kpack_get::install::plan::{check_prefix_roots, Plan, PlanError, PlannedPackage};
use rocm_kpack_get::install::planner::{Planner, Wanted};
use rocm_kpack_get::install::record::InstalledRecord;
use rocm_kpack_get::install::PrefixLock;
use rocm_kpack_get::layout::hip_runtime::RuntimeSearch;
use rocm_kpack_get::layout::runtime_report::{show, RuntimeReport};
use rocm_kpack_get::layout::{decide_for_new_library, LayoutDecision};
use rocm_kpack_get::repo::suggestions;
use serde::Serialize;

use super::{parse_request, Context, Exit, Failure};
use crate::printer::{against_source, artifact_line, fetched, ArtifactReport, SCHEMA};
use crate::progress::{Bars, Files, Lines, PlannedFile};

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
        Wanted::Requests {
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

/// Installs (or upgrades) what is `wanted`: the requests read under the
/// prefix's lock, a plan shown, then downloaded, staged and committed. A
/// prefix not set up yet is made (with its lock) only once a plan can be
/// carried out, before it is shown, so a command that fails creates
/// nothing.
fn run(context: &Context, wanted: Wanted, dry_run: bool) -> Result<(), Failure> {
    let printer = &context.printer;
    let prefix = context.prefix(false)?;
    // A dry run reads the record without the lock; it changes nothing.
    let lock = if dry_run || !prefix.is_set_up()? {
        None
    } else {
        Some(context.lock(&prefix)?)
    };
    let again = wanted.clone();
    let record = prefix.record()?;
    let upgrading = wanted.upgrading();
    let (requests, reinstall) = wanted.requests(&record, prefix.root())?;
    if requests.is_empty() {
        printer.line("nothing is installed; nothing to upgrade");
        printer.report(&NothingInstalled {
            schema: SCHEMA,
            packages: Vec::new(),
        });
        return Ok(());
    }
    let client = context.client()?;
    let planned = plan(context, &client, &record, requests, reinstall, upgrading)?;
    let plan = &planned.plan;
    let lock = if dry_run || plan.refusal().is_some() {
        lock
    } else {
        match lock_for_first_install(context, lock)? {
            Some(lock) => Some(lock),
            // Another install got here first: plan again, on its record.
            None => return run(context, again, dry_run),
        }
    };
    // What is not in the cache yet, measured once, before anything is fetched.
    let download_size = plan.download_size(&context.cache);
    show_plan(context, plan, dry_run.then_some(download_size));
    let runtime = show(printer, &planned.search, &planned.decision, false);
    let report = InstallReport::new(context, plan, dry_run.then_some(download_size), runtime);
    if let Some(error) = plan.refusal() {
        // The plan is shown, dry run or not; then why it is not carried out.
        printer.report(&report);
        return Err(no_device_code(error, &planned.chosen));
    }
    let Some(lock) = lock else {
        printer.report(&report);
        return Ok(());
    };
    if plan.pending().next().is_none() {
        printer.line(format!(
            "nothing to do: already installed in {}",
            prefix.root().display()
        ));
        printer.report(&report);
        return Ok(());
    }
    let cached = plan.size().saturating_sub(download_size);
    download(context, &client, plan)?;
    let applied = prefix.apply(&lock, &plan.installs(&context.cache), &[])?;
    show_installed(context, plan, upgrading);
    printer.line(format!(
        "{} into {}; {}",
        counted(applied.files_added, "file", "files"),
        prefix.root().display(),
        fetched(plan.size(), cached, true)
    ));
    if plan.layout.is_fat() {
        let (served, unserved) = served_gpus(plan);
        let without = match unserved.is_empty() {
            true => String::new(),
            false => format!(" (no code for {})", join_targets(&unserved)),
        };
        printer.line(format!(
            "layout fat: {} made fat for {}{without}; no .kpack/ archives installed",
            counted(applied.materialized, "binary", "binaries"),
            describe_targets(&served)
        ));
    }
    printer.report(&report);
    Ok(())
}

/// The prefix's lock, taken now for a prefix not set up before (`lock`
/// `None`), which is made first; `None` when another install set it up
/// meanwhile, so that the plan made for an empty prefix is stale.
fn lock_for_first_install(
    context: &Context,
    lock: Option<PrefixLock>,
) -> Result<Option<PrefixLock>, Failure> {
    if lock.is_some() {
        return Ok(lock);
    }
    let prefix = context.prefix(true)?;
    let lock = context.lock(&prefix)?;
    Ok(prefix.record()?.packages.is_empty().then_some(lock))
}

/// A plan, and the GPUs, runtime search and layout decision it was made
/// for.
struct Shown {
    plan: Plan,
    chosen: ChosenTargets,
    search: RuntimeSearch,
    decision: LayoutDecision,
}

/// The failure of a plan whose package has code for none of the GPUs,
/// with how ROCm users run a GPU whose sibling has code (the per-node
/// override, by the GPU's real node number) when one does.
fn no_device_code(error: PlanError, chosen: &ChosenTargets) -> Failure {
    let suggestions = match &error {
        PlanError::NoDeviceCode { unserved, .. } => {
            unserved.override_suggestions(&chosen.detection)
        }
        _ => Vec::new(),
    };
    let hint = (!suggestions.is_empty()).then(|| suggestions.join("; "));
    Failure::new(Exit::NothingFits, error).maybe_hint(hint.as_deref())
}

/// Plans `requests` for the GPUs and the layout a new library would get,
/// after checking the repositories' roots against the prefix's record.
fn plan(
    context: &Context,
    client: &Client,
    record: &InstalledRecord,
    requests: Vec<Dependency>,
    reinstall: bool,
    upgrading: bool,
) -> Result<Shown, Failure> {
    let repos = context.repos(client)?;
    for warning in check_prefix_roots(&repos, record, context.settings.trust.allow_rollback)? {
        context.printer.warn(warning);
    }
    let chosen = choose_gpus(context, record, upgrading)?;
    let gpus = chosen.targets.clone();
    let settings = &context.settings;
    let (search, decision) = decide_for_new_library(settings.layout, &settings.runtime_search);
    let planner = Planner {
        client,
        cache: &context.cache,
        repos: &repos,
        gpus: &gpus,
        layout: decision.layout,
        record,
    };
    let planned = planner
        .plan(requests, reinstall, upgrading)
        .map_err(|error| match &error {
            PlanError::Resolve(ResolveError::UnknownPackage { name, .. }) => {
                let near = suggestions(&repos, name);
                Failure::from(error).did_you_mean(&near)
            }
            _ => error.into(),
        })?;
    for kept in &planned.kept {
        let name = &kept.name;
        let offered = kept
            .offered
            .as_ref()
            .map_or("no version".to_owned(), ToString::to_string);
        context.printer.warn(format!(
            "{name}: the repositories offer {offered}, older than the installed {}; kept (`kpack-get upgrade --allow-downgrade {name}` or `kpack-get install {name}@={offered}` downgrades)",
            kept.installed
        ));
    }
    let plan = planned.plan;
    Ok(Shown {
        plan,
        chosen,
        search,
        decision,
    })
}

/// Each package installed, upgraded or downgraded, and from which version.
fn show_installed(context: &Context, plan: &Plan, upgrading: bool) {
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
        context
            .printer
            .line(format!("{verb} {} {}{from}", package.name, package.version));
    }
}

/// The plan's GPUs that some package brings device code for, and those
/// none does: a binary is fat only for the first.
fn served_gpus(plan: &Plan) -> (Vec<Target>, Vec<Target>) {
    plan.gpus.iter().cloned().partition(|gpu| {
        plan.packages.iter().any(|package| {
            package.chosen.iter().any(|a| a.is_device())
                && !package.explanations.iter().any(
                    |e| matches!(e, Explanation::NoDeviceCode { gpu: none, .. } if none == gpu),
                )
        })
    })
}

fn describe_targets(gpus: &[Target]) -> String {
    if gpus.is_empty() {
        "no GPU (host entries only)".to_owned()
    } else {
        join_targets(gpus)
    }
}

/// The GPUs to install for: those detected (or given), else, when
/// upgrading, the targets the packages were installed for; none is said.
fn choose_gpus(
    context: &Context,
    record: &InstalledRecord,
    upgrading: bool,
) -> Result<ChosenTargets, Failure> {
    let mut chosen = context.gpus()?;
    if upgrading {
        chosen = chosen.or_recorded(record.targets());
    }
    let notes = &chosen.detection.notes;
    if chosen.targets.is_empty() {
        context.printer.warn(format!(
            "no GPU found ({}): installing host parts only; --target chooses GPU targets",
            if notes.is_empty() {
                "no source reported one".to_owned()
            } else {
                notes.join("; ")
            }
        ));
    } else {
        context.printer.detail(format!(
            "GPUs: {}",
            kpack_gpu::target::join_targets(&chosen.targets)
        ));
    }
    Ok(chosen)
}

/// Fetches the chosen artifacts of the pending packages into the cache,
/// with bars on a terminal and lines otherwise, each file named as users
/// think of it.
fn download(context: &Context, client: &Client, plan: &Plan) -> Result<(), Failure> {
    let downloads = plan.downloads();
    let printer = &context.printer;
    let cache = &context.cache;
    let mut files = Files::new();
    for package in plan.pending() {
        for artifact in &package.chosen {
            let stored = artifact.installed();
            let have = match cache.get(&stored.sha256, stored.size) {
                Some(_) => artifact.size,
                None => cache.kept(&artifact.sha256),
            };
            let label = ArtifactReport::from(artifact).label();
            let planned = PlannedFile {
                label: format!("{} {label}", package.name),
                size: artifact.size,
                have,
            };
            files.insert(artifact.sha256, planned);
        }
    }
    let bars = printer.bars.then(|| Arc::new(Bars::new(files.clone())));
    let progress: Arc<dyn Progress> = match &bars {
        Some(bars) => bars.clone(),
        None => Arc::new(Lines::new(*printer, files)),
    };
    let downloading = crate::interrupt::downloading();
    let fetched = client.fetch_all(&context.cache, &downloads, progress);
    drop(downloading);
    if let Some(bars) = &bars {
        bars.finish();
    }
    Ok(fetched?)
}

/// Each package, each chosen artifact with its size, and for a dry run
/// the totals, `download_size` of them not cached.
fn show_plan(context: &Context, plan: &Plan, dry_run: Option<u64>) {
    let printer = &context.printer;
    for package in &plan.packages {
        if package.up_to_date {
            printer.line(format!(
                "{} {} is installed already",
                package.name, package.version
            ));
            continue;
        }
        // An upgrade or downgrade says from which version.
        let version = match &package.installed {
            Some(installed) if *installed != package.version => {
                format!("{installed} -> {}", package.version)
            }
            _ => package.version.to_string(),
        };
        printer.line(format!(
            "{} {version} from {}: {}",
            package.name,
            package.repo.name,
            against_source(package.size(), &package.built_from)
        ));
        printer.detail(format!(
            "  every target's artifacts: {}",
            ByteSize(package.full_size)
        ));
        for artifact in &package.chosen {
            let stored = artifact.installed();
            let cached = context.cache.get(&stored.sha256, stored.size).is_some();
            printer.line(format!(
                "  {}{}",
                artifact_line(artifact, printer.verbose),
                if cached { " (cached)" } else { "" }
            ));
        }
        for explanation in &package.explanations {
            match explanation {
                // A package without any device code (host only) is no
                // cause for a warning; one with code for none of the GPUs
                // is refused, which says it once.
                Explanation::NoDeviceCode { offered, .. }
                    if !offered.is_empty() && package.unserved.is_none() =>
                {
                    printer.warn(explanation.to_string())
                }
                _ => printer.detail(format!("  why: {explanation}")),
            }
        }
    }
    if let Some(download_size) = dry_run {
        printer.line(fetched(
            plan.size(),
            plan.size().saturating_sub(download_size),
            false,
        ));
    }
}

/// An install's plan, and what it did.
#[derive(Debug, Serialize)]
struct InstallReport<'a> {
    schema: u32,
    done: bool,
    /// Of the chosen artifacts, the bytes not cached; none once installed.
    download_size: Option<u64>,
    full_size: u64,
    gpus: Vec<String>,
    #[serde(flatten)]
    runtime: RuntimeReport,
    packages: Vec<PackageReport<'a>>,
    prefix: &'a Path,
    size: u64,
}

/// A package of the plan, the artifacts chosen and why.
#[derive(Debug, Serialize)]
struct PackageReport<'a> {
    artifacts: Vec<ArtifactReport<'a>>,
    /// The fat packages the version was built from, where recorded.
    built_from: &'a [BuiltFrom],
    /// Every artifact of the version, for every target.
    full_size: u64,
    installed: Option<String>,
    name: &'a str,
    repo: &'a str,
    size: u64,
    up_to_date: bool,
    version: String,
    why: Vec<String>,
}

/// Nothing to upgrade: nothing is installed.
#[derive(Debug, Serialize)]
struct NothingInstalled<'a> {
    schema: u32,
    packages: Vec<PackageReport<'a>>,
}

impl<'a> InstallReport<'a> {
    /// `plan`, its download size for a dry run (`None` when it is done).
    fn new(
        context: &'a Context,
        plan: &'a Plan,
        download_size: Option<u64>,
        runtime: RuntimeReport,
    ) -> InstallReport<'a> {
        InstallReport {
            schema: SCHEMA,
            done: download_size.is_none(),
            download_size,
            full_size: plan.full_size(),
            gpus: plan.gpus.iter().map(ToString::to_string).collect(),
            runtime,
            packages: plan.packages.iter().map(PackageReport::from).collect(),
            prefix: &context.settings.prefix,
            size: plan.size(),
        }
    }
}

impl<'a> From<&'a PlannedPackage> for PackageReport<'a> {
    fn from(package: &'a PlannedPackage) -> PackageReport<'a> {
        PackageReport {
            artifacts: package.chosen.iter().map(ArtifactReport::from).collect(),
            built_from: &package.built_from,
            full_size: package.full_size,
            installed: package.installed.as_ref().map(ToString::to_string),
            name: package.name.as_str(),
            repo: &package.repo.name,
            size: package.size(),
            up_to_date: package.up_to_date,
            version: package.version.to_string(),
            why: package
                .explanations
                .iter()
                .map(ToString::to_string)
                .collect(),
        }
    }
}

//! `kpack-repo build` of a manifest set: what is published already is left
//! alone, the rest is built on every core in dependency order, and all of
//! it is published in one root update, or none of it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use kpack_cli::ByteSize;
use kpack_repo::publish::{Publisher, Staged};
use kpack_repo_index::schema::RootIndex;
use kpack_repo_index::types::PackageName;
use kpack_sign::SecretKey;

use kpack_repo::build::{build, BuildError, BuildProgress, Phase};
use kpack_repo::manifest::Resolved;

/// Why a manifest set cannot be published.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("{name} is built by two manifests: {} and {}", first.display(), second.display())]
    Twice {
        name: PackageName,
        first: std::path::PathBuf,
        second: std::path::PathBuf,
    },
    #[error("the manifests depend on each other in a cycle: {}", names.join(" -> "))]
    Cycle { names: Vec<String> },
    #[error(
        "{name} {version} depends on {dependency}, which neither the repository nor these manifests provide"
    )]
    Unmet {
        name: PackageName,
        version: semver::Version,
        dependency: String,
    },
    #[error("cannot build {}", path.display())]
    Build {
        path: std::path::PathBuf,
        #[source]
        source: Box<BuildError>,
    },
    #[error(transparent)]
    Publish(#[from] kpack_repo::publish::PublishError),
}

/// What a batch did.
#[derive(Debug)]
pub struct BatchReport {
    /// The versions built, in dependency order, with the bytes staged and
    /// the time each took.
    pub built: Vec<(Staged, Duration)>,
    /// The versions left alone: published already.
    pub published: Vec<Resolved>,
    /// The root published, when anything was built.
    pub root: Option<RootIndex>,
}

/// One manifest's build: what it staged and how long it took.
type Built = Result<(Staged, Duration), BatchError>;

/// How a batch runs.
#[derive(Debug, Clone, Copy)]
pub struct BatchOptions {
    /// Manifests built at once.
    pub jobs: usize,
    /// Draw progress bars on a terminal; otherwise each phase is said.
    pub progress: bool,
}

/// Builds every manifest of `set` that `repo` does not hold yet and
/// publishes them in one root signed with `key`. Dependencies are checked
/// before anything is built; a failed build publishes nothing.
pub fn build_set(
    set: Vec<Resolved>,
    repo: &Publisher,
    key: Option<&SecretKey>,
    options: BatchOptions,
    say: &(dyn Fn(&str) + Sync),
) -> Result<BatchReport, BatchError> {
    let order = dependency_order(&set)?;
    let root = repo.root_index()?;
    let mut published_versions: BTreeMap<PackageName, Vec<semver::Version>> = BTreeMap::new();
    if let Some(root) = &root {
        for name in root.packages.keys() {
            if let Some(shard) = repo.shard(root, name)? {
                let versions = shard.versions.into_iter().map(|v| v.version).collect();
                published_versions.insert(name.clone(), versions);
            }
        }
    }
    check_dependencies(&set, &published_versions)?;
    let (mut todo, mut published) = (Vec::new(), Vec::new());
    for index in order {
        let resolved = &set[index];
        let is_published = published_versions
            .get(&resolved.new.name)
            .is_some_and(|versions| versions.contains(&resolved.new.version));
        if is_published {
            published.push(resolved.clone());
        } else {
            todo.push(resolved.clone());
        }
    }
    if todo.is_empty() {
        return Ok(BatchReport {
            built: Vec::new(),
            published,
            root: None,
        });
    }
    say(&format!(
        "building {} of {} in dependency order: {}",
        todo.len(),
        kpack_cli::counted(set.len(), "package", "packages"),
        todo.iter()
            .map(|r| r.new.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let built = run(&todo, repo, options, say)?;
    let staged: Vec<Staged> = built.iter().map(|(s, _)| s.clone()).collect();
    say(if key.is_some() {
        "signing and publishing the root"
    } else {
        "publishing the root, unsigned"
    });
    let root = repo.add_staged(&staged, key)?;
    Ok(BatchReport {
        built,
        published,
        root: Some(root),
    })
}

/// Builds `todo` on `options.jobs` threads, taking manifests in order;
/// after a failure no more are started.
fn run(
    todo: &[Resolved],
    repo: &Publisher,
    options: BatchOptions,
    say: &(dyn Fn(&str) + Sync),
) -> Result<Vec<(Staged, Duration)>, BatchError> {
    let bars = MultiProgress::with_draw_target(if options.progress {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    });
    let overall = bars.add(ProgressBar::new(todo.len() as u64));
    overall.set_style(
        ProgressStyle::with_template("[{pos}/{len}] {elapsed_precise} {wide_bar}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Built>>> = Mutex::new((0..todo.len()).map(|_| None).collect());
    let jobs = options.jobs.clamp(1, todo.len());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                if failed.load(Ordering::SeqCst) {
                    return;
                }
                let index = next.fetch_add(1, Ordering::SeqCst);
                let Some(resolved) = todo.get(index) else {
                    return;
                };
                let spinner = bars.insert_before(&overall, ProgressBar::new_spinner());
                spinner.enable_steady_tick(Duration::from_millis(200));
                let phases = Phases {
                    spinner: &spinner,
                    bars: options.progress,
                    say,
                };
                let started = Instant::now();
                let result = build(resolved, repo, &phases)
                    .map(|staged| (staged, started.elapsed()))
                    .map_err(|source| BatchError::Build {
                        path: resolved.path.clone(),
                        source: Box::new(source),
                    });
                spinner.finish_and_clear();
                bars.remove(&spinner);
                overall.inc(1);
                let line = match &result {
                    Ok((staged, took)) => format!(
                        "built {} {}: {} in {:.1} s",
                        resolved.new.name,
                        resolved.new.version,
                        ByteSize(staged.bytes()),
                        took.as_secs_f64()
                    ),
                    Err(_) => {
                        failed.store(true, Ordering::SeqCst);
                        format!("failed: {}", resolved.new.name)
                    }
                };
                bars.suspend(|| say(&line));
                if let Ok(mut results) = results.lock() {
                    results[index] = Some(result);
                }
            });
        }
    });
    overall.finish_and_clear();
    let mut built = Vec::new();
    for result in results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
    {
        built.push(result?);
    }
    Ok(built)
}

/// Tells each phase of a build: on its spinner on a terminal, as a line
/// otherwise.
struct Phases<'a> {
    spinner: &'a ProgressBar,
    bars: bool,
    say: &'a (dyn Fn(&str) + Sync),
}

impl BuildProgress for Phases<'_> {
    fn phase(&self, resolved: &Resolved, phase: Phase) {
        let text = format!(
            "{} {}: {}",
            resolved.new.name,
            resolved.new.version,
            phase.describe()
        );
        if self.bars {
            self.spinner.set_message(text);
        } else {
            (self.say)(&text);
        }
    }
}

/// The order to build `set` in: every manifest after those it depends on,
/// ties by name.
fn dependency_order(set: &[Resolved]) -> Result<Vec<usize>, BatchError> {
    let mut by_name: BTreeMap<&PackageName, usize> = BTreeMap::new();
    for (index, resolved) in set.iter().enumerate() {
        if let Some(&other) = by_name.get(&resolved.new.name) {
            return Err(BatchError::Twice {
                name: resolved.new.name.clone(),
                first: set[other].path.clone(),
                second: resolved.path.clone(),
            });
        }
        by_name.insert(&resolved.new.name, index);
    }
    let needs: Vec<BTreeSet<usize>> = set
        .iter()
        .map(|r| {
            r.new
                .depends
                .iter()
                .filter_map(|d| by_name.get(&d.name).copied())
                .collect()
        })
        .collect();
    let mut order = Vec::with_capacity(set.len());
    let mut done = vec![false; set.len()];
    while order.len() < set.len() {
        let ready = by_name
            .values()
            .copied()
            .find(|&i| !done[i] && needs[i].iter().all(|&n| done[n]));
        let Some(ready) = ready else {
            let names = by_name
                .iter()
                .filter(|(_, &i)| !done[i])
                .map(|(name, _)| name.to_string())
                .collect();
            return Err(BatchError::Cycle { names });
        };
        done[ready] = true;
        order.push(ready);
    }
    Ok(order)
}

/// Every dependency of `set` is met by a published version or one of the
/// set.
fn check_dependencies(
    set: &[Resolved],
    published: &BTreeMap<PackageName, Vec<semver::Version>>,
) -> Result<(), BatchError> {
    for resolved in set {
        for dependency in &resolved.new.depends {
            let in_set = set
                .iter()
                .filter(|r| r.new.name == dependency.name)
                .map(|r| &r.new.version);
            let in_repo = published.get(&dependency.name).into_iter().flatten();
            if !in_set
                .chain(in_repo)
                .any(|v| dependency.requirement.matches(v))
            {
                return Err(BatchError::Unmet {
                    name: resolved.new.name.clone(),
                    version: resolved.new.version.clone(),
                    dependency: dependency.to_string(),
                });
            }
        }
    }
    Ok(())
}

//! Installing into a prefix: one lock per prefix, staging, an atomic
//! commit, the install record, recovery of an interrupted change, and
//! checking installed files.

pub mod commit;
pub mod plan;
pub mod record;
pub mod stage;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};

use kpack_repo_index::{ArtifactKind, Sha256};

use commit::{Journal, Layout};
use record::{InstalledArtifact, InstalledPackage, InstalledRecord};
use stage::StagedFiles;

/// Why a change to a prefix failed. The prefix is left as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    #[error("{path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{artifact}: entry {entry:?} {reason}; refused")]
    UnsafeEntry {
        artifact: String,
        entry: String,
        reason: String,
    },
    #[error("{path} is installed by {owner}; {package} would overwrite it")]
    OwnedByOther {
        path: String,
        owner: String,
        package: String,
    },
    #[error("{path} exists in {prefix} and was not installed by kpack-get; {package} would overwrite it")]
    Unowned {
        path: String,
        prefix: PathBuf,
        package: String,
    },
    #[error("{path}: {message}")]
    BadRecord { path: PathBuf, message: String },
    #[error("another kpack-get is changing {prefix} (lock {lock})")]
    Locked { prefix: PathBuf, lock: PathBuf },
    #[error("{name} is not installed in {prefix}")]
    NotInstalled { name: String, prefix: PathBuf },
}

impl InstallError {
    /// The underlying I/O error, for exit codes and hints.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            InstallError::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

/// An install root with its `.kpack/` bookkeeping.
#[derive(Debug, Clone)]
pub struct Prefix {
    layout: Layout,
}

/// Holds the prefix's lock until dropped.
#[derive(Debug)]
pub struct PrefixLock {
    _file: File,
}

/// Holds the prefix's lock shared, for reading, until dropped: no change
/// starts while it is held, and taking it writes nothing.
#[derive(Debug)]
pub struct PrefixReadLock {
    _file: File,
}

/// A package version to put into the prefix, with its artifacts already
/// verified in the cache.
#[derive(Debug, Clone)]
pub struct PackageInstall {
    pub name: String,
    pub version: semver::Version,
    pub repo: String,
    pub targets: Vec<String>,
    pub artifacts: Vec<ReadyArtifact>,
}

/// An artifact and the cached file holding its verified bytes.
#[derive(Debug, Clone)]
pub struct ReadyArtifact {
    pub kind: ArtifactKind,
    pub path: String,
    pub install_as: Option<String>,
    pub targets: Option<Vec<String>>,
    pub sha256: Sha256,
    pub size: u64,
    pub blob: PathBuf,
}

/// What a committed change did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub files_added: usize,
    pub files_removed: usize,
    pub bytes_added: u64,
}

/// What finding an interrupted change led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovered {
    /// A committed change was completed.
    Completed { id: String },
    /// Staging left by a change that never committed was deleted.
    Discarded { ids: Vec<String> },
}

/// A file whose contents differ from the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub package: String,
    pub path: String,
    pub problem: String,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> InstallError + '_ {
    move |source| InstallError::Io {
        path: path.to_owned(),
        source,
    }
}

impl Prefix {
    /// The prefix at `root` (created when `create`).
    pub fn open(root: &Path, create: bool) -> Result<Prefix, InstallError> {
        let layout = Layout {
            prefix: root.to_owned(),
        };
        if create {
            std::fs::create_dir_all(layout.meta()).map_err(io(&layout.meta()))?;
        }
        Ok(Prefix { layout })
    }

    pub fn root(&self) -> &Path {
        &self.layout.prefix
    }

    /// Takes the prefix's lock; when another process holds it, calls
    /// `waiting` and then waits, or fails with `wait` false.
    pub fn lock(&self, wait: bool, waiting: impl FnOnce()) -> Result<PrefixLock, InstallError> {
        let path = self.layout.lock();
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io(&path))?;
        self.acquire(&file, path, LockKind::Exclusive, wait, waiting)?;
        Ok(PrefixLock { _file: file })
    }

    /// Takes the prefix's lock shared, to read it while no change is under
    /// way, without writing anything: `None` when there is no lock file
    /// (nothing was ever installed) or it may not be opened (then a change
    /// could not be under way by this user either, and reading goes on).
    pub fn read_lock(
        &self,
        wait: bool,
        waiting: impl FnOnce(),
    ) -> Result<Option<PrefixReadLock>, InstallError> {
        let path = self.layout.lock();
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                ) =>
            {
                return Ok(None)
            }
            Err(source) => return Err(InstallError::Io { path, source }),
        };
        self.acquire(&file, path, LockKind::Shared, wait, waiting)?;
        Ok(Some(PrefixReadLock { _file: file }))
    }

    /// Takes `file`'s lock; when another process holds it, waits (after
    /// calling `waiting`) or, without `wait`, fails with `Locked`.
    fn acquire(
        &self,
        file: &File,
        path: PathBuf,
        kind: LockKind,
        wait: bool,
        waiting: impl FnOnce(),
    ) -> Result<(), InstallError> {
        let tried = match kind {
            LockKind::Exclusive => file.try_lock(),
            LockKind::Shared => file.try_lock_shared(),
        };
        match tried {
            Ok(()) => Ok(()),
            Err(std::fs::TryLockError::WouldBlock) if !wait => Err(InstallError::Locked {
                prefix: self.layout.prefix.clone(),
                lock: path,
            }),
            Err(std::fs::TryLockError::WouldBlock) => {
                waiting();
                match kind {
                    LockKind::Exclusive => file.lock(),
                    LockKind::Shared => file.lock_shared(),
                }
                .map_err(|source| InstallError::Io { path, source })
            }
            Err(std::fs::TryLockError::Error(source)) => Err(InstallError::Io { path, source }),
        }
    }

    /// The id of a committed change an interrupted run left unfinished, if
    /// any; only a command that may write completes it ([`Prefix::recover`]).
    pub fn pending_change(&self) -> Result<Option<String>, InstallError> {
        Ok(Journal::load(&self.layout)?.map(|journal| journal.id))
    }

    /// Finishes or discards what an interrupted run left.
    pub fn recover(&self, _lock: &PrefixLock) -> Result<Option<Recovered>, InstallError> {
        let mut completed = None;
        if let Some(journal) = Journal::load(&self.layout)? {
            journal.apply(&self.layout)?;
            completed = Some(journal.id);
        }
        let staging_root = self.layout.staging_root();
        let mut discarded = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&staging_root) {
            for entry in entries.flatten() {
                let path = entry.path();
                std::fs::remove_dir_all(&path).map_err(io(&path))?;
                discarded.push(entry.file_name().to_string_lossy().into_owned());
            }
            let _ = std::fs::remove_dir(&staging_root);
        }
        Ok(match (completed, discarded.is_empty()) {
            (Some(id), _) => Some(Recovered::Completed { id }),
            (None, false) => Some(Recovered::Discarded { ids: discarded }),
            (None, true) => None,
        })
    }

    pub fn record(&self) -> Result<InstalledRecord, InstallError> {
        InstalledRecord::load(&self.layout.record())
    }

    /// Installs `packages` (replacing other versions of them) and removes
    /// `remove`, in one atomic change.
    pub fn apply(
        &self,
        _lock: &PrefixLock,
        packages: &[PackageInstall],
        remove: &[String],
    ) -> Result<Applied, InstallError> {
        let old = self.record()?;
        for name in remove {
            if !old.packages.contains_key(name) {
                return Err(InstallError::NotInstalled {
                    name: name.clone(),
                    prefix: self.layout.prefix.clone(),
                });
            }
        }
        let id = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        );
        let staging = self.layout.staging(&id);
        let staged_root = staging.join("root");
        std::fs::create_dir_all(&staged_root).map_err(io(&staged_root))?;
        let result = self.stage_and_commit(&old, packages, remove, &id);
        if result.is_err() && Journal::load(&self.layout).ok().flatten().is_none() {
            // Not committed: nothing of it reaches the prefix.
            let _ = std::fs::remove_dir_all(&staging);
            let _ = std::fs::remove_dir(self.layout.staging_root());
        }
        result.map_err(|error| match error {
            // Name the file as the user knows it, not its staging copy.
            InstallError::Io { path, source } => {
                let relative = [staging.join("package"), staging.join("root")]
                    .iter()
                    .find_map(|dir| path.strip_prefix(dir).ok().map(Path::to_owned));
                InstallError::Io {
                    path: match relative {
                        Some(relative) => self.layout.prefix.join(relative),
                        None => path,
                    },
                    source,
                }
            }
            other => other,
        })
    }

    fn stage_and_commit(
        &self,
        old: &InstalledRecord,
        packages: &[PackageInstall],
        remove: &[String],
        id: &str,
    ) -> Result<Applied, InstallError> {
        let staging = self.layout.staging(id);
        let staged_root = staging.join("root");
        let mut new = old.clone();
        for name in remove {
            new.packages.remove(name);
        }
        let mut applied = Applied::default();
        let mut journal = Journal::new(id.to_owned());
        let mut claimed: BTreeMap<String, String> = BTreeMap::new();
        for package in packages {
            // Each package stages into its own directory first, so two
            // packages claiming one path are caught rather than merged.
            let own = staging.join("package");
            let _ = std::fs::remove_dir_all(&own);
            let files = stage_package(package, &own)?;
            for path in files.keys() {
                if let Some(other) = claimed.insert(path.clone(), package.name.clone()) {
                    return Err(InstallError::OwnedByOther {
                        path: path.clone(),
                        owner: other,
                        package: package.name.clone(),
                    });
                }
                self.check_overwrite(old, remove, packages, path, &package.name)?;
                let from = own.join(path);
                let to = staged_root.join(path);
                if let Some(parent) = to.parent() {
                    std::fs::create_dir_all(parent).map_err(io(parent))?;
                }
                std::fs::rename(&from, &to).map_err(io(&to))?;
                applied.files_added += 1;
                applied.bytes_added += files[path].size.unwrap_or(0);
            }
            let _ = std::fs::remove_dir_all(&own);
            let dirs = self.created_dirs(&files, old.packages.get(&package.name));
            new.packages
                .insert(package.name.clone(), installed(package, dirs, files));
        }
        journal.moves = claimed.keys().cloned().collect();
        // Files of replaced or removed versions that the new state no
        // longer has.
        let mut prune = BTreeSet::new();
        for (name, package) in &old.packages {
            let replaced = remove.contains(name) || packages.iter().any(|p| &p.name == name);
            if !replaced {
                continue;
            }
            for file in &package.files {
                if !claimed.contains_key(&file.path) {
                    journal.deletes.push(file.path.clone());
                    applied.files_removed += 1;
                }
            }
            if !new.packages.contains_key(name) {
                prune.extend(package.dirs.iter().cloned());
            }
        }
        // Deepest first, so a parent is empty by the time its turn comes.
        let mut prune: Vec<String> = prune.into_iter().collect();
        prune.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
        journal.prune = prune;
        if new.packages.is_empty() {
            let marker = staging.join("no-packages");
            std::fs::write(&marker, b"").map_err(io(&marker))?;
        } else {
            let record = staging.join("installed.toml");
            std::fs::write(&record, new.to_toml()?).map_err(io(&record))?;
        }
        journal.commit(&self.layout)?;
        journal.apply(&self.layout)?;
        Ok(applied)
    }

    /// The directories `files` need that the prefix does not have yet,
    /// plus those an earlier version (`previous`) created: the package owns
    /// them and removing it prunes them.
    fn created_dirs(
        &self,
        files: &StagedFiles,
        previous: Option<&InstalledPackage>,
    ) -> Vec<String> {
        let mut dirs: BTreeSet<String> = BTreeSet::new();
        for path in files.keys() {
            for dir in stage::parent_dirs(path) {
                let text = dir.to_string_lossy().into_owned();
                if text != ".kpack" && !self.layout.prefix.join(&dir).exists() {
                    dirs.insert(text);
                }
            }
        }
        if let Some(previous) = previous {
            dirs.extend(previous.dirs.iter().cloned());
        }
        dirs.into_iter().collect()
    }

    fn check_overwrite(
        &self,
        old: &InstalledRecord,
        remove: &[String],
        packages: &[PackageInstall],
        path: &str,
        package: &str,
    ) -> Result<(), InstallError> {
        match old.owner(path) {
            Some(owner) if owner == package => Ok(()),
            Some(owner)
                if remove.iter().any(|r| r == owner)
                    || packages.iter().any(|p| p.name == owner) =>
            {
                Ok(())
            }
            Some(owner) => Err(InstallError::OwnedByOther {
                path: path.to_owned(),
                owner: owner.to_owned(),
                package: package.to_owned(),
            }),
            None => {
                if std::fs::symlink_metadata(self.layout.prefix.join(path)).is_ok() {
                    Err(InstallError::Unowned {
                        path: path.to_owned(),
                        prefix: self.layout.prefix.clone(),
                        package: package.to_owned(),
                    })
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Re-hashes every installed file against the record; reads only.
    pub fn verify(&self) -> Result<(usize, Vec<Mismatch>), InstallError> {
        let record = self.record()?;
        let mut checked = 0;
        let mut mismatches = Vec::new();
        for (name, package) in &record.packages {
            for file in &package.files {
                checked += 1;
                let path = self.layout.prefix.join(&file.path);
                let problem = match (&file.link, file.sha256) {
                    (Some(link), _) => match std::fs::read_link(&path) {
                        Ok(actual) if actual.to_str() == Some(link.as_str()) => None,
                        Ok(actual) => {
                            Some(format!("links to {}, recorded {link}", actual.display()))
                        }
                        Err(e) => Some(e.to_string()),
                    },
                    (None, Some(sha256)) => match Sha256::of_file(&path) {
                        Ok((actual, _)) if actual == sha256 => None,
                        Ok((actual, size)) => {
                            Some(format!("sha256 {actual} ({size} bytes), recorded {sha256}"))
                        }
                        Err(e) => Some(e.to_string()),
                    },
                    (None, None) => None,
                };
                if let Some(problem) = problem {
                    mismatches.push(Mismatch {
                        package: name.clone(),
                        path: file.path.clone(),
                        problem,
                    });
                }
            }
        }
        Ok((checked, mismatches))
    }
}

/// Which lock a command takes on the prefix.
#[derive(Debug, Clone, Copy)]
enum LockKind {
    /// Changes the prefix.
    Exclusive,
    /// Only reads it.
    Shared,
}

/// Stages `package`'s artifacts under `own`: trees extracted, archives
/// placed under `.kpack/` (or where the artifact says).
fn stage_package(package: &PackageInstall, own: &Path) -> Result<StagedFiles, InstallError> {
    let mut files = StagedFiles::new();
    for artifact in &package.artifacts {
        match artifact.kind {
            ArtifactKind::Tree => {
                stage::extract_tree(&artifact.blob, &artifact.path, own, &mut files)?
            }
            ArtifactKind::Kpack => {
                let relative = artifact.install_as.clone().unwrap_or_else(|| {
                    let name = artifact.path.rsplit('/').next().unwrap_or("archive.kpack");
                    format!(".kpack/{name}")
                });
                let relative = stage::safe_relative(Path::new(&relative)).map_err(|reason| {
                    InstallError::UnsafeEntry {
                        artifact: artifact.path.clone(),
                        entry: relative.clone(),
                        reason: reason.to_string(),
                    }
                })?;
                stage::place_file(
                    &artifact.blob,
                    &relative,
                    artifact.sha256,
                    artifact.size,
                    own,
                    &mut files,
                )?
            }
        }
    }
    Ok(files)
}

/// The install record of `package` with its staged `files` and the
/// directories it owns.
fn installed(package: &PackageInstall, dirs: Vec<String>, files: StagedFiles) -> InstalledPackage {
    InstalledPackage {
        version: package.version.clone(),
        repo: package.repo.clone(),
        targets: package.targets.clone(),
        artifacts: package
            .artifacts
            .iter()
            .map(|a| InstalledArtifact {
                path: a.path.clone(),
                sha256: a.sha256,
                size: a.size,
                targets: a.targets.clone(),
            })
            .collect(),
        dirs,
        files: files.into_values().collect(),
    }
}

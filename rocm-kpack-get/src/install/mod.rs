//! Installing into a prefix: one lock per prefix, staging, an atomic
//! commit, the install record, recovery of an interrupted change, and
//! checking installed files.

pub mod commit;
pub mod plan;
pub mod record;
pub mod stage;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use fs_err::File;
use kpack_repo_index::{ArtifactKind, Component, Listed, PackageName, RelativePath, Sha256};
use rocm_kpack::Target;

use commit::{Journal, Layout};
use record::{InstalledArtifact, InstalledPackage, InstalledRecord};
use stage::{EntryProblem, StageDir, StagedFiles};

/// Why a change to a prefix failed. The prefix is left as it was.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstallError {
    /// The prefix's bookkeeping or the cache (the error names the path).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A file of the change, named as it will be in the prefix.
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{artifact}: entry {entry:?} {problem}; refused")]
    UnsafeEntry {
        artifact: RelativePath,
        entry: String,
        problem: EntryProblem,
    },
    #[error("{path} is installed by {owner}; {package} would overwrite it")]
    OwnedByOther {
        path: RelativePath,
        owner: PackageName,
        package: PackageName,
    },
    #[error("{path} exists in {prefix} and was not installed by kpack-get; {package} would overwrite it")]
    Unowned {
        path: RelativePath,
        prefix: PathBuf,
        package: PackageName,
    },
    #[error("{path}: {message}")]
    BadRecord { path: PathBuf, message: String },
    #[error("another kpack-get is changing {prefix} (lock {lock})")]
    Locked { prefix: PathBuf, lock: PathBuf },
    #[error("{name} is not installed in {prefix}")]
    NotInstalled { name: PackageName, prefix: PathBuf },
}

impl From<kpack_fs::PathError> for InstallError {
    fn from(error: kpack_fs::PathError) -> InstallError {
        InstallError::Io(error.into())
    }
}

impl InstallError {
    /// The underlying I/O error, for exit codes and hints.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            InstallError::Io(source) | InstallError::Write { source, .. } => Some(source.kind()),
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
    pub name: PackageName,
    pub version: semver::Version,
    pub repo: String,
    pub targets: Vec<Target>,
    pub artifacts: Vec<ReadyArtifact>,
}

/// An artifact and the cached file holding its verified bytes.
#[derive(Debug, Clone)]
pub struct ReadyArtifact {
    pub kind: ArtifactKind,
    pub path: RelativePath,
    pub install_as: Option<RelativePath>,
    pub targets: Option<Vec<Listed>>,
    /// The component of device code it is; none for a host artifact.
    pub component: Option<Component>,
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
    pub package: PackageName,
    pub path: RelativePath,
    pub problem: Problem,
}

/// How an installed file differs from the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A symbolic link points elsewhere.
    Link { actual: PathBuf, recorded: String },
    /// A file's contents changed.
    Contents {
        actual: Sha256,
        size: u64,
        recorded: Sha256,
    },
    /// It cannot be read (missing, unreadable).
    Unreadable(String),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Link { actual, recorded } => {
                write!(f, "links to {}, recorded {recorded}", actual.display())
            }
            Problem::Contents {
                actual,
                size,
                recorded,
            } => write!(f, "sha256 {actual} ({size} bytes), recorded {recorded}"),
            Problem::Unreadable(error) => f.write_str(error),
        }
    }
}

impl Prefix {
    /// The prefix at `root` (created when `create`).
    pub fn open(root: &Path, create: bool) -> Result<Prefix, InstallError> {
        let layout = Layout {
            prefix: root.to_owned(),
        };
        if create {
            fs_err::create_dir_all(layout.meta())?;
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
        let file = fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
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
            Err(error) => return Err(error.into()),
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
                Ok(match kind {
                    LockKind::Exclusive => file.lock(),
                    LockKind::Shared => file.lock_shared(),
                }?)
            }
            Err(std::fs::TryLockError::Error(error)) => Err(error.into()),
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
        if let Ok(entries) = fs_err::read_dir(&staging_root) {
            for entry in entries.flatten() {
                fs_err::remove_dir_all(entry.path())?;
                discarded.push(entry.file_name().to_string_lossy().into_owned());
            }
            let _ = fs_err::remove_dir(&staging_root);
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
        remove: &[PackageName],
    ) -> Result<Applied, InstallError> {
        let old = self.record()?;
        if let Some(name) = remove.iter().find(|n| !old.packages.contains_key(*n)) {
            return Err(InstallError::NotInstalled {
                name: name.clone(),
                prefix: self.layout.prefix.clone(),
            });
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
        fs_err::create_dir_all(staging.join("root"))?;
        let result = self.stage_and_commit(&old, packages, remove, &id);
        if result.is_err() && Journal::load(&self.layout).ok().flatten().is_none() {
            // Not committed: nothing of it reaches the prefix.
            let _ = fs_err::remove_dir_all(&staging);
            let _ = fs_err::remove_dir(self.layout.staging_root());
        }
        result
    }

    fn stage_and_commit(
        &self,
        old: &InstalledRecord,
        packages: &[PackageInstall],
        remove: &[PackageName],
        id: &str,
    ) -> Result<Applied, InstallError> {
        let staging = self.layout.staging(id);
        let staged_root = StageDir {
            dir: &staging.join("root"),
            prefix: self.root(),
        };
        let mut new = old.clone();
        for name in remove {
            new.packages.remove(name);
        }
        let mut applied = Applied::default();
        let mut journal = Journal::new(id.to_owned());
        let mut claimed: BTreeMap<RelativePath, PackageName> = BTreeMap::new();
        for package in packages {
            // Each package stages into its own directory first, so two
            // packages claiming one path are caught rather than merged.
            let own = StageDir {
                dir: &staging.join("package"),
                prefix: self.root(),
            };
            let _ = fs_err::remove_dir_all(own.dir);
            let files = stage_package(package, own)?;
            for (path, file) in &files {
                if let Some(other) = claimed.insert(path.clone(), package.name.clone()) {
                    return Err(InstallError::OwnedByOther {
                        path: path.clone(),
                        owner: other,
                        package: package.name.clone(),
                    });
                }
                self.check_overwrite(old, remove, packages, path, &package.name)?;
                move_staged(own, staged_root, path)?;
                applied.files_added += 1;
                applied.bytes_added += file.size.unwrap_or(0);
            }
            let _ = fs_err::remove_dir_all(own.dir);
            let dirs = self.created_dirs(&files, old.packages.get(&package.name));
            new.packages
                .insert(package.name.clone(), installed(package, dirs, files));
        }
        journal.moves = claimed.keys().cloned().collect();
        applied.files_removed = self.plan_removals(old, &new, packages, remove, &mut journal);
        if new.packages.is_empty() {
            fs_err::write(staging.join("no-packages"), b"")?;
        } else {
            fs_err::write(staging.join("installed.toml"), new.to_toml()?)?;
        }
        journal.commit(&self.layout)?;
        journal.apply(&self.layout)?;
        Ok(applied)
    }

    /// Puts into `journal` the files of replaced or removed versions that
    /// the new state no longer has, and the directories of removed packages
    /// (deepest first, so a parent is empty by the time its turn comes);
    /// returns how many files go.
    fn plan_removals(
        &self,
        old: &InstalledRecord,
        new: &InstalledRecord,
        packages: &[PackageInstall],
        remove: &[PackageName],
        journal: &mut Journal,
    ) -> usize {
        let moved: BTreeSet<&RelativePath> = journal.moves.iter().collect();
        let mut deletes = Vec::new();
        let mut prune = BTreeSet::new();
        for (name, package) in &old.packages {
            let replaced = remove.contains(name) || packages.iter().any(|p| &p.name == name);
            if !replaced {
                continue;
            }
            deletes.extend(
                package
                    .files
                    .iter()
                    .filter(|file| !moved.contains(&file.path))
                    .map(|file| file.path.clone()),
            );
            if !new.packages.contains_key(name) {
                prune.extend(package.dirs.iter().cloned());
            }
        }
        let mut prune: Vec<RelativePath> = prune.into_iter().collect();
        prune.sort_by_key(|dir| std::cmp::Reverse(dir.parents().len()));
        journal.prune = prune;
        journal.deletes = deletes;
        journal.deletes.len()
    }

    /// The directories `files` need that the prefix does not have yet,
    /// plus those an earlier version (`previous`) created: the package owns
    /// them and removing it prunes them.
    fn created_dirs(
        &self,
        files: &StagedFiles,
        previous: Option<&InstalledPackage>,
    ) -> Vec<RelativePath> {
        let mut dirs: BTreeSet<RelativePath> = files
            .keys()
            .flat_map(RelativePath::parents)
            .filter(|dir| dir.as_str() != ".kpack")
            .filter(|dir| !self.layout.prefix.join(dir.as_str()).exists())
            .collect();
        if let Some(previous) = previous {
            dirs.extend(previous.dirs.iter().cloned());
        }
        dirs.into_iter().collect()
    }

    fn check_overwrite(
        &self,
        old: &InstalledRecord,
        remove: &[PackageName],
        packages: &[PackageInstall],
        path: &RelativePath,
        package: &PackageName,
    ) -> Result<(), InstallError> {
        match old.owner(path) {
            Some(owner) if owner == package => Ok(()),
            Some(owner) if remove.contains(owner) || packages.iter().any(|p| &p.name == owner) => {
                Ok(())
            }
            Some(owner) => Err(InstallError::OwnedByOther {
                path: path.clone(),
                owner: owner.clone(),
                package: package.clone(),
            }),
            None if fs_err::symlink_metadata(self.layout.prefix.join(path.as_str())).is_ok() => {
                Err(InstallError::Unowned {
                    path: path.clone(),
                    prefix: self.layout.prefix.clone(),
                    package: package.clone(),
                })
            }
            None => Ok(()),
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
                if let Some(problem) = self.check_file(file) {
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

    /// How an installed file differs from its record, if it does.
    fn check_file(&self, file: &record::InstalledFile) -> Option<Problem> {
        let path = self.layout.prefix.join(file.path.as_str());
        let unreadable = |error: std::io::Error| Some(Problem::Unreadable(error.to_string()));
        match (&file.link, file.sha256) {
            (Some(link), _) => match fs_err::read_link(&path) {
                Ok(actual) if actual.to_str() == Some(link.as_str()) => None,
                Ok(actual) => Some(Problem::Link {
                    actual,
                    recorded: link.clone(),
                }),
                Err(error) => unreadable(error),
            },
            (None, Some(recorded)) => match fs_err::File::open(&path).and_then(Sha256::of_reader) {
                Ok((actual, _)) if actual == recorded => None,
                Ok((actual, size)) => Some(Problem::Contents {
                    actual,
                    size,
                    recorded,
                }),
                Err(error) => unreadable(error),
            },
            (None, None) => None,
        }
    }
}

/// Moves a staged file from the package's own directory to the change's
/// root, at the same relative path.
fn move_staged(
    own: StageDir<'_>,
    root: StageDir<'_>,
    path: &RelativePath,
) -> Result<(), InstallError> {
    let failed = || root.failed(path.as_str());
    let to = root.path(path.as_str());
    if let Some(parent) = to.parent() {
        fs_err::create_dir_all(parent).map_err(failed())?;
    }
    fs_err::rename(own.path(path.as_str()), &to).map_err(failed())?;
    Ok(())
}

/// Which lock a command takes on the prefix.
#[derive(Debug, Clone, Copy)]
enum LockKind {
    /// Changes the prefix.
    Exclusive,
    /// Only reads it.
    Shared,
}

/// Stages `package`'s artifacts in `own`: trees extracted, archives
/// placed under `.kpack/` (or where the artifact says).
fn stage_package(package: &PackageInstall, own: StageDir<'_>) -> Result<StagedFiles, InstallError> {
    let mut files = StagedFiles::new();
    for artifact in &package.artifacts {
        match artifact.kind {
            ArtifactKind::Tree => {
                stage::extract_tree(&artifact.blob, &artifact.path, own, &mut files)?
            }
            ArtifactKind::Kpack => {
                let relative = match &artifact.install_as {
                    Some(path) => path.clone(),
                    None => format!(".kpack/{}", artifact.path.file_name())
                        .parse()
                        .map_err(|reason| InstallError::UnsafeEntry {
                            artifact: artifact.path.clone(),
                            entry: artifact.path.file_name().to_owned(),
                            problem: stage::UnsafePath::Unusable(reason).into(),
                        })?,
                };
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
fn installed(
    package: &PackageInstall,
    dirs: Vec<RelativePath>,
    files: StagedFiles,
) -> InstalledPackage {
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
                component: a.component.clone(),
            })
            .collect(),
        dirs,
        files: files.into_values().collect(),
    }
}

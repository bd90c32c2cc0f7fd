//! Installing into a prefix: one lock per prefix, staging, an atomic
//! commit, the install record, recovery of an interrupted change, and
//! checking installed files.

pub mod commit;
pub mod devices;
mod error;
pub mod future;
pub mod lock_holder;
pub mod materialize;
pub mod plan;
pub mod planner;
pub mod record;
pub mod stage;
mod verify;

pub use error::InstallError;
pub use verify::{Mismatch, Problem};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use std::fs::File;

use kpack_fs::confined::{ConfinedDir, ConfinedError, EntryKind};
use kpack_gpu::Target;
use kpack_repo_index::{Artifact, ArtifactKind, PackageName, Pin, RelativePath};

use crate::layout::Layout;
use commit::{Journal, PrefixPaths};
use future::Change;
use lock_holder::LockHolder;
use record::{InstalledArtifact, InstalledPackage, InstalledRecord};
use rocm_kpack::format::KPACK_DIR;
use stage::{StageDir, StagedFiles};

/// An install root with its `.kpack/` bookkeeping.
#[derive(Debug, Clone)]
pub struct Prefix {
    paths: PrefixPaths,
}

/// Holds the prefix's lock until dropped.
#[derive(Debug)]
pub struct PrefixLock {
    _file: File,
}

/// What a reading command finds of a change to the prefix, without
/// taking its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrefixChange {
    /// Nothing is under way, or the system cannot say.
    None,
    /// Another process holds the lock: a change may be under way, its
    /// journal (`id`, the files it names) already written when `journal`.
    UnderWay {
        holder: LockHolder,
        journal: Option<(String, BTreeSet<RelativePath>)>,
    },
    /// A committed change an interrupted run left unfinished.
    Interrupted(String),
}

/// A package version to put into the prefix, with its artifacts already
/// verified in the cache.
#[derive(Debug, Clone)]
pub struct PackageInstall {
    pub name: PackageName,
    pub version: semver::Version,
    pub repo: String,
    /// The version of the repository's root it comes from.
    pub repo_version: u64,
    pub targets: Vec<Target>,
    /// Whether its split binaries are installed as they are or made fat.
    pub layout: Layout,
    pub artifacts: Vec<ReadyArtifact>,
}

/// An artifact as its shard lists it, and the cached file holding its
/// verified bytes.
#[derive(Debug, Clone)]
pub struct ReadyArtifact {
    pub artifact: Artifact,
    /// Its bytes as installed: what a transport-encoded artifact decoded
    /// to, otherwise the bytes served.
    pub blob: PathBuf,
}

impl ReadyArtifact {
    /// `artifact`, its verified bytes in `blob`.
    pub fn new(artifact: Artifact, blob: PathBuf) -> ReadyArtifact {
        ReadyArtifact { artifact, blob }
    }

    /// The sha256 and size of the bytes installed.
    pub fn installed(&self) -> Pin {
        self.artifact.installed()
    }

    /// Whether its shard declares the limit of what it unpacks or decodes
    /// to (`unpacked-size`), or it is the ratio allowed to a shard written
    /// before that existed ([`Artifact::unpack_limit`]).
    pub fn unpack_declared(&self) -> bool {
        self.artifact.unpacked_size.is_some()
    }
}

/// What a committed change did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    pub files_added: usize,
    pub files_removed: usize,
    pub bytes_added: u64,
    /// Split binaries made fat (the fat layout).
    pub materialized: usize,
}

/// What finding an interrupted change led to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovered {
    /// A committed change that was completed.
    pub completed: Option<String>,
    /// Staging left by changes that never committed, deleted.
    pub discarded: Vec<String>,
    /// Staging that could not be deleted, moved to `.kpack/trash-<id>`
    /// so the prefix goes on: its id and why.
    pub moved_aside: Vec<(String, String)>,
}

/// Makes the lock file `file` (at `path`) readable and writable by its
/// owner only, as lock files made before were not (0644).
fn make_private(file: &File, path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let named = |source: std::io::Error| {
        std::io::Error::new(source.kind(), format!("{}: {source}", path.display()))
    };
    let mode = file.metadata().map_err(named)?.permissions().mode() & 0o7777;
    if mode != 0o600 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .map_err(named)?;
    }
    Ok(())
}

impl Prefix {
    /// The prefix at `root` (created when `create`, with `.kpack/` in it).
    pub fn open(root: &Path, create: bool) -> Result<Prefix, InstallError> {
        let paths = PrefixPaths {
            prefix: root.to_owned(),
        };
        if create {
            fs_err::create_dir_all(root)?;
            paths.root()?.create_dir_all(Path::new(KPACK_DIR))?;
        }
        Ok(Prefix { paths })
    }

    pub fn root(&self) -> &Path {
        &self.paths.prefix
    }

    /// Takes the prefix's lock; when another process holds it, calls
    /// `waiting` with the holder (when the system names it) and then waits,
    /// or fails with `wait` false.
    pub fn lock(
        &self,
        wait: bool,
        waiting: impl FnOnce(Option<LockHolder>),
    ) -> Result<PrefixLock, InstallError> {
        let root = self.paths.root()?;
        let meta = root.create_dir_all(Path::new(KPACK_DIR))?;
        // Root's own: a lock others may open, they may hold (flock needs no
        // write access), and root's kpack-get would wait for them.
        let file = meta.open_or_create(Path::new(commit::LOCK), 0o600)?;
        make_private(&file, &self.paths.lock())?;
        self.acquire(&file, self.paths.lock(), wait, waiting)?;
        Ok(PrefixLock { _file: file })
    }

    /// Whether `.kpack/` exists (anything was ever installed here).
    pub fn is_set_up(&self) -> Result<bool, InstallError> {
        Ok(self.paths.existing_meta()?.is_some())
    }

    /// What a reader should know of a change, found without taking the
    /// lock (so it never waits, and writes nothing but a lock file's mode
    /// left open to others): the lock's holder, as
    /// `/proc/locks` names it, and the journal. The record is replaced by
    /// a rename, so a reader reads it whole: the state before the change.
    pub fn change(&self) -> Result<PrefixChange, InstallError> {
        let Some(meta) = self.paths.existing_meta()? else {
            return Ok(PrefixChange::None);
        };
        let holder = match meta.open_file(Path::new(commit::LOCK)) {
            Ok(file) => {
                // The first open by any command closes a lock an older
                // kpack-get left open to others (0644); only its owner may
                // change its mode, and another reader goes on.
                match make_private(&file, &self.paths.lock()) {
                    Err(error) if error.kind() != std::io::ErrorKind::PermissionDenied => {
                        return Err(error.into())
                    }
                    _ => {}
                }
                lock_holder::holder_of(&file)
            }
            // No lock file, or one this user may not open: no change by
            // this user, and reading goes on.
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                ) =>
            {
                None
            }
            Err(error) => return Err(error.into()),
        };
        let journal = Journal::load(&self.paths)?;
        Ok(match (holder, journal) {
            (Some(holder), journal) => PrefixChange::UnderWay {
                holder,
                journal: journal.map(|journal| {
                    let named = journal.named_paths();
                    (journal.id, named)
                }),
            },
            (None, Some(journal)) => PrefixChange::Interrupted(journal.id),
            (None, None) => PrefixChange::None,
        })
    }

    /// Takes `file`'s lock; when another process holds it, waits (after
    /// calling `waiting`) or, without `wait`, fails with `Locked`.
    fn acquire(
        &self,
        file: &File,
        path: PathBuf,
        wait: bool,
        waiting: impl FnOnce(Option<LockHolder>),
    ) -> Result<(), InstallError> {
        let tried = file.try_lock();
        let named = |source: std::io::Error| {
            std::io::Error::new(source.kind(), format!("{}: {source}", path.display()))
        };
        match tried {
            Ok(()) => Ok(()),
            Err(std::fs::TryLockError::WouldBlock) if !wait => Err(InstallError::Locked {
                prefix: self.paths.prefix.clone(),
                lock: path,
                holder: lock_holder::holder_of(file),
            }),
            Err(std::fs::TryLockError::WouldBlock) => {
                waiting(lock_holder::holder_of(file));
                Ok(file.lock().map_err(named)?)
            }
            Err(std::fs::TryLockError::Error(error)) => Err(named(error).into()),
        }
    }

    /// Finishes or discards what an interrupted run left.
    pub fn recover(&self, _lock: &PrefixLock) -> Result<Option<Recovered>, InstallError> {
        let mut completed = None;
        if let Some(journal) = Journal::load(&self.paths)? {
            journal.apply(&self.paths)?;
            completed = Some(journal.id);
        }
        let mut recovered = Recovered {
            completed,
            ..Recovered::default()
        };
        if let Some(meta) = self.paths.existing_meta()? {
            commit::empty_trash(&meta)?;
            if let Ok(staging) = meta.open_dir(Path::new(commit::STAGING)) {
                for name in staging.names()? {
                    let id = name.to_string_lossy().into_owned();
                    match commit::discard_staging(&meta, &staging, &name)? {
                        None => recovered.discarded.push(id),
                        Some(error) => recovered
                            .moved_aside
                            .push((id, kpack_error::one_line(&error))),
                    }
                }
                let _ = meta.remove_dir(Path::new(commit::STAGING));
            }
        }
        Ok((recovered != Recovered::default()).then_some(recovered))
    }

    pub fn record(&self) -> Result<InstalledRecord, InstallError> {
        let text = match self.paths.existing_meta()? {
            Some(meta) => commit::read_bookkeeping(&meta, commit::RECORD)?,
            None => None,
        };
        match text {
            Some(text) => InstalledRecord::parse(&self.paths.record(), &text),
            None => Ok(InstalledRecord::empty()),
        }
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
                prefix: self.paths.prefix.clone(),
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
        let root = self.paths.root()?;
        let meta = self.paths.meta(&root)?;
        let staging = commit::create_staging(&meta, &id)?;
        let result = self.stage_and_commit(&root, &staging, &old, packages, remove, &id);
        if result.is_err() && Journal::load(&self.paths).ok().flatten().is_none() {
            // Not committed: nothing of it reaches the prefix.
            drop(staging);
            let _ = meta.remove_all(&Path::new(commit::STAGING).join(&id));
            let _ = meta.remove_dir(Path::new(commit::STAGING));
        }
        result
    }

    /// Stages every package in a directory of its own (so two packages
    /// claiming one path are caught rather than merged), judges the change
    /// as a whole against the prefix, then gathers the files and commits.
    fn stage_and_commit(
        &self,
        root: &ConfinedDir,
        staging: &ConfinedDir,
        old: &InstalledRecord,
        packages: &[PackageInstall],
        remove: &[PackageName],
        id: &str,
    ) -> Result<Applied, InstallError> {
        let mut new = old.clone();
        for name in remove {
            new.packages.remove(name);
        }
        let mut applied = Applied::default();
        // Each staged path and the index of the package placing it.
        let mut placed: BTreeMap<RelativePath, usize> = BTreeMap::new();
        let mut own_dirs = Vec::new();
        for (index, package) in packages.iter().enumerate() {
            let own_path = PathBuf::from(format!("package-{index}"));
            let own = staging.create_dir_all(&own_path)?;
            let stage = StageDir {
                dir: &own,
                prefix: self.root(),
            };
            let mut files = stage_package(package, stage)?;
            if package.layout.is_fat() {
                applied.materialized +=
                    materialize::materialize_package(package, stage, staging, &mut files)?;
            }
            for (path, file) in &files {
                if let Some(other) = placed.insert(path.clone(), index) {
                    return Err(InstallError::OwnedByOther {
                        path: path.clone(),
                        owner: packages[other].name.clone(),
                        package: package.name.clone(),
                    });
                }
                applied.files_added += 1;
                applied.bytes_added += file.size.unwrap_or(0);
            }
            let dirs = created_dirs(root, &files, old.packages.get(&package.name))?;
            new.packages
                .insert(package.name.clone(), installed(package, dirs, files));
            own_dirs.push((own_path, own));
        }
        let mut journal = Journal::new(id.to_owned());
        journal.moves = placed.keys().cloned().collect();
        applied.files_removed = plan_removals(old, &mut new, packages, remove, &mut journal);
        let replaced: BTreeSet<PackageName> = remove
            .iter()
            .cloned()
            .chain(packages.iter().map(|p| p.name.clone()))
            .collect();
        let placer = |path: &RelativePath| placed.get(path).map(|&index| &packages[index].name);
        journal.clear =
            Change::new(root, old, &new, placer, &journal.deletes, &replaced).check()?;
        devices::Devices::new(root, staging)?.check(&journal.moves, &journal.deletes)?;
        let staged_root = staging.create_dir_all(Path::new("root"))?;
        for (path, &index) in &placed {
            if let Some((_, own)) = own_dirs.get(index) {
                move_staged(own, &staged_root, path)?;
            }
        }
        for (own_path, own) in own_dirs {
            drop(own);
            staging.remove_all(&own_path)?;
        }
        let record = (!new.packages.is_empty())
            .then(|| new.to_toml())
            .transpose()?;
        commit::stage_record(staging, record.as_deref())?;
        journal.commit(&self.paths)?;
        journal.apply(&self.paths)?;
        Ok(applied)
    }
}

/// Puts into `journal` the files of replaced or removed versions that
/// the new state no longer has, and the directories of removed packages
/// and those an upgraded one no longer puts files in (deepest first, so a
/// parent is empty by the time its turn comes);
/// returns how many files go. A removed package's directory that still
/// holds another package's files becomes that package's, so that it goes
/// with the last of them.
fn plan_removals(
    old: &InstalledRecord,
    new: &mut InstalledRecord,
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
        // Removed: all its directories; upgraded: those its new version
        // puts nothing in.
        let needed: BTreeSet<RelativePath> = new
            .packages
            .get(name)
            .map(|now| now.files.iter().flat_map(|f| f.path.parents()).collect())
            .unwrap_or_default();
        prune.extend(
            package
                .dirs
                .iter()
                .filter(|dir| !needed.contains(*dir))
                .cloned(),
        );
    }
    prune.retain(|dir| !hand_over(new, dir));
    for name in packages.iter().map(|p| &p.name) {
        if let Some(now) = new.packages.get_mut(name) {
            now.dirs.retain(|dir| !prune.contains(dir));
        }
    }
    let mut prune: Vec<RelativePath> = prune.into_iter().collect();
    prune.sort_by_key(|dir| std::cmp::Reverse(dir.parents().len()));
    journal.prune = prune;
    journal.deletes = deletes;
    journal.deletes.len()
}

/// Makes `dir` a directory of the first package in `new` with a file
/// beneath it; whether there is one.
fn hand_over(new: &mut InstalledRecord, dir: &RelativePath) -> bool {
    let beneath = format!("{dir}/");
    let heir = new.packages.values_mut().find(|package| {
        package
            .files
            .iter()
            .any(|file| file.path.as_str().starts_with(&beneath))
    });
    match heir {
        Some(package) => {
            if !package.dirs.contains(dir) {
                package.dirs.push(dir.clone());
                package.dirs.sort();
            }
            true
        }
        None => false,
    }
}

/// The directories `files` need that the prefix does not have as
/// directories yet (missing, or a file or link the change replaces), plus
/// those an earlier version (`previous`) created that stay directories:
/// the package owns them and removing it prunes them.
fn created_dirs(
    root: &ConfinedDir,
    files: &StagedFiles,
    previous: Option<&InstalledPackage>,
) -> Result<Vec<RelativePath>, InstallError> {
    let mut dirs = BTreeSet::new();
    for dir in files.keys().flat_map(RelativePath::parents) {
        if dir.as_str() == KPACK_DIR || dirs.contains(&dir) {
            continue;
        }
        match root.entry(Path::new(dir.as_str())) {
            Ok(Some(EntryKind::Dir)) => {}
            // Made by the change: nothing there, a file or link it replaces,
            // or beneath one (anything else is refused by the change's check).
            Ok(_) | Err(ConfinedError::NotBeneath { .. }) => {
                dirs.insert(dir);
            }
            Err(error) => return Err(error.into()),
        }
    }
    if let Some(previous) = previous {
        let now_files = |dir: &RelativePath| {
            files.contains_key(dir) || dir.parents().iter().any(|up| files.contains_key(up))
        };
        dirs.extend(previous.dirs.iter().filter(|dir| !now_files(dir)).cloned());
    }
    Ok(dirs.into_iter().collect())
}

/// Moves a staged file from the package's own directory to the change's
/// root, at the same relative path.
fn move_staged(
    own: &ConfinedDir,
    root: &ConfinedDir,
    path: &RelativePath,
) -> Result<(), InstallError> {
    let at = Path::new(path.as_str());
    if let Some(parent) = path.parents().pop() {
        root.create_dir_all(Path::new(parent.as_str()))?;
    }
    own.rename(at, root, at)?;
    Ok(())
}

/// Stages `package`'s artifacts in `own`: trees extracted, archives
/// placed under `.kpack/` (or where the artifact says).
fn stage_package(package: &PackageInstall, own: StageDir<'_>) -> Result<StagedFiles, InstallError> {
    let mut files = StagedFiles::new();
    for artifact in &package.artifacts {
        match artifact.artifact.kind {
            ArtifactKind::Tree => stage::extract_tree(
                &artifact.blob,
                &artifact.artifact.path,
                artifact.artifact.unpack_limit(),
                own,
                &mut files,
            )?,
            ArtifactKind::Kpack => {
                stage::place_archive(artifact, &archive_slot(artifact)?, own, &mut files)?
            }
        }
    }
    Ok(files)
}

/// Where an archive is placed: where the artifact says, else
/// `.kpack/<file name>`.
fn archive_slot(artifact: &ReadyArtifact) -> Result<RelativePath, InstallError> {
    match &artifact.artifact.install_as {
        Some(path) => Ok(path.clone()),
        None => format!("{KPACK_DIR}/{}", artifact.artifact.path.file_name())
            .parse()
            .map_err(|reason| InstallError::UnsafeEntry {
                artifact: artifact.artifact.path.clone(),
                entry: artifact.artifact.path.file_name().to_owned(),
                problem: stage::UnsafePath::Unusable(reason).into(),
            }),
    }
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
        repo_version: Some(package.repo_version),
        targets: package.targets.clone(),
        layout: package.layout,
        artifacts: package
            .artifacts
            .iter()
            .map(|ready| InstalledArtifact::from(&ready.artifact))
            .collect(),
        dirs,
        files: files.into_values().collect(),
    }
}

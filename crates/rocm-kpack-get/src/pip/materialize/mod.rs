//! A Python environment's split binaries laid out for its HIP runtime
//! (08-hip-runtimes.md, "Python environments"): where the layout is `fat`,
//! each split binary of a host distribution is materialized in place for
//! the machine's targets from the archives its device distributions
//! installed (found through its marker, as the runtime's loader finds
//! them); where it is `kpack`, or no device code is installed for the
//! targets, the host-only binary is what is installed.
//!
//! A file is never written into: uv installs files as hard links into its
//! cache, and writing through one would change every environment sharing
//! it. Before an installed binary is first replaced, its original is kept
//! under the `.dist-info` ([`binaries::KEPT_DIR`]) by a hard link, and
//! listed in RECORD; a fat file is written beside the installed one and
//! renamed over it, and the host-only one comes back as a hard link to the
//! kept original, renamed over it. RECORD's rows for the replaced files get
//! their new hash and size, so `pip uninstall` removes exactly what is
//! there and the installers' checks stay clean.
//!
//! The order makes an interruption harmless: originals are kept and
//! listed, and every binary about to change is marked unfinished in the
//! state file ([`state`]), before any installed file is replaced; each
//! replacement is one rename; RECORD and the state are written last. A
//! rerun finds the unfinished binaries and makes them again (the same
//! inputs give the same bytes). Every file is written in
//! [`TEMPORARY_DIR`] under the `.dist-info` and renamed into place, so
//! what an interrupted run leaves is found there, and removed, by the
//! next; nothing unlisted is left beside the package's files.

pub mod binaries;
pub mod state;

use std::collections::BTreeMap;
use std::io::{Seek, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use kpack_binary::materialize::{
    materialize_into, open_archives, planned_code_size, undeclared_limit, ArchiveSource,
    BoundedArchives, BundleEncoding, Destination, Materialized, MIN_UNDECLARED_LIMIT,
    UNDECLARED_RATIO,
};
use kpack_wheel::{RecordError, RecordHash};
use rocm_kpack::{Loader, LoaderConfig, Target};

use crate::decode_budget::{DecodeBudget, OverBudget};
use crate::layout::Layout;
pub use binaries::{HostBinaries, SplitBinary};
use state::{ArchiveStamp, MaterializedBinary, State, STATE_FILE};

/// Where files are written before they are renamed into place, under the
/// `.dist-info` (the site directory's file system, which renames need);
/// removed at the end of every run, and what an interrupted one left at
/// the start of the next.
pub(crate) const TEMPORARY_DIR: &str = "kpack/tmp";

/// What can go wrong laying out an environment's binaries.
#[derive(Debug, thiserror::Error)]
pub enum MaterializeError {
    /// A distribution's RECORD cannot be read.
    #[error("cannot read {path}")]
    Record {
        path: PathBuf,
        #[source]
        source: RecordError,
    },
    /// A binary cannot be materialized.
    #[error("cannot materialize {path}")]
    Packer {
        path: PathBuf,
        #[source]
        source: Box<kpack_binary::Error>,
    },
    /// The state file cannot be written.
    #[error("cannot write {path}")]
    State {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// An installed file cannot be replaced by the one beside it.
    #[error("cannot replace {path}")]
    Replace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Writing a file atomically failed.
    #[error(transparent)]
    Write(#[from] kpack_fs::PathError),
    /// The distribution's binaries would decode more than its archives
    /// are allowed, in all.
    #[error(transparent)]
    OverBudget(#[from] OverBudget),
    /// A file-system call failed; the error names the path.
    #[error(transparent)]
    Io(std::io::Error),
}

impl MaterializeError {
    /// The kind of the I/O error underneath, if it is one.
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            MaterializeError::Io(e) => Some(e.kind()),
            MaterializeError::Write(e) => Some(e.source.kind()),
            MaterializeError::Replace { source, .. } => Some(source.kind()),
            MaterializeError::Packer { source, .. } => match source.as_ref() {
                kpack_binary::Error::Io(e) => Some(e.kind()),
                kpack_binary::Error::Write(e) => Some(e.source.kind()),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Why a binary is to be host-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostOnlyReason {
    /// The layout is `kpack`.
    Layout,
    /// There are no GPU targets.
    NoTargets,
}

/// What a binary is to hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    HostOnly(HostOnlyReason),
    /// Fat for `targets`, from these archives, its bundles written so.
    Fat {
        targets: Vec<Target>,
        archives: Vec<ArchiveStamp>,
        bundles: BundleEncoding,
    },
}

/// What is done to a binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// It already holds what it should.
    Unchanged,
    /// Written fat from its host-only original.
    Materialize,
    /// Its host-only original put back.
    Restore,
}

/// One binary: what it should hold and what that takes.
#[derive(Debug, Clone)]
pub(crate) struct BinaryPlan {
    pub binary: SplitBinary,
    pub wanted: Wanted,
    pub action: Action,
    /// What materializing did (after [`HostPlan::apply`]).
    pub materialized: Option<Materialized>,
}

/// A host distribution's binaries and what each needs.
#[derive(Debug)]
pub(crate) struct HostPlan {
    pub host: HostBinaries,
    state: State,
    pub binaries: Vec<BinaryPlan>,
}

impl HostPlan {
    /// What `host`'s binaries need for `layout` and the machine's
    /// `targets`: fat from the archives found through their markers, or
    /// host-only for `kpack`, without targets or without archives.
    pub(crate) fn new(
        host: HostBinaries,
        layout: Layout,
        targets: &[Target],
    ) -> Result<HostPlan, MaterializeError> {
        let state = State::read(&host.dist_info)?;
        let mut binaries = Vec::new();
        for binary in &host.binaries {
            let wanted = wanted(binary, layout, targets)?;
            let action = action(&host, &state, binary, &wanted)?;
            binaries.push(BinaryPlan {
                binary: binary.clone(),
                wanted,
                action,
                materialized: None,
            });
        }
        Ok(HostPlan {
            host,
            state,
            binaries,
        })
    }

    /// Whether any binary changes.
    pub(crate) fn changes(&self) -> bool {
        self.binaries.iter().any(|b| b.action != Action::Unchanged)
    }

    /// Makes every binary hold what it should; RECORD and the state are
    /// written last (see the module's documentation for the order).
    pub(crate) fn apply(&mut self) -> Result<(), MaterializeError> {
        let temporary = self.host.dist_info.join(TEMPORARY_DIR);
        remove_leftovers(&temporary)?;
        if !self.changes() {
            return Ok(());
        }
        self.check_budget()?;
        fs_err::create_dir_all(&temporary).map_err(MaterializeError::Io)?;
        for plan in self
            .binaries
            .iter()
            .filter(|p| p.action != Action::Unchanged)
        {
            keep_original(&plan.binary, &mut self.host.record, &temporary)?;
            // Unfinished until the end: whatever an interruption leaves,
            // the next run makes it again.
            self.state
                .binaries
                .insert(plan.binary.path.clone(), MaterializedBinary::unfinished());
        }
        self.write_state_and_record(&temporary)?;
        for plan in &mut self.binaries {
            match (plan.action, &plan.wanted) {
                (
                    Action::Materialize,
                    Wanted::Fat {
                        targets,
                        archives,
                        bundles,
                    },
                ) => {
                    let (hash, size, report) =
                        write_fat(&plan.binary, (targets, *bundles), &temporary)?;
                    self.host
                        .record
                        .set(&plan.binary.path, Some(hash.clone()), Some(size));
                    self.state.binaries.insert(
                        plan.binary.path.clone(),
                        MaterializedBinary {
                            targets: targets.clone(),
                            archives: archives.clone(),
                            bundles: *bundles,
                            hash: Some(hash.as_str().to_owned()),
                            size: Some(size),
                        },
                    );
                    plan.materialized = Some(report);
                }
                (Action::Restore, _) => {
                    restore(&plan.binary, &temporary)?;
                    let kept = self.host.record.get(&plan.binary.kept_path);
                    let (hash, size) = kept.map(|r| (r.hash.clone(), r.size)).unwrap_or_default();
                    self.host.record.set(&plan.binary.path, hash, size);
                    self.state.binaries.remove(&plan.binary.path);
                }
                _ => {}
            }
        }
        self.write_state_and_record(&temporary)?;
        remove_leftovers(&temporary)
    }

    /// Whether the code every binary to materialize would decode (each use
    /// of a TOC entry counted) is within what the archives they use are
    /// allowed, each archive counted once; refused, naming the
    /// distribution, before anything is written.
    fn check_budget(&self) -> Result<(), MaterializeError> {
        let mut allowed: BTreeMap<PathBuf, u64> = BTreeMap::new();
        let mut codes = Vec::new();
        for plan in &self.binaries {
            let (Action::Materialize, Wanted::Fat { targets, .. }) = (plan.action, &plan.wanted)
            else {
                continue;
            };
            let binary = &plan.binary;
            let packer = |source| MaterializeError::Packer {
                path: binary.installed.clone(),
                source: Box::new(source),
            };
            let archives = marker_archives(binary, targets).map_err(packer)?;
            for archive in archives.archives() {
                allowed.insert(
                    archive.path().to_owned(),
                    undeclared_limit(archive.file_size()),
                );
            }
            let input = fs_err::File::open(binary.host_only()).map_err(MaterializeError::Io)?;
            let code = planned_code_size(input.file(), &binary.installed, targets, &archives)
                .map_err(packer)?;
            codes.push(code);
        }
        let limit = allowed
            .values()
            .fold(0, |sum: u64, l| sum.saturating_add(*l));
        let mut budget = DecodeBudget::new(
            self.host.name.to_string(),
            limit,
            format!(
                "allowed to the archives they use, which declare no size \
                 ({UNDECLARED_RATIO} times the size of each, at least {MIN_UNDECLARED_LIMIT})"
            ),
        );
        for code in codes {
            budget.add(code);
        }
        Ok(budget.check()?)
    }

    /// Writes the state file, then RECORD listing it.
    fn write_state_and_record(&mut self, temporary: &Path) -> Result<(), MaterializeError> {
        let state = self.state.to_bytes(&self.host.dist_info)?;
        let path = self.host.dist_info.join(STATE_FILE);
        write_new(&path, temporary, kpack_fs::DEFAULT_MODE, &state)?;
        let state_path = format!("{}/{STATE_FILE}", self.host.dist_info_name);
        let hash = RecordHash::of_bytes(&state);
        self.host
            .record
            .set(&state_path, Some(hash), Some(state.len() as u64));
        let path = self.host.dist_info.join("RECORD");
        let text = self.host.record.to_text();
        write_new(&path, temporary, mode(&path)?, text.as_bytes())
    }
}

/// Removes what an interrupted run left in `temporary`.
fn remove_leftovers(temporary: &Path) -> Result<(), MaterializeError> {
    match fs_err::remove_dir_all(temporary) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(MaterializeError::Io(e)),
        _ => Ok(()),
    }
}

/// Writes `bytes` to `path` with `mode` through a file in `temporary`,
/// renamed over it.
fn write_new(
    path: &Path,
    temporary: &Path,
    mode: u32,
    bytes: &[u8],
) -> Result<(), MaterializeError> {
    let mut file = kpack_fs::AtomicFile::create_in_with_mode(path, temporary, mode)?;
    file.write_all(bytes).map_err(MaterializeError::Io)?;
    file.commit()?;
    Ok(())
}

/// What `binary` should hold.
fn wanted(
    binary: &SplitBinary,
    layout: Layout,
    targets: &[Target],
) -> Result<Wanted, MaterializeError> {
    if layout == Layout::Kpack {
        return Ok(Wanted::HostOnly(HostOnlyReason::Layout));
    }
    if targets.is_empty() {
        return Ok(Wanted::HostOnly(HostOnlyReason::NoTargets));
    }
    // With no archive for the targets, every bundle holds the host entry
    // only: the runtime registers the binary, and only a launch fails, as
    // with any fat binary lacking a target.
    let archives = archives(binary, targets)?;
    Ok(Wanted::Fat {
        targets: targets.to_vec(),
        archives,
        bundles: layout.bundle_encoding(),
    })
}

/// The archives the runtime's loader would try for `binary` and `targets`
/// (as the packer's materialize looks for them) that exist.
fn archives(
    binary: &SplitBinary,
    targets: &[Target],
) -> Result<Vec<ArchiveStamp>, MaterializeError> {
    let arches: Vec<Target> = targets.iter().flat_map(Target::selection_order).collect();
    let candidates =
        Loader::new(LoaderConfig::default()).candidates(&binary.marker, &binary.installed, &arches);
    let mut found = Vec::new();
    for path in candidates {
        found.extend(ArchiveStamp::of(&path)?);
    }
    Ok(found)
}

/// What it takes for `binary` to hold `wanted`.
fn action(
    host: &HostBinaries,
    state: &State,
    binary: &SplitBinary,
    wanted: &Wanted,
) -> Result<Action, MaterializeError> {
    let recorded = host.record.get(&binary.path).and_then(|r| r.hash.as_ref());
    let entry = state.binaries.get(&binary.path);
    match wanted {
        Wanted::HostOnly(_) => {
            let kept = host
                .record
                .get(&binary.kept_path)
                .and_then(|r| r.hash.as_ref());
            let original =
                !binary.kept_exists || (entry.is_none() && kept.is_some() && kept == recorded);
            Ok(if original {
                Action::Unchanged
            } else {
                Action::Restore
            })
        }
        Wanted::Fat {
            targets,
            archives,
            bundles,
        } => {
            let installed_size = match fs_err::metadata(&binary.installed) {
                Ok(metadata) => Some(metadata.len()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(MaterializeError::Io(e)),
            };
            let finished = binary.kept_exists
                && entry.is_some_and(|e| {
                    e.finished((targets, archives, *bundles), recorded, installed_size)
                });
            Ok(if finished {
                Action::Unchanged
            } else {
                Action::Materialize
            })
        }
    }
}

/// Keeps `binary`'s original under the `.dist-info` (a hard link to the
/// installed file, never a write into it) and lists it in RECORD.
fn keep_original(
    binary: &SplitBinary,
    record: &mut kpack_wheel::Record,
    temporary: &Path,
) -> Result<(), MaterializeError> {
    if !binary.kept_exists {
        let dir = binary.kept.parent().unwrap_or(Path::new("/"));
        fs_err::create_dir_all(dir).map_err(MaterializeError::Io)?;
        match fs_err::hard_link(&binary.installed, &binary.kept) {
            Ok(()) => kpack_fs::sync_dir(dir).map_err(MaterializeError::Io)?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            // A file system without hard links: a copy, as a new file.
            Err(_) => copy_as_new_file(&binary.installed, &binary.kept, temporary)?,
        }
    }
    if record
        .get(&binary.kept_path)
        .is_none_or(|r| r.hash.is_none())
    {
        let (hash, size) = RecordHash::of_file(&binary.kept).map_err(MaterializeError::Io)?;
        record.set(&binary.kept_path, Some(hash), Some(size));
    }
    Ok(())
}

/// Writes a copy of `from` at `to` as a new file (atomically, `from`'s mode).
fn copy_as_new_file(from: &Path, to: &Path, temporary: &Path) -> Result<(), MaterializeError> {
    let mut file = kpack_fs::AtomicFile::create_in_with_mode(to, temporary, mode(from)?)?;
    let mut input = fs_err::File::open(from).map_err(MaterializeError::Io)?;
    std::io::copy(&mut input, &mut file).map_err(MaterializeError::Io)?;
    file.commit()?;
    Ok(())
}

/// Materializes `binary` from its kept original for `targets` and renames
/// the fat file over the installed one; returns its hash, size and what
/// was put in.
fn write_fat(
    binary: &SplitBinary,
    (targets, bundles): (&[Target], BundleEncoding),
    temporary: &Path,
) -> Result<(RecordHash, u64, Materialized), MaterializeError> {
    let packer = |source| MaterializeError::Packer {
        path: binary.installed.clone(),
        source: Box::new(source),
    };
    let original = fs_err::File::open(&binary.kept).map_err(MaterializeError::Io)?;
    let archives = marker_archives(binary, targets).map_err(packer)?;
    let file = kpack_fs::AtomicFile::create_in_with_mode(
        &binary.installed,
        temporary,
        mode(&binary.kept)?,
    )?;
    let destination = Destination {
        file: file.file(),
        path: &binary.installed,
        spool_dir: binary.installed.parent().unwrap_or(Path::new(".")),
    };
    let report = materialize_into(
        original.file(),
        &binary.installed,
        destination,
        targets,
        &archives,
        bundles,
    )
    .map_err(packer)?;
    let mut written = file.file();
    let hashed = written
        .seek(std::io::SeekFrom::Start(0))
        .and_then(|_| RecordHash::of_reader(written));
    let (hash, size) = hashed.map_err(MaterializeError::Io)?;
    file.commit()?;
    Ok((hash, size, report))
}

/// The archives `binary`'s marker names for `targets`, each within what an
/// archive that declares no size may decode to.
fn marker_archives(
    binary: &SplitBinary,
    targets: &[Target],
) -> Result<BoundedArchives, kpack_binary::Error> {
    // The installed path, not the kept one: the marker's archive paths are
    // relative to where the binary is installed.
    open_archives(
        &binary.marker,
        &binary.installed,
        targets,
        &ArchiveSource::Marker,
    )
    .and_then(BoundedArchives::undeclared)
}

/// Puts `binary`'s kept original back: a hard link to it in `temporary`,
/// renamed over the installed file.
fn restore(binary: &SplitBinary, temporary: &Path) -> Result<(), MaterializeError> {
    // Already the original (an interrupted run renamed it back): renaming
    // one link over another of the same file would do nothing and leave
    // the new link behind.
    if same_file(&binary.installed, &binary.kept)? {
        return Ok(());
    }
    let dir = binary.installed.parent().unwrap_or(Path::new("/"));
    let link = tempfile::Builder::new()
        .prefix(".kpack-")
        .make_in(temporary, |path| fs_err::hard_link(&binary.kept, path))
        .map_err(MaterializeError::Io)?;
    link.persist(&binary.installed)
        .map_err(|e| MaterializeError::Replace {
            path: binary.installed.clone(),
            source: e.error,
        })?;
    kpack_fs::sync_dir(dir).map_err(MaterializeError::Io)
}

/// Whether `a` and `b` are the same file (links to one inode).
fn same_file(a: &Path, b: &Path) -> Result<bool, MaterializeError> {
    let identity = |path: &Path| -> Result<Option<(u64, u64)>, MaterializeError> {
        match fs_err::metadata(path) {
            Ok(metadata) => Ok(Some((metadata.dev(), metadata.ino()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(MaterializeError::Io(e)),
        }
    };
    let a = identity(a)?;
    Ok(a.is_some() && a == identity(b)?)
}

/// The permission bits of the file at `path`.
fn mode(path: &Path) -> Result<u32, MaterializeError> {
    let metadata = fs_err::metadata(path).map_err(MaterializeError::Io)?;
    Ok(metadata.permissions().mode() & 0o7777)
}

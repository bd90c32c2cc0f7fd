//! The client side of a repository: fetching and checking its signed root
//! (signature, rollback, expiry), keeping it between runs, and reading the
//! shards it pins.
//!
//! State lives under the state directory, not the cache, so emptying the
//! cache does not forget the highest version seen:
//!
//! ```text
//! repos/<name>/index.toml, index.toml.minisig   the last verified root
//! versions.toml                                 per configured repository and key: the
//!                                               name its roots give, the highest version
//! versions.toml.lock                            held while an update checks and writes the above;
//!                                               a reader whose root and signature do not verify
//!                                               reads them again holding it shared
//! ```
//!
//! Rollback state belongs to the repository as configured (its name in
//! the configuration and its key), never to the name inside a root: one
//! publisher's channels (`rocm`, `nightly`) signed with one key cannot
//! stand in for each other, and a root that names another repository than
//! the first one seen is refused.

mod refresh;
mod suggest;
mod versions;

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use kpack_repo_index::freshness::{Freshness, Stale};
use kpack_repo_index::sign::{read_signed_root, verify_root, RootReadError, SignError, SignedRoot};
use kpack_repo_index::{
    Families, PackageName, RelativePath, RootIndex, SchemaError, Sha256, Shard, Timestamp,
};
use kpack_sign::PublicKey;

use crate::config::RepoConfig;
pub use crate::config::{Refresh, Trust};
use kpack_repo_index::fetch::Cache;
use kpack_repo_index::fetch::{Client, ClientError, Mirror, PinnedFile};
pub use refresh::Opened;
pub use suggest::suggestions;
pub use versions::StateError;
use versions::Versions;

/// What is wrong with a repository or its local state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RepoError {
    #[error("repository {repo}: public key")]
    Key {
        repo: String,
        #[source]
        source: Box<kpack_sign::PublicKeyError>,
    },
    #[error("repository {repo}: {url}: the root index's signature does not verify with the configured key")]
    Signature {
        repo: String,
        url: String,
        #[source]
        source: Box<SignError>,
    },
    #[error("repository {repo}: {url} offers version {found}, older than version {seen} already seen: a stale or malicious mirror (--allow-rollback overrides)")]
    Rollback {
        repo: String,
        url: String,
        found: u64,
        seen: u64,
    },
    #[error("repository {repo}: {url}: the root index expired at {expires} (now {now}): a frozen or stale mirror (--allow-expired overrides)")]
    Expired {
        repo: String,
        url: String,
        expires: Timestamp,
        now: Timestamp,
    },
    #[error("repository {repo}: {url} serves a root of repository {found}, not of repository {expected}, which its first root named: another repository signed with the same key (configure that one under a name of its own)")]
    OtherRepository {
        repo: String,
        url: String,
        found: String,
        expected: String,
    },
    #[error("repository {repo}: {url} is unsigned: it serves index.toml but no index.toml.minisig, so nothing it serves can be verified")]
    Unsigned { repo: String, url: String },
    #[error("repository {repo}: no index yet; run `kpack-get update` without --offline")]
    NotUpdated { repo: String },
    /// No mirror served a good root; each mirror's failure, in order.
    #[error("repository {repo}: every mirror failed:{}", list_errors(errors))]
    EveryMirror {
        repo: String,
        errors: Vec<RepoError>,
    },
    #[error(transparent)]
    Fetch(#[from] ClientError),
    #[error(transparent)]
    State(std::io::Error),
    #[error("{}: {problem}", path.display())]
    BadState {
        path: PathBuf,
        #[source]
        problem: versions::StateError,
    },
    #[error("repository {repo}: shard of {package}: {problem}")]
    Shard {
        repo: String,
        package: PackageName,
        #[source]
        problem: ShardProblem,
    },
}

/// What is wrong with a package's shard.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShardProblem {
    #[error("not UTF-8")]
    NotUtf8,
    #[error(transparent)]
    Schema(Box<SchemaError>),
    #[error("holds package {0}")]
    OtherPackage(PackageName),
}

impl RepoError {
    /// A failure of trust (signature, rollback, expiry, pinned hash).
    pub fn is_verification(&self) -> bool {
        match self {
            RepoError::Signature { .. }
            | RepoError::Unsigned { .. }
            | RepoError::Rollback { .. }
            | RepoError::OtherRepository { .. }
            | RepoError::Expired { .. }
            | RepoError::Shard { .. } => true,
            RepoError::Fetch(error) => error.is_integrity(),
            RepoError::EveryMirror { errors, .. } => errors.iter().any(RepoError::is_verification),
            _ => false,
        }
    }
}

/// Each error on a line of its own, with its causes.
fn list_errors(errors: &[RepoError]) -> String {
    errors
        .iter()
        .map(|error| format!("\n  {}", kpack_error::one_line(error)))
        .collect()
}

/// A repository whose root has been verified.
#[derive(Debug, Clone)]
pub struct Repo {
    pub config: RepoConfig,
    pub root: RootIndex,
    pub families: Families,
    /// When the root was fetched.
    pub fetched: SystemTime,
}

/// The lock beside `versions.toml` that updates of any repository take
/// while they check and write the state.
const STATE_LOCK: &str = "versions.toml.lock";

/// Holds the state directory's lock until dropped.
#[derive(Debug)]
struct StateLock {
    _file: fs_err::File,
}

/// Where repository state is kept.
#[derive(Debug, Clone)]
pub struct RepoStore {
    dir: PathBuf,
}

/// What `update` did for one repository.
#[derive(Debug, Clone)]
pub struct Updated {
    pub repo: Repo,
    pub previous: Option<u64>,
    pub url: String,
    /// Overrides that were used, to tell the user.
    pub warnings: Vec<String>,
}

impl RepoStore {
    pub fn new(state_dir: &Path) -> RepoStore {
        RepoStore {
            dir: state_dir.to_owned(),
        }
    }

    fn repo_dir(&self, config: &RepoConfig) -> PathBuf {
        self.dir.join("repos").join(&config.name)
    }

    fn versions_path(&self) -> PathBuf {
        self.dir.join("versions.toml")
    }

    /// The rollback state of every configured repository (both formats
    /// read, see [`versions`]).
    fn versions(&self) -> Result<Versions, RepoError> {
        let path = self.versions_path();
        let text = versions::load(&path).map_err(RepoError::State)?;
        Versions::parse(text.as_deref().unwrap_or_default())
            .map_err(|problem| RepoError::BadState { path, problem })
    }

    /// Takes the state directory's lock (`versions.toml.lock`, made
    /// 0600), waiting for another kpack-get's update to finish with the
    /// state: every read-modify-write of `versions.toml` and the roots
    /// kept happens under it.
    fn lock(&self) -> Result<StateLock, RepoError> {
        use fs_err::os::unix::fs::OpenOptionsExt;
        fs_err::create_dir_all(&self.dir).map_err(RepoError::State)?;
        let path = self.dir.join(STATE_LOCK);
        let file = fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(RepoError::State)?;
        file.file().lock().map_err(|source| {
            RepoError::State(std::io::Error::new(
                source.kind(),
                format!("{}: {source}", path.display()),
            ))
        })?;
        Ok(StateLock { _file: file })
    }

    /// Records in `versions` (read under `_lock`) that `config`, with
    /// `key`, accepted `root`, and writes them.
    fn remember(
        &self,
        versions: &mut Versions,
        config: &RepoConfig,
        key: &str,
        root: &RootIndex,
    ) -> Result<(), RepoError> {
        let before = versions.clone();
        versions.record(
            &config.name,
            key,
            root.repo.name.as_str(),
            root.repo.version,
        );
        if *versions == before {
            return Ok(());
        }
        let path = self.versions_path();
        let text = versions.to_toml().map_err(|problem| RepoError::BadState {
            path: path.clone(),
            problem,
        })?;
        write_atomic(&path, text.as_bytes())
    }

    /// Fetches, verifies and stores `config`'s root from the first mirror
    /// that offers a good one, failing over as every fetch does; when none
    /// does, every mirror's failure is reported.
    pub fn update(
        &self,
        client: &Client,
        config: &RepoConfig,
        trust: Trust,
    ) -> Result<Updated, RepoError> {
        let key = load_key(config)?;
        let attempt = |mirror: &Mirror| self.fetch_root(client, config, &key, mirror, trust);
        client
            .first_mirror(&config.mirrors, attempt)
            .map_err(|failures| no_mirror_served(config, failures))
    }

    fn fetch_root(
        &self,
        client: &Client,
        config: &RepoConfig,
        key: &PublicKey,
        mirror: &Mirror,
        trust: Trust,
    ) -> Result<Updated, RepoError> {
        let mirrors = std::slice::from_ref(mirror);
        let url = mirror.locate("index.toml").to_string();
        // A reader can catch a publish between the root and its signature;
        // `read_signed_root` reads again, then tries the root's own copy.
        let signed = read_signed_root(key, |path| client.fetch_unpinned(mirrors, path));
        let SignedRoot {
            root,
            bytes,
            signature,
        } = signed.map_err(|error| match error {
            RootReadError::Read(error) if lacks_signature(&error) => RepoError::Unsigned {
                repo: config.name.clone(),
                url: url.clone(),
            },
            RootReadError::Read(error) => RepoError::from(error),
            RootReadError::Sign(source) => RepoError::Signature {
                repo: config.name.clone(),
                url: url.clone(),
                source: Box::new(source),
            },
        })?;
        let mut warnings = Vec::new();
        let key_text = key.to_base64();
        // Checked and recorded under the state's lock: another update
        // (of this repository or another) neither slips a record past the
        // check nor loses its own to this one's write.
        let _lock = self.lock()?;
        let mut versions = self.versions()?;
        let previous = check_seen(config, &key_text, &versions, &root, &url)?;
        check_fresh(config, &root, &url, previous, trust, &mut warnings)?;
        let dir = self.repo_dir(config);
        fs_err::create_dir_all(&dir).map_err(RepoError::State)?;
        // Signature last: a reader that finds a root finds its signature.
        write_atomic(&dir.join("index.toml.minisig"), signature.as_bytes())?;
        write_atomic(&dir.join("index.toml"), &bytes)?;
        self.remember(&mut versions, config, &key_text, &root)?;
        let families = Families::builtin().with_overrides(&root.families);
        Ok(Updated {
            repo: Repo {
                config: config.clone(),
                root,
                families,
                fetched: SystemTime::now(),
            },
            previous,
            url,
            warnings,
        })
    }

    /// The stored root of `config`, verified again with its key (the key in
    /// the configuration may have changed) and checked for expiry; `None`
    /// when it was never fetched.
    pub fn load(
        &self,
        config: &RepoConfig,
        trust: Trust,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Repo>, RepoError> {
        let index_path = self.repo_dir(config).join("index.toml");
        let Some(root) = self.read_root(config)? else {
            return Ok(None);
        };
        check_fresh(
            config,
            &root,
            &index_path.display().to_string(),
            None,
            trust,
            warnings,
        )?;
        let fetched = fs_err::metadata(&index_path)
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let families = Families::builtin().with_overrides(&root.families);
        Ok(Some(Repo {
            config: config.clone(),
            root,
            families,
            fetched,
        }))
    }
}

impl RepoStore {
    /// The stored root of `config`, verified with `key`; `None` when it was
    /// never fetched. Read without a lock, as an update replaces the
    /// signature, then the root: a pair that does not verify is read again
    /// under the state's lock held shared, which the update holds while it
    /// writes the two.
    fn read_root(&self, config: &RepoConfig) -> Result<Option<RootIndex>, RepoError> {
        let dir = self.repo_dir(config);
        let Some((bytes, signature)) = read_stored_root(&dir)? else {
            return Ok(None);
        };
        let key = load_key(config)?;
        let mut verified = verify_root(&key, "index.toml", &bytes, &signature);
        if verified.is_err() {
            let _shared = self.lock_shared();
            let Some((bytes, signature)) = read_stored_root(&dir)? else {
                return Ok(None);
            };
            verified = verify_root(&key, "index.toml", &bytes, &signature);
        }
        verified.map(Some).map_err(|source| RepoError::Signature {
            repo: config.name.clone(),
            url: dir.join("index.toml").display().to_string(),
            source: Box::new(source),
        })
    }

    /// The state directory's lock held shared, waiting for an update
    /// writing the state; `None` when it cannot be had (no update made
    /// it, or it is not ours to open), as a reader needs no write access.
    fn lock_shared(&self) -> Option<StateLock> {
        let file = fs_err::File::open(self.dir.join(STATE_LOCK)).ok()?;
        file.file().lock_shared().ok()?;
        Some(StateLock { _file: file })
    }
}

/// The root kept in `dir` and its signature; `None` when there is none.
fn read_stored_root(dir: &Path) -> Result<Option<(Vec<u8>, String)>, RepoError> {
    let bytes = match fs_err::read(dir.join("index.toml")) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(RepoError::State(error)),
    };
    let signature =
        fs_err::read_to_string(dir.join("index.toml.minisig")).map_err(RepoError::State)?;
    Ok(Some((bytes, signature)))
}

/// The highest version seen of `config` with `key`, once `root` is known
/// to be of the repository first seen there; for a first update, what an
/// older kpack-get recorded for the root's name.
fn check_seen(
    config: &RepoConfig,
    key: &str,
    versions: &Versions,
    root: &RootIndex,
    url: &str,
) -> Result<Option<u64>, RepoError> {
    let name = root.repo.name.as_str();
    match versions.get(&config.name, key) {
        Some(seen) if seen.name != name => Err(RepoError::OtherRepository {
            repo: config.name.clone(),
            url: url.to_owned(),
            found: name.to_owned(),
            expected: seen.name.clone(),
        }),
        Some(seen) => Ok(Some(seen.version)),
        None => Ok(versions.legacy(name)),
    }
}

/// Why no mirror of `config` gave a good root: one mirror's failure as it
/// is; mirrors that each failed to serve the files, as one fetch failure
/// naming every mirror (as every other fetch reports it); any other
/// failures, every mirror's listed.
fn no_mirror_served(config: &RepoConfig, failures: Vec<(&Mirror, RepoError)>) -> RepoError {
    let mut errors: Vec<RepoError> = failures.into_iter().map(|(_, error)| error).collect();
    if errors.len() <= 1 {
        return errors.pop().unwrap_or(RepoError::NotUpdated {
            repo: config.name.clone(),
        });
    }
    let fetches: Option<Vec<_>> = errors
        .iter()
        .map(|error| match error {
            RepoError::Fetch(ClientError::AllMirrorsFailed { path, .. }) => Some(path.clone()),
            _ => None,
        })
        .collect();
    match fetches.and_then(|paths| paths.into_iter().next()) {
        Some(path) => RepoError::Fetch(ClientError::AllMirrorsFailed {
            path,
            failures: errors
                .into_iter()
                .flat_map(|error| match error {
                    RepoError::Fetch(ClientError::AllMirrorsFailed { failures, .. }) => failures,
                    _ => Vec::new(),
                })
                .collect(),
        }),
        None => RepoError::EveryMirror {
            repo: config.name.clone(),
            errors,
        },
    }
}

/// Whether `error` says the mirror has no `index.toml.minisig` (it served
/// `index.toml`, read first): an unsigned repository, not a network
/// failure.
fn lacks_signature(error: &ClientError) -> bool {
    matches!(
        error,
        ClientError::AllMirrorsFailed { path, failures }
            if path == "index.toml.minisig" && !failures.is_empty() && failures.iter().all(|f| f.missing)
    )
}

fn load_key(config: &RepoConfig) -> Result<PublicKey, RepoError> {
    PublicKey::load(&config.key).map_err(|source| RepoError::Key {
        repo: config.name.clone(),
        source: Box::new(source),
    })
}

/// The root's freshness, by the one policy both tools use: a rollback
/// below `seen` or an expired root is an error unless `trust` allows it,
/// then a warning.
fn check_fresh(
    config: &RepoConfig,
    root: &RootIndex,
    url: &str,
    seen: Option<u64>,
    trust: Trust,
    warnings: &mut Vec<String>,
) -> Result<(), RepoError> {
    let policy = Freshness {
        now: Timestamp::now(),
        seen,
        allow_rollback: trust.allow_rollback,
        allow_expired: trust.allow_expired,
    };
    let error = |stale| match stale {
        Stale::Rollback { found, seen } => RepoError::Rollback {
            repo: config.name.clone(),
            url: url.to_owned(),
            found,
            seen,
        },
        Stale::Expired { expires, now } => RepoError::Expired {
            repo: config.name.clone(),
            url: url.to_owned(),
            expires,
            now,
        },
    };
    for stale in policy.check(root).map_err(error)? {
        let flag = match stale {
            Stale::Rollback { .. } => "--allow-rollback",
            Stale::Expired { .. } => "--allow-expired",
        };
        warnings.push(format!("accepted anyway ({flag}): {}", error(stale)));
    }
    Ok(())
}

impl Repo {
    /// The shard of `name`, from the cache or the first mirror whose copy
    /// matches the hash the root pins.
    pub fn shard(
        &self,
        client: &Client,
        cache: &Cache,
        name: &PackageName,
    ) -> Result<Option<Shard>, RepoError> {
        let Some(file) = self.shard_file(name) else {
            return Ok(None);
        };
        let bytes = match cache.shard(&file.sha256) {
            Some(bytes) => bytes,
            None => {
                let bytes = client.fetch_verified(
                    file.mirrors,
                    file.path.as_str(),
                    file.sha256,
                    file.size,
                )?;
                put_shard(cache, &file, &bytes)?;
                bytes
            }
        };
        self.read_shard(name, &file, &bytes).map(Some)
    }

    /// The pinned file of `name`'s shard, if this repository lists it.
    pub fn shard_file<'a>(&'a self, name: &PackageName) -> Option<ShardFile<'a>> {
        let entry = self.root.packages.get(name)?;
        Some(ShardFile {
            mirrors: &self.config.mirrors,
            path: entry.shard_path(name),
            sha256: entry.sha256,
            size: entry.size,
        })
    }

    /// `name`'s shard from the verified `bytes` of its `file`: parsed, and
    /// naming `name`.
    pub fn read_shard(
        &self,
        name: &PackageName,
        file: &ShardFile<'_>,
        bytes: &[u8],
    ) -> Result<Shard, RepoError> {
        let bad = |problem| RepoError::Shard {
            repo: self.config.name.clone(),
            package: name.clone(),
            problem,
        };
        let path = file.path.as_str();
        let text = std::str::from_utf8(bytes).map_err(|_| bad(ShardProblem::NotUtf8))?;
        let shard = Shard::parse(path, text).map_err(|e| bad(ShardProblem::Schema(Box::new(e))))?;
        if &shard.name != name {
            return Err(bad(ShardProblem::OtherPackage(shard.name)));
        }
        Ok(shard)
    }
}

/// Where a package's shard is and what it must be.
#[derive(Debug, Clone)]
pub struct ShardFile<'a> {
    pub mirrors: &'a [Mirror],
    pub path: RelativePath,
    pub sha256: Sha256,
    pub size: Option<u64>,
}

impl ShardFile<'_> {
    /// As the client fetches it.
    pub fn pinned(&self) -> PinnedFile<'_> {
        PinnedFile {
            mirrors: self.mirrors,
            path: self.path.as_str(),
            sha256: self.sha256,
            size: self.size,
        }
    }
}

/// Keeps a fetched shard's verified `bytes` in the cache.
pub fn put_shard(cache: &Cache, file: &ShardFile<'_>, bytes: &[u8]) -> Result<(), RepoError> {
    cache
        .put_shard(&file.sha256, bytes)
        .map_err(|source| RepoError::Fetch(ClientError::Cache(source)))
}

/// Writes repository state atomically and durably.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), RepoError> {
    kpack_fs::write_atomic(path, bytes).map_err(|e| RepoError::State(e.into()))
}

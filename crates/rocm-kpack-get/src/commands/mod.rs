//! One module per command, and what they share: the resolved settings,
//! repositories loaded for reading, the GPUs to install for, and failures
//! with their exit codes.

pub mod cache;
pub mod check;
pub mod detect;
pub mod info;
pub mod install;
pub mod layout;
pub mod list;
pub mod pip;
pub mod remove;
pub mod search;
pub mod update;
pub mod verify;

use std::path::PathBuf;
use std::time::SystemTime;

use kpack_gpu::Target;
use kpack_repo_index::fetch::Cache;
use kpack_repo_index::fetch::{Client, ClientError, ClientOptions};
use kpack_repo_index::{Dependency, PackageName};
use rocm_kpack_get::config::{ConfigError, Settings};
use rocm_kpack_get::detect::{DetectOptions, Detection};
use rocm_kpack_get::install::lock_holder::LockHolder;
use rocm_kpack_get::install::plan::PlanError;
use rocm_kpack_get::install::{InstallError, Prefix, PrefixLock, PrefixReadLock};
use rocm_kpack_get::repo::{Repo, RepoError, RepoStore, Trust};

use crate::cli::GlobalArgs;
use crate::printer::Printer;

/// Documented exit codes (see `kpack-get --help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Failure = 1,
    Config = 3,
    Network = 4,
    Verification = 5,
    NothingFits = 6,
    Locked = 7,
    Local = 8,
    /// `check`: not every GPU is served.
    NotServed = 9,
}

/// A failed command: what to say, what to suggest, and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: Exit,
    pub error: anyhow::Error,
    pub hint: Option<String>,
}

impl Failure {
    pub fn new(code: Exit, error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            code,
            error: error.into(),
            hint: None,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Failure {
        self.hint = Some(hint.into());
        self
    }

    fn maybe_hint(self, hint: Option<&str>) -> Failure {
        match hint {
            Some(hint) => self.hint(hint),
            None => self,
        }
    }
}

fn local_hint(kind: Option<std::io::ErrorKind>) -> (Exit, Option<&'static str>) {
    match kind {
        Some(std::io::ErrorKind::PermissionDenied) | Some(std::io::ErrorKind::ReadOnlyFilesystem) => (
            Exit::Local,
            Some("choose a prefix you may write (--prefix), or run with the rights to write this one"),
        ),
        Some(std::io::ErrorKind::StorageFull) | Some(std::io::ErrorKind::QuotaExceeded) => (
            Exit::Local,
            Some("the disk is full: free space, or use --prefix / --cache-dir on another disk; nothing was changed"),
        ),
        _ => (Exit::Failure, None),
    }
}

impl From<ClientError> for Failure {
    fn from(error: ClientError) -> Failure {
        let (code, hint) = match &error {
            _ if error.is_integrity() => (
                Exit::Verification,
                Some("a mirror served bytes that do not match the signed index; report it to the mirror's operator"),
            ),
            ClientError::Offline { .. } => (Exit::Network, Some("run without --offline to download it")),
            ClientError::AllMirrorsFailed { .. } => (
                Exit::Network,
                Some("check the network and the repository URLs; nothing was installed"),
            ),
            ClientError::Cache(source) => local_hint(Some(source.kind())),
            _ => (Exit::Failure, None),
        };
        Failure::new(code, error).maybe_hint(hint)
    }
}

impl From<RepoError> for Failure {
    fn from(error: RepoError) -> Failure {
        if let RepoError::Fetch(inner) = error {
            return inner.into();
        }
        let code = if error.is_verification() {
            Exit::Verification
        } else if matches!(error, RepoError::NotUpdated { .. }) {
            Exit::Network
        } else if matches!(error, RepoError::Key { .. }) {
            Exit::Config
        } else {
            Exit::Failure
        };
        let hint = match &error {
            RepoError::Signature { .. } => {
                Some("the index is not signed by the configured key: check the key, or the mirror has been tampered with")
            }
            _ => None,
        };
        Failure::new(code, error).maybe_hint(hint)
    }
}

impl From<InstallError> for Failure {
    fn from(error: InstallError) -> Failure {
        if let InstallError::NotADirectory {
            owner: Some(owner), ..
        } = &error
        {
            let hint = format!("the packages conflict; nothing was changed: remove {owner} first, or install into another --prefix");
            return Failure::new(Exit::Failure, error).hint(hint);
        }
        let (code, hint) = match &error {
            InstallError::Locked { .. } => (
                Exit::Locked,
                Some("wait for it to finish, or run without --no-wait to wait"),
            ),
            InstallError::UnsafeEntry { .. }
            | InstallError::LinkRefused { .. }
            | InstallError::NotAnArchive { .. }
            | InstallError::TooLarge { .. }
            | InstallError::DecodesPastLimit { .. } => (
                Exit::Verification,
                Some("the package is unsafe or malformed; nothing was installed; report it to the repository's maintainers"),
            ),
            InstallError::Unowned { .. }
            | InstallError::NotADirectory { owner: None, .. }
            | InstallError::DirectoryInTheWay { .. } => (
                Exit::Failure,
                Some("move the file away if kpack-get may replace it, or install into another --prefix; nothing was changed"),
            ),
            InstallError::OtherFileSystem { .. } => (
                Exit::Failure,
                Some("install into a prefix on one mount (a file system or bind mount may hold the whole prefix, not part of it); nothing was changed"),
            ),
            InstallError::MountPoint { .. } => (
                Exit::Failure,
                Some("unmount it first; nothing was changed"),
            ),
            InstallError::NotInstalled { .. } => (
                Exit::NothingFits,
                Some("`kpack-get list` shows what is installed"),
            ),
            _ => local_hint(error.io_kind()),
        };
        Failure::new(code, error).maybe_hint(hint)
    }
}

impl From<PlanError> for Failure {
    fn from(error: PlanError) -> Failure {
        match error {
            PlanError::Repo(inner) => inner.into(),
            PlanError::NoDeviceCode { .. } => Failure::new(Exit::NothingFits, error)
                .hint("--target picks GPU targets explicitly"),
            PlanError::OlderThanPrefix { .. } => Failure::new(Exit::Verification, error),
            PlanError::Resolve(_) => Failure::new(Exit::NothingFits, error)
                .hint("`kpack-get search` and `kpack-get info` show what is available; `kpack-get update` refreshes the index"),
            _ => Failure::new(Exit::Failure, error),
        }
    }
}

/// What a command says while it waits for the prefix's lock, naming the
/// holder when the system does.
fn waiting_note(prefix: &Prefix, holder: Option<LockHolder>) -> String {
    let held = holder.map_or(String::new(), |holder| format!(" ({holder})"));
    format!(
        "waiting for another kpack-get{held} to finish with {}",
        prefix.root().display()
    )
}

impl From<ConfigError> for Failure {
    fn from(error: ConfigError) -> Failure {
        Failure::new(Exit::Config, error)
    }
}

/// What every command starts from.
#[derive(Debug)]
pub struct Context {
    pub settings: Settings,
    pub printer: Printer,
    pub global: GlobalArgs,
    pub trust: Trust,
    pub cache: Cache,
    pub store: RepoStore,
}

impl Context {
    pub fn new(global: GlobalArgs, settings: Settings, printer: Printer) -> Context {
        let trust = Trust {
            allow_rollback: global.allow_rollback,
            allow_expired: global.allow_expired,
        };
        Context {
            cache: Cache::new(&settings.cache_dir),
            store: RepoStore::new(&settings.state_dir),
            settings,
            printer,
            global,
            trust,
        }
    }

    pub fn client(&self) -> Result<Client, Failure> {
        let mut options = ClientOptions {
            concurrency: self.settings.concurrency,
            offline: self.global.offline,
            limits: self.settings.limits,
            ..ClientOptions::default()
        };
        if let Some(timeout) = self.global.read_timeout {
            options.read_timeout = timeout;
        }
        if let Some(attempts) = self.global.attempts {
            options.attempts = attempts.max(1);
        }
        Ok(Client::new(options)?)
    }

    /// The configured repositories, their roots read from the state
    /// directory, fetched first when never fetched or older than the
    /// configured age (unless --offline).
    pub fn repos(&self, client: &Client) -> Result<Vec<Repo>, Failure> {
        if self.settings.repos.is_empty() {
            let place = self
                .settings
                .config_path
                .clone()
                .or_else(|| {
                    rocm_kpack_get::config::xdg_dir("XDG_CONFIG_HOME", ".config")
                        .map(|d| d.join("kpack-get/config.toml"))
                })
                .unwrap_or_else(|| PathBuf::from("/etc/kpack-get/config.toml"));
            return Err(
                Failure::new(Exit::Config, anyhow::anyhow!("no repository configured")).hint(
                    format!(
                "add a [[repo]] with name, mirrors and key to {}, or pass --repo URL --key KEY",
                place.display()
            ),
                ),
            );
        }
        let mut repos = Vec::new();
        for config in &self.settings.repos {
            let mut warnings = Vec::new();
            let stored = self.store.load(config, self.trust, &mut warnings);
            let fresh = |repo: &Repo| {
                SystemTime::now()
                    .duration_since(repo.fetched)
                    .map(|age| age.as_secs() < self.settings.max_index_age)
                    .unwrap_or(true)
            };
            let repo = match stored {
                Ok(Some(repo)) if self.global.offline || fresh(&repo) => repo,
                Ok(Some(repo)) => match self.store.update(client, config, self.trust) {
                    Ok(updated) => {
                        warnings.extend(updated.warnings);
                        updated.repo
                    }
                    Err(error) if !error.is_verification() => {
                        self.printer
                            .warn(format!("{error}; using the index fetched before"));
                        repo
                    }
                    Err(error) => return Err(error.into()),
                },
                Ok(None) | Err(RepoError::Expired { .. }) if !self.global.offline => {
                    let updated = self.store.update(client, config, self.trust)?;
                    warnings.extend(updated.warnings);
                    updated.repo
                }
                Ok(None) => {
                    return Err(RepoError::NotUpdated {
                        repo: config.name.clone(),
                    }
                    .into())
                }
                Err(error) => return Err(error.into()),
            };
            for warning in warnings {
                self.printer.warn(warning);
            }
            repos.push(repo);
        }
        Ok(repos)
    }

    pub fn detect_options(&self) -> Result<DetectOptions, Failure> {
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("kpack-get"));
        let mut options = DetectOptions::new(exe);
        options.overrides = self.override_targets()?;
        options.hsa_library = self.global.hsa_library.clone();
        options.hsa_enabled = !self.global.no_hsa;
        if let Some(timeout) = self.global.hsa_timeout {
            options.hsa_timeout = timeout;
        }
        if let Some(root) = &self.global.sysfs_root {
            options.sysfs_root = root.clone();
        }
        if let Some(pci_ids) = &self.global.pci_ids {
            options.pci_ids = vec![pci_ids.clone()];
        }
        Ok(options)
    }

    fn override_targets(&self) -> Result<Vec<Target>, Failure> {
        self.global
            .target
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .map(|s| Target::parse(s).map_err(|e| Failure::new(Exit::NothingFits, e)))
            .collect()
    }

    /// The GPUs to install for, with the detection's notes shown.
    pub fn gpus(&self) -> Result<(Vec<Target>, Detection), Failure> {
        let options = self.detect_options()?;
        let detection = rocm_kpack_get::detect::detect(&options);
        for warning in &detection.warnings {
            self.printer.warn(warning);
        }
        for note in &detection.notes {
            self.printer.detail(format!("detect: {note}"));
        }
        Ok((detection.targets(), detection))
    }

    pub fn prefix(&self, create: bool) -> Result<Prefix, Failure> {
        Ok(Prefix::open(&self.settings.prefix, create)?)
    }

    /// Takes the prefix's lock shared, for a command that only reads it
    /// (`list`, `verify`): nothing in the prefix is written, and a change an
    /// interrupted run left is reported, not completed.
    pub fn read_lock(&self, prefix: &Prefix) -> Result<Option<PrefixReadLock>, Failure> {
        let lock = prefix.read_lock(!self.global.no_wait, |holder| {
            self.printer.note(waiting_note(prefix, holder))
        })?;
        if let Some(id) = prefix.pending_change()? {
            self.printer.warn(format!(
                "an interrupted change ({id}) in {} is not finished, so what is shown is the state before it; \
                 the next `kpack-get install`, `remove` or `upgrade` completes it",
                prefix.root().display()
            ));
        }
        Ok(lock)
    }

    /// Takes the prefix's lock and finishes what an interrupted run left.
    pub fn lock(&self, prefix: &Prefix) -> Result<PrefixLock, Failure> {
        let lock = prefix.lock(!self.global.no_wait, |holder| {
            self.printer.note(waiting_note(prefix, holder))
        })?;
        let Some(recovered) = prefix.recover(&lock)? else {
            return Ok(lock);
        };
        let root = prefix.root().display();
        if let Some(id) = recovered.completed {
            self.printer
                .note(format!("completed an interrupted change ({id}) in {root}"));
        }
        let ids = recovered.discarded.len();
        if ids > 0 {
            self.printer.detail(format!(
                "discarded {ids} unfinished staging director{} in {root}",
                if ids == 1 { "y" } else { "ies" },
            ));
        }
        for (id, reason) in recovered.moved_aside {
            self.printer.warn(format!(
                "the unfinished staging directory {id} in {root} cannot be removed ({reason}); \
                 moved aside to .kpack/{}{id}, which a later run empties",
                rocm_kpack_get::install::commit::TRASH
            ));
        }
        Ok(lock)
    }
}

/// `NAME` or `NAME@REQUIREMENT`; a bare version means exactly it.
pub fn parse_request(text: &str) -> Result<Dependency, Failure> {
    let bad =
        |message: String| Failure::new(Exit::NothingFits, anyhow::anyhow!("{text:?}: {message}"));
    let (name, requirement) = match text.split_once('@') {
        Some((name, requirement)) => (name, requirement.trim()),
        None => (text, ""),
    };
    let name: PackageName = name
        .parse()
        .map_err(|e: kpack_repo_index::types::InvalidValue| bad(e.to_string()))?;
    if requirement.is_empty() {
        return Ok(Dependency::any(name));
    }
    if let Ok(version) = semver::Version::parse(requirement) {
        return Ok(Dependency::exact(name, &version));
    }
    let requirement = semver::VersionReq::parse(requirement).map_err(|e| bad(e.to_string()))?;
    Ok(Dependency { name, requirement })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_version_is_exact() {
        let request = parse_request("rocm-rand@5.3.3").unwrap();
        assert!(request.requirement.matches(&"5.3.3".parse().unwrap()));
        assert!(!request.requirement.matches(&"5.3.4".parse().unwrap()));
        let request = parse_request("rocm-rand@>=5").unwrap();
        assert!(request.requirement.matches(&"6.0.0".parse().unwrap()));
        assert!(parse_request("Bad_Name").is_err());
    }
}

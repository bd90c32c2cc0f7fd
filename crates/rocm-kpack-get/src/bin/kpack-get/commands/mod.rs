//! One module per command, and what they share: the resolved settings,
//! repositories loaded for reading, the GPUs to install for, and failures
//! with their exit codes.

pub mod cache;
pub mod check;
pub mod detect;
pub mod info;
pub mod install;
pub mod list;
pub mod pip;
pub mod remove;
pub mod search;
pub mod update;
pub mod verify;

use std::path::PathBuf;

use kpack_gpu::target::join_targets;
use kpack_repo_index::fetch::Cache;
use kpack_repo_index::fetch::{Client, ClientError};
use kpack_repo_index::{Dependency, PackageName};
use rocm_kpack_get::check::CheckReport;
use rocm_kpack_get::config::{ConfigError, Settings};
use rocm_kpack_get::detect::choice::{ChosenTargets, TargetChoice, TargetChoiceError};
use rocm_kpack_get::install::lock_holder::LockHolder;
use rocm_kpack_get::install::plan::PlanError;
use rocm_kpack_get::install::{InstallError, Prefix, PrefixChange, PrefixLock};
use rocm_kpack_get::repo::{Repo, RepoError, RepoStore};

use crate::cli::GlobalArgs;
use crate::printer::Printer;

/// Documented exit codes (see `kpack-get --help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Failure = 1,
    /// What was typed cannot be read (clap's own errors exit 2 too).
    Usage = 2,
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

    /// For a package no repository has: the names it may stand for, when
    /// there are any, as the hint.
    pub fn did_you_mean(self, near: &[PackageName]) -> Failure {
        let names: Vec<&str> = near.iter().map(PackageName::as_str).collect();
        match names.as_slice() {
            [] => self,
            [one] => self.hint(format!("did you mean {one}?")),
            several => self.hint(format!("did you mean one of: {}?", several.join(", "))),
        }
    }

    /// Exit 9 when `report` finds a GPU not served.
    pub fn unless_served(report: &CheckReport) -> Result<(), Failure> {
        if report.served {
            return Ok(());
        }
        Err(Failure::new(
            Exit::NotServed,
            anyhow::anyhow!(
                "the installed device code does not serve {}",
                join_targets(&report.unserved())
            ),
        ))
    }

    fn maybe_hint(self, hint: Option<&str>) -> Failure {
        match hint {
            Some(hint) => self.hint(hint),
            None => self,
        }
    }
}

/// Which of kpack-get's directories a local failure was in, for its hint.
#[derive(Debug, Clone, Copy)]
enum Place {
    Prefix,
    Cache,
    State,
}

/// Exit 8 and what to do for a directory that cannot be written: no
/// rights, a read-only file system, a full disk, or (for the cache and
/// state directories, made as needed) a file where a directory belongs.
fn local_hint(kind: Option<std::io::ErrorKind>, place: Place) -> (Exit, Option<&'static str>) {
    use std::io::ErrorKind;
    let unwritable = match place {
        Place::Prefix => "choose a prefix you may write (--prefix), or run with the rights to write this one",
        Place::Cache => "choose a cache directory you may write (--cache-dir or KPACK_GET_CACHE_DIR); nothing was changed",
        Place::State => "choose a state directory you may write (--state-dir or KPACK_GET_STATE_DIR); nothing was changed",
    };
    let not_a_directory = matches!(
        kind,
        Some(ErrorKind::NotADirectory | ErrorKind::AlreadyExists)
    ) && !matches!(place, Place::Prefix);
    if not_a_directory {
        return (Exit::Local, Some(unwritable));
    }
    match kind {
        Some(ErrorKind::PermissionDenied) | Some(ErrorKind::ReadOnlyFilesystem) => {
            (Exit::Local, Some(unwritable))
        }
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
            ClientError::Cache(source) => local_hint(Some(source.kind()), Place::Cache),
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
        if let RepoError::State(source) = &error {
            let (code, hint) = local_hint(Some(source.kind()), Place::State);
            return Failure::new(code, error).maybe_hint(hint);
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
            RepoError::Unsigned { .. } => {
                Some("the publisher signs it with `kpack-repo sign REPO --secret-key SECRET_KEY`; a mirror that lost the signature is incomplete")
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
            | InstallError::DecodesPastLimit { .. }
            | InstallError::OverBudget(_) => (
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
            _ => local_hint(error.io_kind(), Place::Prefix),
        };
        Failure::new(code, error).maybe_hint(hint)
    }
}

impl From<PlanError> for Failure {
    fn from(error: PlanError) -> Failure {
        match error {
            PlanError::Repo(inner) => inner.into(),
            PlanError::NoDeviceCode { .. } => Failure::new(Exit::NothingFits, error),
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

impl From<TargetChoiceError> for Failure {
    fn from(error: TargetChoiceError) -> Failure {
        Failure::new(Exit::NothingFits, error)
    }
}

impl From<ConfigError> for Failure {
    fn from(error: ConfigError) -> Failure {
        Failure::new(Exit::Config, error)
    }
}

/// What every command starts from: the settings, resolved once from the
/// configuration, the environment and the flags.
#[derive(Debug)]
pub struct Context {
    pub settings: Settings,
    pub printer: Printer,
    pub targets: TargetChoice,
    /// What a fix command repeats of this command line: the prefix, the
    /// configuration and the repositories given.
    pub repeated: Vec<String>,
    pub cache: Cache,
    pub store: RepoStore,
}

impl Context {
    /// The context of a command run with `settings`; `targets` is the
    /// choice of GPU targets it makes (for a prefix, or for a Python
    /// environment).
    pub fn new(
        settings: Settings,
        printer: Printer,
        targets: TargetChoice,
        repeated: Vec<String>,
    ) -> Context {
        Context {
            cache: Cache::new(&settings.cache_dir),
            store: RepoStore::new(&settings.state_dir),
            repeated,
            targets,
            settings,
            printer,
        }
    }

    pub fn client(&self) -> Result<Client, Failure> {
        Ok(Client::new(self.settings.network.clone())?)
    }

    /// The configured repositories, each fetched again first when the
    /// store's refresh policy says so, their warnings shown.
    pub fn repos(&self, client: &Client) -> Result<Vec<Repo>, Failure> {
        if self.settings.repos.is_empty() {
            return Err(no_repository(&self.settings));
        }
        let mut repos = Vec::new();
        for config in &self.settings.repos {
            let opened =
                self.store
                    .open(client, config, self.settings.trust, self.settings.refresh)?;
            for warning in opened.warnings {
                self.printer.warn(warning);
            }
            repos.push(opened.repo);
        }
        Ok(repos)
    }

    /// The GPU targets to install for, with the detection's notes shown.
    pub fn gpus(&self) -> Result<ChosenTargets, Failure> {
        let chosen = self.targets.choose(&self.settings.detect)?;
        for warning in &chosen.detection.warnings {
            self.printer.warn(warning);
        }
        for note in &chosen.detection.notes {
            self.printer.detail(format!("detect: {note}"));
        }
        Ok(chosen)
    }

    /// `--target T,...` when GPU targets were given (flag or
    /// `KPACK_GET_TARGETS`), for a fix command to repeat.
    pub fn target_args(&self) -> Vec<String> {
        let given = self.targets.given();
        if given.is_empty() {
            return Vec::new();
        }
        vec!["--target".to_owned(), given.join(",")]
    }

    pub fn prefix(&self, create: bool) -> Result<Prefix, Failure> {
        Ok(Prefix::open(&self.settings.prefix, create)?)
    }

    /// What a command that only reads the prefix (`list`, `verify`,
    /// `check`) says of a change: it takes no lock, so it never waits for
    /// one and writes nothing (but the mode of a lock file left open to
    /// others, made 0600 by its owner), and it shows the state before a change
    /// still under way or left unfinished ([`Prefix::change`]).
    pub fn read_state(&self, prefix: &Prefix) -> Result<PrefixChange, Failure> {
        let change = prefix.change()?;
        let root = prefix.root().display();
        match &change {
            PrefixChange::None => {}
            PrefixChange::UnderWay {
                holder,
                journal: None,
            } => self.printer.note(format!(
                "{root} is locked by {holder}, which may be changing it; \
                 what is shown is the state before any change it makes"
            )),
            PrefixChange::UnderWay {
                holder,
                journal: Some((id, _)),
            } => self.printer.note(format!(
                "{holder} is changing {root} ({id}); what is shown is the state before the change"
            )),
            PrefixChange::Interrupted(id) => self.printer.warn(format!(
                "an interrupted change ({id}) in {root} is not finished, so what is shown is the state before it; \
                 the next `kpack-get install`, `remove` or `upgrade` completes it"
            )),
        }
        Ok(change)
    }

    /// Takes the prefix's lock and finishes what an interrupted run left.
    pub fn lock(&self, prefix: &Prefix) -> Result<PrefixLock, Failure> {
        let lock = prefix.lock(self.settings.wait, |holder| {
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

/// The failure when no repository is configured, saying where to add one.
fn no_repository(settings: &Settings) -> Failure {
    let place = settings
        .config_path
        .clone()
        .or_else(|| {
            rocm_kpack_get::config::xdg_dir("XDG_CONFIG_HOME", ".config")
                .map(|d| d.join("kpack-get/config.toml"))
        })
        .unwrap_or_else(|| PathBuf::from("/etc/kpack-get/config.toml"));
    Failure::new(Exit::Config, anyhow::anyhow!("no repository configured")).hint(format!(
        "add a [[repo]] with name, mirrors and key to {}, or pass --repo URL --key KEY",
        place.display()
    ))
}

/// The flags a fix command repeats: the prefix, the configuration and
/// the repositories, when given.
pub fn repeated(global: &GlobalArgs) -> Vec<String> {
    let mut args = Vec::new();
    if let Some(prefix) = &global.prefix {
        args.extend(["--prefix".to_owned(), prefix.display().to_string()]);
    }
    if let Some(config) = &global.config {
        args.extend(["--config".to_owned(), config.display().to_string()]);
    }
    for repo in &global.repos {
        args.extend(["--repo".to_owned(), repo.clone()]);
    }
    if let (false, Some(key)) = (global.repos.is_empty(), &global.key) {
        args.extend(["--key".to_owned(), key.clone()]);
    }
    args
}

/// `NAME` or `NAME@REQUIREMENT`; a bare version means exactly it.
pub fn parse_request(text: &str) -> Result<Dependency, Failure> {
    let bad = |message: String| Failure::new(Exit::Usage, anyhow::anyhow!("{text:?}: {message}"));
    let text = text.trim();
    // `NAME@REQ`, or pip's `NAME==1.2` and `NAME>=1.2`, answered the same.
    let (name, requirement) = match text.split_once('@') {
        Some((name, requirement)) => (name, requirement.trim().to_owned()),
        None => match text.find(['=', '<', '>', '!', '~']) {
            Some(at) => {
                let (name, requirement) = text.split_at(at);
                let requirement = match requirement.strip_prefix("==") {
                    Some(version) => format!("={}", version.trim()),
                    None if requirement.starts_with("!=") || requirement.starts_with("~=") => {
                        return Err(bad(format!(
                            "{} is pip's; kpack-get takes NAME@=VERSION, NAME@>=VERSION, NAME@<VERSION or NAME@^VERSION",
                            &requirement[..2]
                        )))
                    }
                    None => requirement.to_owned(),
                };
                (name.trim_end(), requirement)
            }
            None => (text, String::new()),
        },
    };
    // Package names fold case, as pip's do.
    let name: PackageName = name
        .to_ascii_lowercase()
        .parse()
        .map_err(|e: kpack_repo_index::types::InvalidValue| bad(e.to_string()))?;
    if requirement.is_empty() {
        return Ok(Dependency::any(name));
    }
    if let Ok(version) = semver::Version::parse(&requirement) {
        return Ok(Dependency::exact(name, &version));
    }
    let requirement = semver::VersionReq::parse(&requirement).map_err(|e| bad(e.to_string()))?;
    Ok(Dependency { name, requirement })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fold_case_and_pip_s_spellings_are_read() {
        let request = parse_request("ROCm-Rand==5.3.3").unwrap();
        assert_eq!(request.name.as_str(), "rocm-rand");
        assert!(request.requirement.matches(&"5.3.3".parse().unwrap()));
        assert!(!request.requirement.matches(&"5.3.4".parse().unwrap()));
        let request = parse_request("rocm-rand>=5.3").unwrap();
        assert!(request.requirement.matches(&"5.4.0".parse().unwrap()));
        assert!(!request.requirement.matches(&"5.2.0".parse().unwrap()));
        for bad in ["rocm-rand!=5", "rocm-rand~=5.3", "sm_80!", "-rand"] {
            assert_eq!(parse_request(bad).unwrap_err().code, Exit::Usage, "{bad}");
        }
    }

    #[test]
    fn a_bare_version_is_exact() {
        let request = parse_request("rocm-rand@5.3.3").unwrap();
        assert!(request.requirement.matches(&"5.3.3".parse().unwrap()));
        assert!(!request.requirement.matches(&"5.3.4".parse().unwrap()));
        let request = parse_request("rocm-rand@>=5").unwrap();
        assert!(request.requirement.matches(&"6.0.0".parse().unwrap()));
        assert!(parse_request("bad name").is_err());
        assert_eq!(parse_request("Bad_Name").unwrap().name.as_str(), "bad_name");
    }
}

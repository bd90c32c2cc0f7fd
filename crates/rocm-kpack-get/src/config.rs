//! Configuration: the repositories to install from and where things live.
//!
//! Read from TOML (`$KPACK_GET_CONFIG`, else `$XDG_CONFIG_HOME/kpack-get/config.toml`,
//! else `/etc/kpack-get/config.toml`); environment variables and command
//! line flags override it, in that order, before any command runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kpack_env::EnvVars;
use kpack_repo_index::limits::Limits;
use serde::Deserialize;

use crate::layout::hip_runtime::SearchRoots;
use crate::layout::LayoutChoice;
use kpack_repo_index::fetch::{ClientOptions, InvalidMirror, Mirror};

use crate::detect::DetectOptions;

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("cannot read the configuration")]
    Read(#[source] std::io::Error),
    /// toml's message names the key and the line.
    #[error("{}: {}", path.display(), source.to_string().trim_end())]
    Parse {
        path: PathBuf,
        #[source]
        source: toml::de::Error,
    },
    #[error("repository {name:?}: {problem}")]
    Repo {
        name: String,
        #[source]
        problem: RepoProblem,
    },
    #[error("repository {name:?}")]
    Mirror {
        name: String,
        #[source]
        source: InvalidMirror,
    },
    #[error("no home directory: set HOME, or XDG_CACHE_HOME and XDG_STATE_HOME")]
    NoHome,
    #[error("{setting} = {seconds}: {NOT_SECONDS}")]
    Limit { setting: &'static str, seconds: f64 },
}

/// What is wrong with a repository's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RepoProblem {
    #[error("a repository name is letters, digits, '.', '_', '-'")]
    BadName,
    #[error("lists no mirrors")]
    NoMirrors,
    #[error("has no public key")]
    NoKey,
}

/// One repository: a local name, the mirrors serving it (tried in order)
/// and the minisign public key its root index is signed with.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoConfig {
    pub name: String,
    pub mirrors: Vec<Mirror>,
    /// A key (`RWQ...`) or the path of a minisign public key file.
    pub key: String,
}

/// The configuration file's contents.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct ConfigFile {
    #[serde(default, rename = "repo")]
    pub repos: Vec<RepoConfig>,
    pub prefix: Option<PathBuf>,
    pub cache_dir: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub concurrency: Option<usize>,
    /// Seconds after which a stored root index is fetched again.
    pub max_index_age: Option<u64>,
    /// Bounds on reads from mirrors (see [`LimitSettings`]).
    pub max_index_size: Option<u64>,
    pub max_wheel_size: Option<u64>,
    pub low_speed_limit: Option<u64>,
    pub low_speed_time: Option<f64>,
    pub index_timeout: Option<f64>,
    /// `auto`, `kpack` or `fat` (see [`LayoutChoice`]).
    pub layout: Option<LayoutChoice>,
}

/// The bounds on reads from mirrors, as the file, the environment or the
/// flags give them (each unset one takes its default, see
/// [`kpack_repo_index::limits`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitSettings {
    /// Bytes read at most of the root index (and of a shard whose root
    /// pins no size).
    pub max_index_size: Option<u64>,
    /// Bytes read at most of a wheel a package index links to without
    /// giving its size.
    pub max_wheel_size: Option<u64>,
    /// Bytes per second below which a transfer fails (over
    /// `low_speed_time`); 0 for no minimum.
    pub low_speed_limit: Option<u64>,
    /// Seconds the minimum rate is judged over.
    pub low_speed_time: Option<f64>,
    /// Seconds the root, its signature or a shard may take in all.
    pub index_timeout: Option<f64>,
}

impl LimitSettings {
    /// `self`, with what it leaves unset taken from `below`.
    fn or(self, below: LimitSettings) -> LimitSettings {
        LimitSettings {
            max_index_size: self.max_index_size.or(below.max_index_size),
            max_wheel_size: self.max_wheel_size.or(below.max_wheel_size),
            low_speed_limit: self.low_speed_limit.or(below.low_speed_limit),
            low_speed_time: self.low_speed_time.or(below.low_speed_time),
            index_timeout: self.index_timeout.or(below.index_timeout),
        }
    }

    /// The limits, defaults where unset; a duration that is not a
    /// positive number of seconds is refused.
    fn resolve(self) -> Result<Limits, ConfigError> {
        let defaults = Limits::default();
        let seconds = |value: Option<f64>, setting: &'static str, default: Duration| match value {
            None => Ok(default),
            Some(seconds) => duration(seconds).ok_or(ConfigError::Limit { setting, seconds }),
        };
        Ok(Limits {
            index_size: self.max_index_size.unwrap_or(defaults.index_size),
            wheel_size: self.max_wheel_size.unwrap_or(defaults.wheel_size),
            low_speed_limit: self.low_speed_limit.unwrap_or(defaults.low_speed_limit),
            low_speed_time: seconds(
                self.low_speed_time,
                "low-speed-time",
                defaults.low_speed_time,
            )?,
            index_timeout: seconds(self.index_timeout, "index-timeout", defaults.index_timeout)?,
        })
    }
}

impl ConfigFile {
    /// Parses a configuration file's text; `path` is for messages.
    pub(crate) fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigError> {
        let config: ConfigFile = toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })?;
        for repo in &config.repos {
            repo.check()?;
        }
        Ok(config)
    }

    /// Loads `explicit` if given, else the first configuration file found in
    /// the usual places; none at all is an empty configuration.
    pub(crate) fn load(
        explicit: Option<&Path>,
    ) -> Result<(ConfigFile, Option<PathBuf>), ConfigError> {
        let candidates: Vec<PathBuf> = match explicit {
            Some(path) => vec![path.to_owned()],
            None => default_locations(),
        };
        for path in candidates {
            match fs_err::read_to_string(&path) {
                Ok(text) => return Ok((ConfigFile::parse(&path, &text)?, Some(path))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && explicit.is_none() => {}
                Err(error) => return Err(ConfigError::Read(error)),
            }
        }
        Ok((ConfigFile::default(), None))
    }
}

impl ConfigFile {
    /// The bounds on reads the file sets.
    fn limits(&self) -> LimitSettings {
        LimitSettings {
            max_index_size: self.max_index_size,
            max_wheel_size: self.max_wheel_size,
            low_speed_limit: self.low_speed_limit,
            low_speed_time: self.low_speed_time,
            index_timeout: self.index_timeout,
        }
    }
}

impl RepoConfig {
    fn check(&self) -> Result<(), ConfigError> {
        let bad = |problem| ConfigError::Repo {
            name: self.name.clone(),
            problem,
        };
        if self.name.is_empty()
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(bad(RepoProblem::BadName));
        }
        if self.mirrors.is_empty() {
            return Err(bad(RepoProblem::NoMirrors));
        }
        if self.key.trim().is_empty() {
            return Err(bad(RepoProblem::NoKey));
        }
        Ok(())
    }

    /// A repository given on the command line as `[NAME=]URL`.
    pub fn from_flag(value: &str, key: &str) -> Result<RepoConfig, ConfigError> {
        let (name, url) = match value.split_once('=') {
            Some((name, url)) if !name.contains('/') && !name.contains(':') => (name, url),
            _ => ("default", value),
        };
        let mirrors = url
            .split(',')
            .map(Mirror::parse)
            .collect::<Result<_, _>>()
            .map_err(|source| ConfigError::Mirror {
                name: name.to_owned(),
                source,
            })?;
        let repo = RepoConfig {
            name: name.to_owned(),
            mirrors,
            key: key.to_owned(),
        };
        repo.check()?;
        Ok(repo)
    }
}

fn default_locations() -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if let Some(dir) = xdg_dir(EnvVars::XDG_CONFIG_HOME, ".config") {
        paths.push(dir.join("kpack-get/config.toml"));
    }
    paths.push(PathBuf::from("/etc/kpack-get/config.toml"));
    paths
}

/// An environment variable, as the settings read it (detection reads the
/// variables of the GPU runtimes itself).
fn env_var(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name)
}

/// `$VAR` if set to an absolute path, else `$HOME/fallback`.
pub fn xdg_dir(var: &str, fallback: &str) -> Option<PathBuf> {
    if let Some(dir) = env_var(var).map(PathBuf::from) {
        if dir.is_absolute() {
            return Some(dir);
        }
    }
    env_var(EnvVars::HOME)
        .filter(|home| !home.is_empty())
        .map(|home| PathBuf::from(home).join(fallback))
}

/// Everything a command needs to know about where and what, resolved from
/// the file, the environment and the flags.
#[derive(Debug, Clone)]
pub struct Settings {
    pub repos: Vec<RepoConfig>,
    pub prefix: PathBuf,
    /// Content-addressed downloads, shared by every prefix.
    pub cache_dir: PathBuf,
    /// Per-repository state that must outlive the cache: stored roots and
    /// the highest version seen (rollback protection).
    pub state_dir: PathBuf,
    pub concurrency: usize,
    pub max_index_age: u64,
    /// Bounds on every read from a mirror.
    pub limits: Limits,
    /// The layout asked for; `auto` decides from the HIP runtime found.
    pub layout: LayoutChoice,
    /// Where to look for the HIP runtime installed libraries would load.
    pub runtime_search: SearchRoots,
    pub config_path: Option<PathBuf>,
    /// How the client reaches mirrors (`--offline`, timeouts, attempts,
    /// the limits above).
    pub network: ClientOptions,
    /// When a stored root index is fetched again.
    pub refresh: Refresh,
    pub trust: Trust,
    /// How GPUs are looked for.
    pub detect: DetectOptions,
    /// Whether to wait for another kpack-get's lock on the prefix.
    pub wait: bool,
}

/// What flags and the environment say, to lay over the file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub repos: Vec<RepoConfig>,
    pub prefix: Option<PathBuf>,
    pub cache_dir: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub concurrency: Option<usize>,
    /// From flags and their environment variables.
    pub limits: LimitSettings,
    pub layout: Option<LayoutChoice>,
    /// Use only what is cached; fetch nothing.
    pub offline: bool,
    pub read_timeout: Option<Duration>,
    pub attempts: Option<u32>,
    pub trust: Trust,
    /// Fail at once when another kpack-get holds the prefix's lock.
    pub no_wait: bool,
    pub detection: DetectionFlags,
}

/// Explicit exceptions to the client-side protections, reported loudly.
#[derive(Debug, Clone, Copy, Default)]
pub struct Trust {
    pub allow_rollback: bool,
    pub allow_expired: bool,
}

/// How old a stored root may be, and whether the network may be used.
#[derive(Debug, Clone, Copy)]
pub struct Refresh {
    pub offline: bool,
    pub max_age: Duration,
}

/// How the flags say GPUs are looked for.
#[derive(Debug, Clone, Default)]
pub struct DetectionFlags {
    pub hsa_library: Option<PathBuf>,
    pub no_hsa: bool,
    pub hsa_timeout: Option<Duration>,
    pub sysfs_root: Option<PathBuf>,
    pub pci_ids: Option<PathBuf>,
}

impl DetectionFlags {
    /// The detection they ask for; the HSA probe is this executable run
    /// again.
    fn options(self) -> DetectOptions {
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("kpack-get"));
        let mut options = DetectOptions::new(exe);
        options.hsa_library = self.hsa_library;
        options.hsa_enabled = !self.no_hsa;
        if let Some(timeout) = self.hsa_timeout {
            options.hsa_timeout = timeout;
        }
        if let Some(root) = self.sysfs_root {
            options.sysfs_root = root;
        }
        if let Some(pci_ids) = self.pci_ids {
            options.pci_ids = vec![pci_ids];
        }
        options
    }
}

impl Settings {
    /// File, then environment (`KPACK_GET_CACHE_DIR`, `KPACK_GET_STATE_DIR`,
    /// `KPACK_GET_PREFIX`), then flags. Repositories given as flags replace
    /// the configured ones.
    pub fn resolve(overrides: Overrides) -> Result<Settings, ConfigError> {
        let env_path = |name: &str| env_var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let explicit = overrides
            .config
            .clone()
            .or_else(|| env_path(EnvVars::KPACK_GET_CONFIG));
        let (file, config_path) = ConfigFile::load(explicit.as_deref())?;
        let limits = overrides.limits.or(file.limits()).resolve()?;
        let repos = if overrides.repos.is_empty() {
            file.repos
        } else {
            overrides.repos
        };
        let cache_dir = match overrides
            .cache_dir
            .or_else(|| env_path(EnvVars::KPACK_GET_CACHE_DIR))
            .or(file.cache_dir)
        {
            Some(dir) => dir,
            None => xdg_dir(EnvVars::XDG_CACHE_HOME, ".cache")
                .ok_or(ConfigError::NoHome)?
                .join("kpack-get"),
        };
        let state_dir = match overrides
            .state_dir
            .or_else(|| env_path(EnvVars::KPACK_GET_STATE_DIR))
            .or(file.state_dir)
        {
            Some(dir) => dir,
            None => xdg_dir(EnvVars::XDG_STATE_HOME, ".local/state")
                .ok_or(ConfigError::NoHome)?
                .join("kpack-get"),
        };
        let prefix = overrides
            .prefix
            .or_else(|| env_path(EnvVars::KPACK_GET_PREFIX))
            .or(file.prefix)
            .unwrap_or_else(|| PathBuf::from("/opt/rocm"));
        let concurrency = overrides
            .concurrency
            .or(file.concurrency)
            .unwrap_or(8)
            .clamp(1, 64);
        let mut network = ClientOptions {
            concurrency,
            offline: overrides.offline,
            limits,
            ..ClientOptions::default()
        };
        if let Some(timeout) = overrides.read_timeout {
            network.read_timeout = timeout;
        }
        if let Some(attempts) = overrides.attempts {
            network.attempts = attempts.max(1);
        }
        let max_index_age = file.max_index_age.unwrap_or(3600);
        Ok(Settings {
            repos,
            prefix,
            cache_dir,
            state_dir,
            concurrency,
            max_index_age,
            limits,
            layout: overrides.layout.or(file.layout).unwrap_or_default(),
            runtime_search: runtime_search(),
            config_path,
            network,
            refresh: Refresh {
                offline: overrides.offline,
                max_age: Duration::from_secs(max_index_age),
            },
            trust: overrides.trust,
            detect: overrides.detection.options(),
            wait: !overrides.no_wait,
        })
    }
}

/// This machine's places to look for a HIP runtime, with the system ones
/// replaced by `KPACK_GET_LD_CACHE` (the loader's cache),
/// `KPACK_GET_DEFAULT_LIBRARY_DIRS` (the loader's default directories,
/// `:`-separated) and `KPACK_GET_DEFAULT_ROCM_PATH` (instead of
/// `/opt/rocm`) when set: a packaged or test environment says where its
/// system is.
fn runtime_search() -> SearchRoots {
    let mut roots = SearchRoots::system();
    let var = |name: &str| env_var(name).filter(|v| !v.is_empty());
    if let Some(cache) = var(EnvVars::KPACK_GET_LD_CACHE) {
        roots.ld_cache = PathBuf::from(cache);
    }
    if let Some(dirs) = var(EnvVars::KPACK_GET_DEFAULT_LIBRARY_DIRS) {
        roots.default_dirs = std::env::split_paths(&dirs).collect();
    }
    if let Some(rocm) = var(EnvVars::KPACK_GET_DEFAULT_ROCM_PATH) {
        roots.rocm_default = PathBuf::from(rocm);
    }
    roots
}

/// The longest duration a setting may name: about 31 years, far past any
/// wait a person means, and well inside what a `Duration` and the clocks
/// it is added to hold.
const MAX_SECONDS: f64 = 1e9;

const NOT_SECONDS: &str = "not a positive number of seconds (at most 1e9)";

/// `seconds` as a duration, when it is a positive number of seconds no
/// larger than [`MAX_SECONDS`]; never a panic, whatever the number.
pub fn duration(seconds: f64) -> Option<Duration> {
    (seconds > 0.0 && seconds <= MAX_SECONDS)
        .then(|| Duration::try_from_secs_f64(seconds).ok())
        .flatten()
}

/// Parses a duration in seconds (`2`, `0.5`) from the command line or the
/// environment, refusing what [`duration`] refuses.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .and_then(duration)
        .ok_or_else(|| NOT_SECONDS.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_repos_and_paths() {
        let text = r#"
            prefix = "/opt/kpack"
            concurrency = 4
            [[repo]]
            name = "rocm"
            mirrors = ["https://a.example/rocm", "file:///srv/rocm"]
            key = "RWQabc"
        "#;
        let config = ConfigFile::parse(Path::new("c.toml"), text).unwrap();
        assert_eq!(config.repos.len(), 1);
        assert_eq!(config.repos[0].mirrors.len(), 2);
        assert_eq!(config.prefix.as_deref(), Some(Path::new("/opt/kpack")));
        assert_eq!(config.concurrency, Some(4));
    }

    #[test]
    fn bounds_on_reads_come_from_flags_over_the_file_over_defaults() {
        let text = "max-index-size = 1000\nmax-wheel-size = 2000\nlow-speed-time = 5\nindex-timeout = 0.5\n";
        let file = ConfigFile::parse(Path::new("c.toml"), text).unwrap();
        let flags = LimitSettings {
            low_speed_time: Some(2.0),
            ..LimitSettings::default()
        };
        let limits = flags.or(file.limits()).resolve().unwrap();
        assert_eq!(limits.index_size, 1000);
        assert_eq!(limits.wheel_size, 2000);
        assert_eq!(limits.low_speed_time, Duration::from_secs(2));
        assert_eq!(limits.index_timeout, Duration::from_millis(500));
        assert_eq!(limits.low_speed_limit, Limits::default().low_speed_limit);
        let zero = ConfigFile::parse(Path::new("c.toml"), "index-timeout = 0\n").unwrap();
        let error = zero.limits().resolve().unwrap_err().to_string();
        assert!(error.contains("index-timeout"), "{error}");
    }

    #[test]
    fn the_layout_comes_from_the_file_and_an_unknown_one_is_refused() {
        let file = ConfigFile::parse(Path::new("c.toml"), "layout = \"fat\"\n").unwrap();
        assert_eq!(file.layout, Some(LayoutChoice::Fat));
        let err = ConfigFile::parse(Path::new("c.toml"), "layout = \"thin\"\n").unwrap_err();
        assert!(err.to_string().contains("c.toml"), "{err}");
        assert_eq!(ConfigFile::default().layout, None);
    }

    #[test]
    fn rejects_unknown_keys_and_repos_without_mirrors() {
        let err = ConfigFile::parse(Path::new("c.toml"), "colour = 1").unwrap_err();
        assert!(err.to_string().contains("c.toml"), "{err}");
        let err = ConfigFile::parse(
            Path::new("c.toml"),
            "[[repo]]\nname = \"r\"\nmirrors = []\nkey = \"k\"\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("no mirrors"), "{err}");
    }

    #[test]
    fn a_mirror_that_is_neither_url_nor_directory_is_refused_where_it_is_written() {
        let err = ConfigFile::parse(
            Path::new("c.toml"),
            "[[repo]]\nname = \"r\"\nmirrors = [\"ftp://m.example/r\"]\nkey = \"k\"\n",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("c.toml") && text.contains("ftp://m.example/r"),
            "{text}"
        );
        let err =
            RepoConfig::from_flag("r=https://a.example/r,ftp://b.example/r", "k").unwrap_err();
        let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(
            chain.contains("\"r\"") && chain.contains("ftp://b.example/r"),
            "{chain}"
        );
    }

    #[test]
    fn repo_flag_takes_an_optional_name() {
        let repo = RepoConfig::from_flag("rocm=http://127.0.0.1:8000/r", "RWQ").unwrap();
        assert_eq!(repo.name, "rocm");
        assert_eq!(
            repo.mirrors,
            [Mirror::http("http://127.0.0.1:8000/r/".into())]
        );
        let repo = RepoConfig::from_flag("http://127.0.0.1:8000/r", "RWQ").unwrap();
        assert_eq!(repo.name, "default");
    }

    #[test]
    fn durations_are_positive_and_bounded_whatever_the_number() {
        assert_eq!(parse_seconds("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_seconds("0.5"), Ok(Duration::from_millis(500)));
        for bad in [
            "0",
            "-1",
            "18446744073709551615",
            "1e300",
            "inf",
            "NaN",
            "",
            "ten",
        ] {
            assert!(parse_seconds(bad).is_err(), "{bad:?}");
        }
        assert_eq!(duration(f64::MAX), None);
        assert_eq!(duration(1e9), Some(Duration::from_secs(1_000_000_000)));
    }
}

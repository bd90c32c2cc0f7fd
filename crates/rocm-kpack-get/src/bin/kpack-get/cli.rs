//! The command line: clap definitions; the doc comments are the help.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kpack_env::EnvVars;
use kpack_repo_index::PackageName;

/// Installs only the GPU device code this machine's AMD GPUs need.
///
/// Exit codes: 0 success; 1 other failure; 2 usage; 3 configuration (no
/// repository configured, bad configuration); 4 network (every mirror
/// failed, or --offline and not cached); 5 verification (signature,
/// rollback, expiry, hash mismatch, modified installed files); 6 nothing
/// fits (unknown package, no version satisfies, no device code for the
/// GPU); 7 the prefix is locked by another kpack-get (--no-wait); 8 the
/// prefix, cache or state directory cannot be written (permission denied,
/// disk full); 9 not every GPU is served (`check`, `pip check`: device
/// code missing or made for other GPUs).
#[derive(Debug, Parser)]
#[command(name = "kpack-get", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// The install root; `.kpack/` lives under it [env: KPACK_GET_PREFIX].
    #[arg(long, global = true, value_name = "DIR")]
    pub prefix: Option<PathBuf>,
    /// A repository to use instead of the configured ones: `[NAME=]URL`,
    /// several mirrors separated by commas (with --key).
    #[arg(long = "repo", global = true, value_name = "URL", requires = "key")]
    pub repos: Vec<String>,
    /// The minisign public key (`RWQ...` or a file) of the --repo
    /// repositories.
    #[arg(long, global = true, value_name = "KEY")]
    pub key: Option<String>,
    /// The configuration file [env: KPACK_GET_CONFIG].
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The download cache [env: KPACK_GET_CACHE_DIR].
    #[arg(long, global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Where repository state (verified roots, versions seen) is kept
    /// [env: KPACK_GET_STATE_DIR].
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// GPU targets to install for instead of detecting them, comma
    /// separated or repeated (`gfx1100,gfx90a:xnack-`); a target without
    /// features (`gfx90a`) gets the code of each mode.
    #[arg(
        long,
        global = true,
        env = EnvVars::KPACK_GET_TARGETS,
        value_delimiter = ',',
        value_parser = given_target
    )]
    pub target: Vec<String>,
    /// Use only what is already fetched; never touch the network.
    #[arg(long, global = true)]
    pub offline: bool,
    /// Machine-readable output on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// Errors only.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Say more: every artifact considered and why.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// No progress bars, even on a terminal.
    #[arg(long, global = true)]
    pub no_progress: bool,
    /// Accept a root index older than one already seen (a rollback).
    #[arg(long, global = true)]
    pub allow_rollback: bool,
    /// Accept a root index past its expiry (a frozen mirror).
    #[arg(long, global = true)]
    pub allow_expired: bool,
    /// Fail at once when another kpack-get holds the prefix's lock.
    #[arg(long, global = true)]
    pub no_wait: bool,
    /// Downloads at once.
    #[arg(long, global = true, value_name = "N")]
    pub concurrency: Option<usize>,
    /// Seconds to wait for the next bytes from a server.
    #[arg(
        long,
        global = true,
        env = EnvVars::KPACK_GET_READ_TIMEOUT,
        value_name = "SECONDS",
        value_parser = rocm_kpack_get::config::parse_seconds
    )]
    pub read_timeout: Option<std::time::Duration>,
    /// The most bytes read of a root index (and of a shard whose root pins
    /// no size) [default: 16777216].
    #[arg(
        long,
        global = true,
        env = EnvVars::KPACK_GET_MAX_INDEX_SIZE,
        value_name = "BYTES"
    )]
    pub max_index_size: Option<u64>,
    /// The most bytes read of a wheel a package index links to without
    /// giving its size [default: 8589934592].
    #[arg(
        long,
        global = true,
        env = EnvVars::KPACK_GET_MAX_WHEEL_SIZE,
        value_name = "BYTES"
    )]
    pub max_wheel_size: Option<u64>,
    /// Fewer bytes per second than this over --low-speed-time fails a
    /// transfer, retried as a timeout is; 0 for no minimum [default: 1024].
    #[arg(
        long,
        global = true,
        env = EnvVars::KPACK_GET_LOW_SPEED_LIMIT,
        value_name = "BYTES"
    )]
    pub low_speed_limit: Option<u64>,
    /// The window the minimum rate is judged over [default: 30].
    #[arg(
        long,
        global = true,
        env = EnvVars::KPACK_GET_LOW_SPEED_TIME,
        value_name = "SECONDS"
    )]
    pub low_speed_time: Option<f64>,
    /// The longest the root index, its signature or a shard may take to
    /// arrive, per attempt [default: 120].
    #[arg(
        long,
        global = true,
        env = EnvVars::KPACK_GET_INDEX_TIMEOUT,
        value_name = "SECONDS"
    )]
    pub index_timeout: Option<f64>,
    /// Attempts per mirror before trying the next.
    #[arg(long, global = true, env = EnvVars::KPACK_GET_ATTEMPTS, value_name = "N")]
    pub attempts: Option<u32>,
    /// The KFD topology to read GPUs from.
    #[arg(
        long,
        global = true,
        env = EnvVars::KPACK_GET_SYSFS_ROOT,
        value_name = "DIR",
        hide = true
    )]
    pub sysfs_root: Option<PathBuf>,
    /// The PCI id database naming GPUs found in the KFD topology (else
    /// /usr/share/misc/pci.ids or /usr/share/hwdata/pci.ids).
    #[arg(
        long,
        global = true,
        env = EnvVars::KPACK_GET_PCI_IDS,
        value_name = "FILE",
        hide = true
    )]
    pub pci_ids: Option<PathBuf>,
    /// The HSA runtime library to load instead of searching for it.
    #[arg(
        long,
        global = true,
        env = EnvVars::KPACK_GET_HSA_LIBRARY,
        value_name = "FILE"
    )]
    pub hsa_library: Option<PathBuf>,
    /// How installed device code is laid out: `kpack` (split binaries and
    /// .kpack archives, for a kpack-aware HIP runtime), `fat` (binaries made
    /// fat again, for any runtime), or `auto` (from the HIP runtime found)
    /// [default: auto].
    #[arg(
        long,
        global = true,
        env = EnvVars::KPACK_GET_LAYOUT,
        value_name = "LAYOUT",
        value_enum
    )]
    pub layout: Option<LayoutArg>,
    /// Do not ask the HSA runtime (sysfs only).
    #[arg(long, global = true)]
    pub no_hsa: bool,
    /// Seconds the HSA probe may take.
    #[arg(
        long,
        global = true,
        env = EnvVars::KPACK_GET_HSA_TIMEOUT,
        value_name = "SECONDS",
        value_parser = rocm_kpack_get::config::parse_seconds
    )]
    pub hsa_timeout: Option<std::time::Duration>,
}

/// `--layout`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    Auto,
    Kpack,
    Fat,
}

impl From<LayoutArg> for rocm_kpack_get::layout::LayoutChoice {
    fn from(arg: LayoutArg) -> Self {
        match arg {
            LayoutArg::Auto => Self::Auto,
            LayoutArg::Kpack => Self::Kpack,
            LayoutArg::Fat => Self::Fat,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the GPUs found, their targets, and what they would select.
    Detect,
    /// Fetch and verify the configured repositories' root indexes.
    Update,
    /// Search package names and summaries.
    Search { text: String },
    /// Show a package's versions and artifacts, and which would be chosen.
    #[command(alias = "show")]
    Info {
        /// `NAME` or `NAME@VERSION`.
        package: String,
    },
    /// Resolve, download, verify and install packages.
    Install {
        /// `NAME` or `NAME@REQUIREMENT` (`rocm-rand@5.3`, `rocm-rand@>=5`;
        /// pip's `rocm-rand==5.3.3` is read as `rocm-rand@=5.3.3`).
        #[arg(required = true)]
        packages: Vec<String>,
        /// Show the plan: each artifact, its size, the total download.
        #[arg(long)]
        dry_run: bool,
        /// Install the packages named again even when they are installed
        /// as an install would install them: files deleted or changed in
        /// the prefix are written anew.
        #[arg(long)]
        reinstall: bool,
    },
    /// Remove installed packages and their files.
    #[command(alias = "uninstall")]
    Remove {
        #[arg(required = true, value_parser = package_name)]
        packages: Vec<PackageName>,
        #[arg(long)]
        dry_run: bool,
    },
    /// List installed packages.
    List,
    /// Install newer versions of installed packages (all, or those named)
    ///
    /// A package the repositories offer only older versions of is kept.
    Upgrade {
        #[arg(value_parser = package_name)]
        packages: Vec<PackageName>,
        #[arg(long)]
        dry_run: bool,
        /// Install the highest version the repositories offer even when it
        /// is older than the installed one (a version withdrawn upstream).
        #[arg(long)]
        allow_downgrade: bool,
    },
    /// Re-hash installed files against the install record.
    Verify,
    /// Check that every GPU's device code is installed
    ///
    /// Each split and fat binary as its runtime loads it, and the packages'
    /// device code and database payloads against what an install for the
    /// GPUs would choose. Names each binary and GPU that would fail, why,
    /// and the command that fixes it; exits 9 when a GPU is not served.
    Check,
    /// Manage the download cache.
    Cache {
        #[command(subcommand)]
        command: CacheCommand,
    },
    /// Python environments: the device wheels this machine's GPUs need
    ///
    /// The device extras and wheel variants this machine's GPUs need,
    /// installed with the environment's pip or uv.
    Pip {
        #[command(subcommand)]
        command: PipCommand,
    },
    /// Runs the HSA probe in this process and prints its result (used by
    /// `detect` in a child process).
    #[command(hide = true)]
    HsaProbe {
        #[arg(long)]
        library: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum PipCommand {
    /// Print each requirement with the device extras this machine needs
    ///
    /// `torch[device-gfx1100]`, learning each candidate's extras from pip's
    /// resolver. Installer arguments go after `--`.
    Resolve {
        /// Requirements as pip takes them (`torch`, `torch>=2.7`, a wheel file).
        #[arg(required = true)]
        requirements: Vec<String>,
        #[command(flatten)]
        options: PipOptions,
        /// Arguments for the resolver (`--no-index --find-links DIR`).
        #[arg(last = true, value_name = "INSTALLER ARGS")]
        installer_args: Vec<String>,
    },
    /// Download requirements and the device wheels some GPUs need
    ///
    /// The host wheels and exactly the device wheels the GPUs given with
    /// --target (a fleet's union; this machine's by default) need, with
    /// the hashes the index gives, into a directory `pip install
    /// --no-index --find-links DIR` installs from. Index arguments go
    /// after `--`.
    Download {
        /// Where the wheels go.
        #[arg(short = 'd', long = "dest", value_name = "DIR")]
        dest: PathBuf,
        /// Requirements as pip takes them (`torch`, `torch>=2.7`).
        #[arg(required = true)]
        requirements: Vec<String>,
        #[command(flatten)]
        options: PipOptions,
        /// Arguments for pip (`--index-url URL`, `--find-links DIR`).
        #[arg(last = true, value_name = "INSTALLER ARGS")]
        installer_args: Vec<String>,
    },
    /// Install requirements and the device wheels this machine needs
    ///
    /// The installer installs the requirements (the best variant wheel for
    /// this machine where find-links directories hold variants), then the
    /// device distributions they offer for its GPUs are installed, as
    /// `sync` does. Installer arguments go after `--`.
    Install {
        /// Requirements as pip takes them.
        #[arg(required = true)]
        requirements: Vec<String>,
        #[command(flatten)]
        options: PipOptions,
        /// Show what would be installed; install nothing.
        #[arg(long)]
        dry_run: bool,
        /// Arguments for the installer (`--no-index --find-links DIR`).
        #[arg(last = true, value_name = "INSTALLER ARGS")]
        installer_args: Vec<String>,
    },
    /// Install the device wheels missing for what is installed
    ///
    /// The device distributions this machine needs that are missing for
    /// what is installed: run after any `pip install` or `uv pip install`.
    /// A second run installs nothing.
    Sync {
        #[command(flatten)]
        options: PipOptions,
        /// Show what would be installed; install nothing.
        #[arg(long)]
        dry_run: bool,
        /// Also uninstall the device distributions no GPU here (or given
        /// with --target) needs, and take an every-GPU index's demand for
        /// all of them out of the entry distributions' METADATA.
        #[arg(long)]
        prune: bool,
        /// Arguments for the installer (`--no-index --find-links DIR`).
        #[arg(last = true, value_name = "INSTALLER ARGS")]
        installer_args: Vec<String>,
    },
    /// Print this machine's supported variant properties as JSON
    ///
    /// Most preferred first (`amd :: gfx_arch :: gfx1100`).
    VariantProperties,
    /// Check that the environment's device code serves every GPU
    ///
    /// Each distribution offering device extras has the device
    /// distributions of the extra chosen for it, and each of its split
    /// binaries loads as installed. Names what would fail, why, and the
    /// command that fixes it; exits 9 when a GPU is not served.
    Check {
        #[command(flatten)]
        options: PipOptions,
    },
}

#[derive(Debug, Args)]
pub struct PipOptions {
    /// The environment's interpreter (default: `$VIRTUAL_ENV/bin/python`,
    /// else `python3`).
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
    /// Device code for every GPU target (`device-all`) instead of this
    /// machine's.
    #[arg(long)]
    pub all_targets: bool,
}

#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Empty the download cache.
    Clean,
}

/// A `--target` as typed, checked and case-folded where it is parsed: a
/// name that is no AMD GPU target is a usage error.
fn given_target(text: &str) -> Result<String, kpack_gpu::target::ParseTargetError> {
    // An empty item (`KPACK_GET_TARGETS=`, `gfx1100,`) names nothing; the
    // choice of targets leaves it out.
    if text.trim().is_empty() {
        return Ok(String::new());
    }
    kpack_gpu::Target::parse_given(text).map(|target| target.to_string())
}

/// A package name as typed: case folded, as pip folds it.
fn package_name(text: &str) -> Result<PackageName, kpack_repo_index::types::InvalidValue> {
    text.trim().to_ascii_lowercase().parse()
}

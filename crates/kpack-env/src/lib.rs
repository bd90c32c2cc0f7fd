//! Every environment variable the kpack binaries and the runtime read,
//! declared once (as uv's `EnvVars`): a name is spelled here and nowhere
//! else, so the list is the documentation of what the environment can
//! change. Each binary reads them in one place (its settings); the
//! runtime reads its own in `LoaderConfig`.
#![forbid(unsafe_code)]

/// The names of the environment variables the tools read.
#[derive(Debug)]
pub struct EnvVars;

impl EnvVars {
    // kpack-get: settings that override the configuration file.
    /// The configuration file to read.
    pub const KPACK_GET_CONFIG: &'static str = "KPACK_GET_CONFIG";
    /// The prefix to install into.
    pub const KPACK_GET_PREFIX: &'static str = "KPACK_GET_PREFIX";
    /// The download cache.
    pub const KPACK_GET_CACHE_DIR: &'static str = "KPACK_GET_CACHE_DIR";
    /// Repository state (stored roots, versions seen).
    pub const KPACK_GET_STATE_DIR: &'static str = "KPACK_GET_STATE_DIR";
    /// GPU targets to install for instead of the detected ones.
    pub const KPACK_GET_TARGETS: &'static str = "KPACK_GET_TARGETS";
    /// Longest wait for the next bytes of a response.
    pub const KPACK_GET_READ_TIMEOUT: &'static str = "KPACK_GET_READ_TIMEOUT";
    /// Cap on an index file nothing signed pins.
    pub const KPACK_GET_MAX_INDEX_SIZE: &'static str = "KPACK_GET_MAX_INDEX_SIZE";
    /// Cap on a variant wheel.
    pub const KPACK_GET_MAX_WHEEL_SIZE: &'static str = "KPACK_GET_MAX_WHEEL_SIZE";
    /// The minimum transfer rate, in bytes a second.
    pub const KPACK_GET_LOW_SPEED_LIMIT: &'static str = "KPACK_GET_LOW_SPEED_LIMIT";
    /// The window the minimum rate is judged over.
    pub const KPACK_GET_LOW_SPEED_TIME: &'static str = "KPACK_GET_LOW_SPEED_TIME";
    /// Deadline of a small index file.
    pub const KPACK_GET_INDEX_TIMEOUT: &'static str = "KPACK_GET_INDEX_TIMEOUT";
    /// Attempts per mirror.
    pub const KPACK_GET_ATTEMPTS: &'static str = "KPACK_GET_ATTEMPTS";
    /// Where sysfs is, for detection.
    pub const KPACK_GET_SYSFS_ROOT: &'static str = "KPACK_GET_SYSFS_ROOT";
    /// The PCI id database.
    pub const KPACK_GET_PCI_IDS: &'static str = "KPACK_GET_PCI_IDS";
    /// The HSA runtime library to probe.
    pub const KPACK_GET_HSA_LIBRARY: &'static str = "KPACK_GET_HSA_LIBRARY";
    /// How long the HSA probe may take.
    pub const KPACK_GET_HSA_TIMEOUT: &'static str = "KPACK_GET_HSA_TIMEOUT";
    /// The prefix's layout.
    pub const KPACK_GET_LAYOUT: &'static str = "KPACK_GET_LAYOUT";
    /// The loader's cache, instead of `/etc/ld.so.cache`.
    pub const KPACK_GET_LD_CACHE: &'static str = "KPACK_GET_LD_CACHE";
    /// The loader's default directories, `:`-separated.
    pub const KPACK_GET_DEFAULT_LIBRARY_DIRS: &'static str = "KPACK_GET_DEFAULT_LIBRARY_DIRS";
    /// Instead of `/opt/rocm`.
    pub const KPACK_GET_DEFAULT_ROCM_PATH: &'static str = "KPACK_GET_DEFAULT_ROCM_PATH";

    // kpack-get: ROCm's bootstrap switches, honoured as its bootstrap does.
    /// GPU targets to use instead of detecting them.
    pub const ROCM_BOOTSTRAP_FORCE_GFX_ARCH: &'static str = "ROCM_BOOTSTRAP_FORCE_GFX_ARCH";
    /// Turns GPU detection off.
    pub const ROCM_BOOTSTRAP_DISABLE_DETECTION: &'static str = "ROCM_BOOTSTRAP_DISABLE_DETECTION";

    // kpack-pack.
    /// Unlocks an encrypted signing key.
    pub const KPACK_SIGN_PASSWORD: &'static str = "KPACK_SIGN_PASSWORD";
    /// Reproducible builds' timestamp for files written into wheels.
    pub const SOURCE_DATE_EPOCH: &'static str = "SOURCE_DATE_EPOCH";

    // kpack-repo.
    /// Unlocks an encrypted repository key.
    pub const KPACK_REPO_PASSWORD: &'static str = "KPACK_REPO_PASSWORD";
    /// Cap on an index file nothing signed pins.
    pub const KPACK_REPO_MAX_INDEX_SIZE: &'static str = "KPACK_REPO_MAX_INDEX_SIZE";
    /// The minimum transfer rate, in bytes a second.
    pub const KPACK_REPO_LOW_SPEED_LIMIT: &'static str = "KPACK_REPO_LOW_SPEED_LIMIT";
    /// The window the minimum rate is judged over.
    pub const KPACK_REPO_LOW_SPEED_TIME: &'static str = "KPACK_REPO_LOW_SPEED_TIME";
    /// Deadline of a small index file.
    pub const KPACK_REPO_INDEX_TIMEOUT: &'static str = "KPACK_REPO_INDEX_TIMEOUT";
    /// The S3 API endpoint, when `--endpoint` is not given.
    pub const AWS_ENDPOINT_URL: &'static str = "AWS_ENDPOINT_URL";
    /// The bucket's region.
    pub const AWS_REGION: &'static str = "AWS_REGION";
    /// The bucket's region, when `AWS_REGION` is not set.
    pub const AWS_DEFAULT_REGION: &'static str = "AWS_DEFAULT_REGION";

    // The runtime (`librocm_kpack`), read by its loader.
    /// When set and non-empty, the only archives tried.
    pub const ROCM_KPACK_PATH: &'static str = "ROCM_KPACK_PATH";
    /// Archives tried before the marker's paths.
    pub const ROCM_KPACK_PATH_PREFIX: &'static str = "ROCM_KPACK_PATH_PREFIX";
    /// Turns the loader off.
    pub const ROCM_KPACK_DISABLE: &'static str = "ROCM_KPACK_DISABLE";
    /// Debug lines on stderr.
    pub const ROCM_KPACK_DEBUG: &'static str = "ROCM_KPACK_DEBUG";

    // The system's, read as other tools read them.
    pub const HOME: &'static str = "HOME";
    pub const PATH: &'static str = "PATH";
    pub const XDG_CONFIG_HOME: &'static str = "XDG_CONFIG_HOME";
    pub const XDG_CACHE_HOME: &'static str = "XDG_CACHE_HOME";
    pub const XDG_STATE_HOME: &'static str = "XDG_STATE_HOME";
    /// Where the dynamic loader looks first.
    pub const LD_LIBRARY_PATH: &'static str = "LD_LIBRARY_PATH";
    /// ROCm's installation, as ROCm's tools take it.
    pub const ROCM_PATH: &'static str = "ROCM_PATH";
    /// The HSA runtime's XNACK switch.
    pub const HSA_XNACK: &'static str = "HSA_XNACK";
    /// The HSA runtime's target override (and `_<node>` per GPU).
    pub const HSA_OVERRIDE_GFX_VERSION: &'static str = "HSA_OVERRIDE_GFX_VERSION";
    /// The HSA runtime's switch for the name gfx1250 A0 silicon reports
    /// (`gfx1250` or `gfx1250-strict`).
    pub const HSA_DISABLE_GFX12_STRICT: &'static str = "HSA_DISABLE_GFX12_STRICT";
    /// The GPUs the HSA runtime shows programs (by index or UUID).
    pub const ROCR_VISIBLE_DEVICES: &'static str = "ROCR_VISIBLE_DEVICES";
    /// The GPUs HIP shows programs, among those HSA shows.
    pub const HIP_VISIBLE_DEVICES: &'static str = "HIP_VISIBLE_DEVICES";
    /// Read by HIP as `HIP_VISIBLE_DEVICES` when that is unset.
    pub const CUDA_VISIBLE_DEVICES: &'static str = "CUDA_VISIBLE_DEVICES";
    /// The active Python virtual environment.
    pub const VIRTUAL_ENV: &'static str = "VIRTUAL_ENV";
    /// The uv binary running this one, as uv sets it.
    pub const UV: &'static str = "UV";
}

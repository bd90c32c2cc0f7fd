//! GPUs as the HSA runtime reports them.
//!
//! `libhsa-runtime64.so.1` is loaded with `dlopen` and asked for its GPU
//! agents and their ISA names, which carry the live `xnack`/`sramecc` modes.
//! HSA initialisation can hang or take long and leaves threads and state
//! behind, so the installer does not do it itself: [`probe`] re-invokes the
//! installer's executable as a child (`kpack-get hsa-probe`), which runs
//! [`probe_main`] and answers with one JSON document on stdout; the parent
//! kills it when it takes longer than the timeout.

use std::ffi::{c_char, c_void, CStr};
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use libloading::Library;
use serde::{Deserialize, Serialize};

/// The file name of the HSA runtime, as the dynamic loader finds it.
pub(crate) const LIBRARY_NAME: &str = "libhsa-runtime64.so.1";

/// The directory searched last for [`LIBRARY_NAME`].
pub(crate) const DEFAULT_ROCM_LIBRARY_DIR: &str = "/opt/rocm/lib";

/// The hidden subcommand of the executable given to [`probe`].
pub(crate) const PROBE_SUBCOMMAND: &str = "hsa-probe";

/// The version of the report the child writes; bumped when its shape changes.
const REPORT_VERSION: u32 = 1;

/// At most this much of the child's stdout is read.
const OUTPUT_LIMIT: u64 = 4 << 20;

/// How often the parent looks whether the child has ended.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Longer ISA names than this are taken as a broken runtime.
const ISA_NAME_LIMIT: u32 = 4096;

/// A GPU agent as HSA reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HsaAgent {
    /// The GPU's position among HSA's GPU agents (CPU agents are not
    /// counted), the numbering `ROCR_VISIBLE_DEVICES` uses.
    pub index: u32,
    /// The agent name (`gfx90a`).
    pub name: String,
    /// The AMD product name (`AMD Instinct MI210`), when HSA reports one.
    pub product: Option<String>,
    /// The first ISA name that is not a `-generic` one, as reported
    /// (`amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`); the agent name when
    /// the agent lists no other ISA.
    pub isa: String,
}

/// Why HSA gave no answer.
///
/// The variants the child can report cross the process boundary as JSON;
/// the ones only the parent can see are not serialised.
#[derive(Debug, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HsaError {
    /// No HSA runtime where it was looked for.
    #[error("{LIBRARY_NAME} not found (searched {})", join_paths(.searched))]
    NotFound {
        /// The names and paths tried, in order.
        searched: Vec<PathBuf>,
    },
    /// The runtime exists but `dlopen` refused it.
    #[error("cannot load {}: {message}", .path.display())]
    Open {
        /// The library as it was given to `dlopen`.
        path: PathBuf,
        /// What `dlerror` said.
        message: String,
    },
    /// The runtime lacks a function the probe needs.
    #[error("{} has no {symbol}: {message}", .path.display())]
    MissingSymbol {
        /// The loaded library.
        path: PathBuf,
        /// The missing function.
        symbol: String,
        /// What `dlerror` said.
        message: String,
    },
    /// `hsa_init` failed.
    #[error("hsa_init failed: {}{}", describe_status(*.status, .text.as_deref()), init_hint(*.status))]
    InitFailed {
        /// The `hsa_status_t` returned.
        status: u32,
        /// What `hsa_status_string` says about it.
        text: Option<String>,
    },
    /// An HSA call other than `hsa_init` failed.
    #[error("{function} failed: {}", describe_status(*.status, .text.as_deref()))]
    CallFailed {
        /// The failing function.
        function: String,
        /// The `hsa_status_t` returned.
        status: u32,
        /// What `hsa_status_string` says about it.
        text: Option<String>,
    },
    /// An HSA call succeeded but returned nonsense.
    #[error("{function} returned {detail}")]
    Malformed {
        /// The function.
        function: String,
        /// What was wrong with its answer.
        detail: String,
    },
    /// The probe executable could not be started.
    #[serde(skip)]
    #[error("cannot start the HSA probe {}", .exe.display())]
    Spawn {
        /// The executable.
        exe: PathBuf,
        /// Why it did not start.
        #[source]
        source: std::io::Error,
    },
    /// Waiting for the probe failed.
    #[serde(skip)]
    #[error("cannot wait for the HSA probe {}", .exe.display())]
    Wait {
        /// The executable.
        exe: PathBuf,
        /// Why waiting failed.
        #[source]
        source: std::io::Error,
    },
    /// The probe took longer than allowed and was killed.
    #[serde(skip)]
    #[error("the HSA probe did not answer within {} s and was killed (HSA initialisation hung)", .timeout.as_secs_f64())]
    TimedOut {
        /// The time it was given.
        timeout: Duration,
    },
    /// The probe ended without an answer (crashed, or does not know the
    /// subcommand).
    #[serde(skip)]
    #[error("the HSA probe {} ended with {status} without an answer", .exe.display())]
    ProbeExited {
        /// The executable.
        exe: PathBuf,
        /// How it ended.
        status: ExitStatus,
    },
    /// The probe's answer is not a report this version understands.
    #[serde(skip)]
    #[error("the HSA probe {} wrote an unreadable answer", .exe.display())]
    Garbled {
        /// The executable.
        exe: PathBuf,
        /// Why the answer could not be read.
        #[source]
        source: serde_json::Error,
    },
    /// The probe's answer has a newer format.
    #[serde(skip)]
    #[error("the HSA probe {} answered in report version {version}, expected {REPORT_VERSION}", .exe.display())]
    ReportVersion {
        /// The executable.
        exe: PathBuf,
        /// The version it wrote.
        version: u32,
    },
}

fn join_paths(paths: &[PathBuf]) -> String {
    let mut out = String::new();
    for (i, path) in paths.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}", path.display());
    }
    out
}

fn describe_status(status: u32, text: Option<&str>) -> String {
    match text {
        Some(text) => format!("{status:#x} ({text})"),
        None => format!("{status:#x}"),
    }
}

/// `hsa_init` says OUT_OF_RESOURCES when it cannot open `/dev/kfd`.
fn init_hint(status: u32) -> &'static str {
    if status == HSA_STATUS_ERROR_OUT_OF_RESOURCES {
        "; the amdgpu driver is not loaded or /dev/kfd is not accessible to this user"
    } else {
        ""
    }
}

/// What the child writes to stdout.
#[derive(Debug, Serialize, Deserialize)]
struct ProbeReport {
    version: u32,
    #[serde(default)]
    agents: Vec<HsaAgent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<HsaError>,
}

// The C interface, as in hsa.h and hsa_ext_amd.h.

type Status = u32;
const HSA_STATUS_SUCCESS: Status = 0;
const HSA_STATUS_INFO_BREAK: Status = 1;
const HSA_STATUS_ERROR: Status = 0x1000;
pub(crate) const HSA_STATUS_ERROR_OUT_OF_RESOURCES: Status = 0x1008;

const HSA_AGENT_INFO_NAME: u32 = 0;
const HSA_AGENT_INFO_DEVICE: u32 = 17;
const HSA_AMD_AGENT_INFO_PRODUCT_NAME: u32 = 0xA009;
const HSA_DEVICE_TYPE_GPU: u32 = 1;
const HSA_ISA_INFO_NAME_LENGTH: u32 = 0;
const HSA_ISA_INFO_NAME: u32 = 1;

/// HSA writes at most 64 bytes for name attributes; the buffer is larger
/// so that a runtime writing more does no harm.
const NAME_BUFFER: usize = 256;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct AgentHandle {
    handle: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct IsaHandle {
    handle: u64,
}

type AgentCallback = unsafe extern "C" fn(AgentHandle, *mut c_void) -> Status;
type IsaCallback = unsafe extern "C" fn(IsaHandle, *mut c_void) -> Status;

/// The HSA functions the probe calls.
#[derive(Debug, Clone, Copy)]
struct Api {
    init: unsafe extern "C" fn() -> Status,
    shut_down: unsafe extern "C" fn() -> Status,
    iterate_agents: unsafe extern "C" fn(AgentCallback, *mut c_void) -> Status,
    agent_get_info: unsafe extern "C" fn(AgentHandle, u32, *mut c_void) -> Status,
    agent_iterate_isas: unsafe extern "C" fn(AgentHandle, IsaCallback, *mut c_void) -> Status,
    isa_get_info_alt: unsafe extern "C" fn(IsaHandle, u32, *mut c_void) -> Status,
    status_string: unsafe extern "C" fn(Status, *mut *const c_char) -> Status,
}

impl Api {
    /// Resolves the functions in a loaded runtime.
    fn resolve(library: &'static Library, path: &Path) -> Result<Api, HsaError> {
        fn symbol<T: Copy>(
            library: &'static Library,
            path: &Path,
            name: &str,
        ) -> Result<T, HsaError> {
            let mut c_name = Vec::with_capacity(name.len() + 1);
            c_name.extend_from_slice(name.as_bytes());
            c_name.push(0);
            // SAFETY: every call site names an HSA function whose C
            // signature is the type `T` it asks for (hsa.h).
            match unsafe { library.get::<T>(&c_name) } {
                Ok(symbol) => Ok(*symbol),
                Err(error) => Err(HsaError::MissingSymbol {
                    path: path.to_owned(),
                    symbol: name.to_owned(),
                    message: error.to_string(),
                }),
            }
        }
        Ok(Api {
            init: symbol(library, path, "hsa_init")?,
            shut_down: symbol(library, path, "hsa_shut_down")?,
            iterate_agents: symbol(library, path, "hsa_iterate_agents")?,
            agent_get_info: symbol(library, path, "hsa_agent_get_info")?,
            agent_iterate_isas: symbol(library, path, "hsa_agent_iterate_isas")?,
            isa_get_info_alt: symbol(library, path, "hsa_isa_get_info_alt")?,
            status_string: symbol(library, path, "hsa_status_string")?,
        })
    }

    /// The runtime's description of a status, if it has one.
    fn status_text(&self, status: Status) -> Option<String> {
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: hsa_status_string writes a pointer to a static string.
        let result = unsafe { (self.status_string)(status, &mut text) };
        if result != HSA_STATUS_SUCCESS || text.is_null() {
            return None;
        }
        // SAFETY: on success the pointer is a NUL-terminated static string.
        let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_owned())
    }

    fn call_failed(&self, function: &str, status: Status) -> HsaError {
        HsaError::CallFailed {
            function: function.to_owned(),
            status,
            text: self.status_text(status),
        }
    }

    /// A string attribute of an agent (char[64] in HSA).
    fn agent_string(&self, agent: AgentHandle, attribute: u32) -> Result<String, Status> {
        let mut buffer = [0u8; NAME_BUFFER];
        // SAFETY: the buffer is larger than the 64 bytes HSA writes.
        let status = unsafe { (self.agent_get_info)(agent, attribute, buffer.as_mut_ptr().cast()) };
        if status != HSA_STATUS_SUCCESS {
            return Err(status);
        }
        Ok(c_string(&buffer))
    }

    fn agent_device_type(&self, agent: AgentHandle) -> Result<u32, HsaError> {
        // hsa_device_type_t is a C enum, 4 bytes at the start of the buffer;
        // 8 are given for safety.
        let mut device = [0u8; 8];
        // SAFETY: the attribute's value is an enum no larger than `device`.
        let status = unsafe {
            (self.agent_get_info)(agent, HSA_AGENT_INFO_DEVICE, device.as_mut_ptr().cast())
        };
        if status != HSA_STATUS_SUCCESS {
            return Err(self.call_failed("hsa_agent_get_info(HSA_AGENT_INFO_DEVICE)", status));
        }
        Ok(u32::from_ne_bytes([
            device[0], device[1], device[2], device[3],
        ]))
    }

    fn isa_name(&self, isa: IsaHandle) -> Result<String, HsaError> {
        let mut length: u32 = 0;
        // SAFETY: NAME_LENGTH writes a uint32_t.
        let status = unsafe {
            (self.isa_get_info_alt)(
                isa,
                HSA_ISA_INFO_NAME_LENGTH,
                (&mut length as *mut u32).cast(),
            )
        };
        if status != HSA_STATUS_SUCCESS {
            return Err(self.call_failed("hsa_isa_get_info_alt(HSA_ISA_INFO_NAME_LENGTH)", status));
        }
        if length > ISA_NAME_LIMIT {
            return Err(HsaError::Malformed {
                function: "hsa_isa_get_info_alt(HSA_ISA_INFO_NAME_LENGTH)".to_owned(),
                detail: format!("an ISA name length of {length} bytes"),
            });
        }
        // One more byte than announced, in case the length leaves out the NUL.
        let mut buffer = vec![0u8; length as usize + 1];
        // SAFETY: NAME writes at most NAME_LENGTH bytes.
        let status =
            unsafe { (self.isa_get_info_alt)(isa, HSA_ISA_INFO_NAME, buffer.as_mut_ptr().cast()) };
        if status != HSA_STATUS_SUCCESS {
            return Err(self.call_failed("hsa_isa_get_info_alt(HSA_ISA_INFO_NAME)", status));
        }
        Ok(c_string(&buffer))
    }
}

/// The text before the first NUL (or all of it).
fn c_string(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).trim().to_owned()
}

/// Whether an ISA name names a generic target
/// (`amdgcn-amd-amdhsa--gfx9-4-generic:sramecc+:xnack-`).
fn is_generic_isa(name: &str) -> bool {
    let processor = name.split(':').next().unwrap_or_default();
    processor.ends_with("-generic")
}

/// State of the walk over agents, shared with the callbacks.
struct AgentWalk {
    api: Api,
    agents: Vec<HsaAgent>,
    error: Option<HsaError>,
}

impl AgentWalk {
    fn visit(&mut self, agent: AgentHandle) -> Result<(), HsaError> {
        if self.api.agent_device_type(agent)? != HSA_DEVICE_TYPE_GPU {
            return Ok(());
        }
        let name = self
            .api
            .agent_string(agent, HSA_AGENT_INFO_NAME)
            .map_err(|status| {
                self.api
                    .call_failed("hsa_agent_get_info(HSA_AGENT_INFO_NAME)", status)
            })?;
        // Runtimes without the AMD extension attribute answer with an error;
        // the product name is optional.
        let product = self
            .api
            .agent_string(agent, HSA_AMD_AGENT_INFO_PRODUCT_NAME)
            .ok()
            .filter(|product| !product.is_empty());
        let mut isas = IsaWalk {
            api: self.api,
            isa: None,
            error: None,
        };
        // SAFETY: the callback matches hsa_agent_iterate_isas' type and
        // `isas` outlives the call.
        let status = unsafe {
            (self.api.agent_iterate_isas)(agent, on_isa, (&mut isas as *mut IsaWalk).cast())
        };
        if let Some(error) = isas.error {
            return Err(error);
        }
        if status != HSA_STATUS_SUCCESS && status != HSA_STATUS_INFO_BREAK {
            return Err(self.api.call_failed("hsa_agent_iterate_isas", status));
        }
        let index = u32::try_from(self.agents.len()).unwrap_or(u32::MAX);
        self.agents.push(HsaAgent {
            index,
            isa: isas.isa.unwrap_or_else(|| name.clone()),
            name,
            product,
        });
        Ok(())
    }
}

/// State of the walk over one agent's ISAs.
struct IsaWalk {
    api: Api,
    isa: Option<String>,
    error: Option<HsaError>,
}

unsafe extern "C" fn on_agent(agent: AgentHandle, data: *mut c_void) -> Status {
    // SAFETY: `data` is the `AgentWalk` given to hsa_iterate_agents, alive
    // and not otherwise borrowed during the call.
    let walk = unsafe { &mut *data.cast::<AgentWalk>() };
    match walk.visit(agent) {
        Ok(()) => HSA_STATUS_SUCCESS,
        Err(error) => {
            walk.error = Some(error);
            HSA_STATUS_ERROR
        }
    }
}

unsafe extern "C" fn on_isa(isa: IsaHandle, data: *mut c_void) -> Status {
    // SAFETY: `data` is the `IsaWalk` given to hsa_agent_iterate_isas, alive
    // and not otherwise borrowed during the call.
    let walk = unsafe { &mut *data.cast::<IsaWalk>() };
    match walk.api.isa_name(isa) {
        Ok(name) if is_generic_isa(&name) || name.is_empty() => HSA_STATUS_SUCCESS,
        Ok(name) => {
            walk.isa = Some(name);
            HSA_STATUS_INFO_BREAK
        }
        Err(error) => {
            walk.error = Some(error);
            HSA_STATUS_ERROR
        }
    }
}

/// Loads the runtime, never to be unloaded (HSA does not survive `dlclose`).
fn load(library: Option<&Path>) -> Result<(&'static Library, PathBuf), HsaError> {
    fn open(path: &Path) -> Result<&'static Library, HsaError> {
        // SAFETY: loading runs the runtime's initialisers; that is the
        // point of the probe, which runs in its own process.
        match unsafe { Library::new(path) } {
            Ok(library) => Ok(Box::leak(Box::new(library))),
            Err(error) => Err(HsaError::Open {
                path: path.to_owned(),
                message: error.to_string(),
            }),
        }
    }

    if let Some(path) = library {
        return Ok((open(path)?, path.to_owned()));
    }

    // The dynamic loader's search path first.
    let bare = Path::new(LIBRARY_NAME);
    match open(bare) {
        Ok(library) => return Ok((library, bare.to_owned())),
        Err(HsaError::Open { message, .. })
            if message.starts_with(&format!("{LIBRARY_NAME}: cannot open shared object file")) => {}
        Err(error) => return Err(error),
    }
    let mut searched = vec![bare.to_owned()];
    let rocm_path = std::env::var_os(kpack_env::EnvVars::ROCM_PATH).filter(|path| !path.is_empty());
    let directories = rocm_path
        .map(|root| PathBuf::from(root).join("lib"))
        .into_iter()
        .chain([PathBuf::from(DEFAULT_ROCM_LIBRARY_DIR)]);
    for directory in directories {
        let path = directory.join(LIBRARY_NAME);
        if path.exists() {
            return Ok((open(&path)?, path));
        }
        searched.push(path);
    }
    Err(HsaError::NotFound { searched })
}

/// Asks HSA for its GPU agents, in this process.
///
/// Loads the runtime (never unloading it), initialises it, walks the agents
/// keeping the GPUs, and shuts it down. Meant for the probe child: a
/// runtime that hangs hangs the caller.
pub fn probe_in_process(library: Option<&Path>) -> Result<Vec<HsaAgent>, HsaError> {
    let (library, path) = load(library)?;
    let api = Api::resolve(library, &path)?;
    // SAFETY: hsa_init takes no arguments.
    let status = unsafe { (api.init)() };
    if status != HSA_STATUS_SUCCESS {
        return Err(HsaError::InitFailed {
            status,
            text: api.status_text(status),
        });
    }
    let mut walk = AgentWalk {
        api,
        agents: Vec::new(),
        error: None,
    };
    // SAFETY: the callback matches hsa_iterate_agents' type and `walk`
    // outlives the call.
    let status = unsafe { (api.iterate_agents)(on_agent, (&mut walk as *mut AgentWalk).cast()) };
    let result = match walk.error {
        Some(error) => Err(error),
        None if status != HSA_STATUS_SUCCESS && status != HSA_STATUS_INFO_BREAK => {
            Err(api.call_failed("hsa_iterate_agents", status))
        }
        None => Ok(walk.agents),
    };
    // SAFETY: balances the successful hsa_init above; its status does not
    // change the answer.
    let _ = unsafe { (api.shut_down)() };
    result
}

/// The probe child: runs [`probe_in_process`] and writes the result to
/// stdout as one line of JSON.
///
/// Returns the process exit code: 0 when HSA answered, 1 when the answer is
/// an error report, 2 when nothing could be written.
pub fn probe_main(library: Option<&Path>) -> i32 {
    let (report, code) = match probe_in_process(library) {
        Ok(agents) => (
            ProbeReport {
                version: REPORT_VERSION,
                agents,
                error: None,
            },
            0,
        ),
        Err(error) => (
            ProbeReport {
                version: REPORT_VERSION,
                agents: Vec::new(),
                error: Some(error),
            },
            1,
        ),
    };
    let Ok(mut line) = serde_json::to_vec(&report) else {
        return 2;
    };
    line.push(b'\n');
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&line).and_then(|()| stdout.flush()) {
        Ok(()) => code,
        Err(_) => 2,
    }
}

/// Asks HSA for its GPU agents in a child process: runs
/// `probe_exe hsa-probe [--library PATH]`, waits at most `timeout` (killing
/// the child after that), and reads its answer.
pub fn probe(
    probe_exe: &Path,
    library: Option<&Path>,
    timeout: Duration,
) -> Result<Vec<HsaAgent>, HsaError> {
    let mut command = Command::new(probe_exe);
    command.arg(PROBE_SUBCOMMAND);
    if let Some(library) = library {
        command.arg("--library").arg(library);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let deadline = Instant::now() + timeout;
    let mut child = command.spawn().map_err(|source| HsaError::Spawn {
        exe: probe_exe.to_owned(),
        source,
    })?;

    // Read stdout on a thread so that a chatty child never blocks on a full
    // pipe; the channel lets the parent stop waiting for it.
    let (sender, receiver) = mpsc::channel();
    if let Some(stdout) = child.stdout.take() {
        std::thread::spawn(move || {
            let mut output = Vec::new();
            let _ = stdout.take(OUTPUT_LIMIT).read_to_end(&mut output);
            let _ = sender.send(output);
        });
    }

    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(source) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(HsaError::Wait {
                    exe: probe_exe.to_owned(),
                    source,
                });
            }
        }
        let now = Instant::now();
        if now >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(HsaError::TimedOut { timeout });
        }
        std::thread::sleep(POLL_INTERVAL.min(deadline - now));
    };

    // The child has ended; its stdout ends with it unless it left a process
    // behind holding the pipe, which is not waited for long.
    let output = receiver
        .recv_timeout(Duration::from_secs(1))
        .unwrap_or_default();
    parse_report(probe_exe, status, &output)
}

/// Reads the child's answer: the last non-empty line of its output.
fn parse_report(
    probe_exe: &Path,
    status: ExitStatus,
    output: &[u8],
) -> Result<Vec<HsaAgent>, HsaError> {
    let line = output
        .split(|&b| b == b'\n')
        .rev()
        .find(|line| !line.iter().all(u8::is_ascii_whitespace));
    let Some(line) = line else {
        return Err(HsaError::ProbeExited {
            exe: probe_exe.to_owned(),
            status,
        });
    };
    let report = match serde_json::from_slice::<ProbeReport>(line) {
        Ok(report) => report,
        Err(_) if !status.success() => {
            return Err(HsaError::ProbeExited {
                exe: probe_exe.to_owned(),
                status,
            })
        }
        Err(source) => {
            return Err(HsaError::Garbled {
                exe: probe_exe.to_owned(),
                source,
            })
        }
    };
    if report.version != REPORT_VERSION {
        return Err(HsaError::ReportVersion {
            exe: probe_exe.to_owned(),
            version: report.version,
        });
    }
    match report.error {
        Some(error) => Err(error),
        None => Ok(report.agents),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_isa_names_are_recognised_with_and_without_prefix() {
        assert!(is_generic_isa(
            "amdgcn-amd-amdhsa--gfx9-4-generic:sramecc+:xnack-"
        ));
        assert!(is_generic_isa("gfx11-generic"));
        assert!(!is_generic_isa("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"));
        assert!(!is_generic_isa("gfx1100"));
    }

    #[test]
    fn c_string_stops_at_nul_and_tolerates_none() {
        assert_eq!(c_string(b"gfx90a\0garbage"), "gfx90a");
        assert_eq!(c_string(b"gfx1100"), "gfx1100");
        assert_eq!(c_string(b"\0"), "");
    }

    #[test]
    fn init_failure_names_status_in_hex_with_its_text_and_a_hint() {
        let error = HsaError::InitFailed {
            status: 0x1008,
            text: Some("HSA_STATUS_ERROR_OUT_OF_RESOURCES: no resources".to_owned()),
        };
        let message = error.to_string();
        assert!(
            message.starts_with(
                "hsa_init failed: 0x1008 (HSA_STATUS_ERROR_OUT_OF_RESOURCES: no resources)"
            ),
            "{message}"
        );
        assert!(message.contains("/dev/kfd"), "{message}");
    }

    #[test]
    fn child_errors_round_trip_through_the_report() {
        let report = ProbeReport {
            version: REPORT_VERSION,
            agents: Vec::new(),
            error: Some(HsaError::CallFailed {
                function: "hsa_iterate_agents".to_owned(),
                status: 0x1000,
                text: None,
            }),
        };
        let json = serde_json::to_vec(&report).unwrap();
        let status = exit_status(1);
        let error = parse_report(Path::new("kpack-get"), status, &json).unwrap_err();
        assert_eq!(error.to_string(), "hsa_iterate_agents failed: 0x1000");
    }

    #[test]
    fn report_is_the_last_line_of_output() {
        let agent = HsaAgent {
            index: 0,
            name: "gfx1100".to_owned(),
            product: None,
            isa: "amdgcn-amd-amdhsa--gfx1100".to_owned(),
        };
        let report = ProbeReport {
            version: REPORT_VERSION,
            agents: vec![agent.clone()],
            error: None,
        };
        let mut output = b"runtime chatter\n".to_vec();
        output.extend(serde_json::to_vec(&report).unwrap());
        output.extend(b"\n\n");
        let agents = parse_report(Path::new("kpack-get"), exit_status(0), &output).unwrap();
        assert_eq!(agents, vec![agent]);
    }

    #[test]
    fn silent_failing_child_is_reported_with_its_exit_status() {
        let error = parse_report(Path::new("kpack-get"), exit_status(2), b"").unwrap_err();
        assert!(matches!(error, HsaError::ProbeExited { .. }), "{error:?}");
        let error = parse_report(Path::new("kpack-get"), exit_status(0), b"{").unwrap_err();
        assert!(matches!(error, HsaError::Garbled { .. }), "{error:?}");
    }

    #[test]
    fn newer_report_version_is_refused() {
        let error = parse_report(
            Path::new("kpack-get"),
            exit_status(0),
            br#"{"version":2,"agents":[]}"#,
        )
        .unwrap_err();
        assert!(
            matches!(error, HsaError::ReportVersion { version: 2, .. }),
            "{error:?}"
        );
    }

    fn exit_status(code: i32) -> ExitStatus {
        use std::os::unix::process::ExitStatusExt;
        ExitStatus::from_raw(code << 8)
    }
}

//! GPUs as the HSA runtime reports them.
//!
//! `libhsa-runtime64.so.1` is loaded with `dlopen` and asked for its GPU
//! agents and their ISA names, which carry the live `xnack`/`sramecc` modes.
//! HSA initialisation can hang or take long and leaves threads and state
//! behind, so the installer does not do it itself: [`probe`] re-invokes the
//! installer's executable as a child (`kpack-get hsa-probe`), which runs
//! [`probe_main`] and answers with one JSON document on stdout; the parent
//! kills it when it takes longer than the timeout.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

mod ffi;

pub use ffi::probe_in_process;
pub(crate) use ffi::HSA_STATUS_ERROR_OUT_OF_RESOURCES;

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

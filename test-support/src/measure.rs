//! Running a program under watch: its own peak resident set size, exactly
//! (the rusage `wait4` returns for that one pid, not every child's), and a
//! kill when it grows past a bound or outlives a deadline, so a test of a
//! runaway download never takes the machine down with it.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// What a watched run did.
#[derive(Debug)]
pub struct Measured {
    pub output: Output,
    /// The process's own peak resident set size, in bytes.
    pub peak_rss: u64,
    /// From spawning to exit.
    pub elapsed: Duration,
    /// Why the watch killed it, if it did.
    pub killed: Option<String>,
}

/// Runs `command` (stdin empty, output captured), killing it when its
/// resident memory passes `rss_limit` bytes or it runs past `deadline`.
// Reaped by `wait4` below, which std's `Child::wait` would do without the
// rusage.
#[allow(clippy::zombie_processes)]
pub fn run_watched(command: &mut Command, deadline: Duration, rss_limit: u64) -> Measured {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let pid = child.id() as libc::pid_t;
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let mut killed = None;
    let (status, rusage) = loop {
        if let Some(done) = reap(pid, libc::WNOHANG) {
            break done;
        }
        if killed.is_none() {
            let rss = resident(pid);
            if rss > rss_limit {
                killed = Some(format!("resident memory {rss} bytes passed {rss_limit}"));
            } else if started.elapsed() > deadline {
                killed = Some(format!("still running after {deadline:?}"));
            }
            if killed.is_some() {
                let _ = child.kill();
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = started.elapsed();
    Measured {
        output: Output {
            status,
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        },
        // Linux reports ru_maxrss in KiB.
        peak_rss: u64::try_from(rusage.ru_maxrss).unwrap_or(0) * 1024,
        elapsed,
        killed,
    }
}

/// `wait4` for `pid`: its status and its own resource usage once it has
/// exited.
fn reap(pid: libc::pid_t, flags: libc::c_int) -> Option<(ExitStatus, libc::rusage)> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers to a status word and a rusage for this call.
    let reaped = unsafe { libc::wait4(pid, &mut status, flags, &mut rusage) };
    assert!(reaped >= 0, "wait4: {}", std::io::Error::last_os_error());
    (reaped == pid).then(|| (ExitStatus::from_raw(status), rusage))
}

/// The current resident set size of `pid` in bytes (0 once it is gone).
fn resident(pid: libc::pid_t) -> u64 {
    let Ok(status) = fs_err::read_to_string(format!("/proc/{pid}/status")) else {
        return 0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Makes `command` run with at most `soft` open files (its soft
/// `RLIMIT_NOFILE`; the hard limit stays), as a user's shell may have it.
pub fn limit_open_files(command: &mut Command, soft: u64) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec only async-signal-safe calls are made
    // (getrlimit, setrlimit), on memory of the child's own stack.
    unsafe {
        command.pre_exec(move || {
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            limit.rlim_cur = soft.min(limit.rlim_max);
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

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
    /// The most bytes the watched directory held while it ran, as often
    /// as it was looked at (0 when none was watched).
    pub peak_disk: u64,
}

/// A directory whose disk use is watched: killed when it holds more.
#[derive(Debug, Clone, Copy)]
pub struct DiskWatch<'a> {
    pub dir: &'a std::path::Path,
    pub limit: u64,
}

/// Runs `command` (stdin empty, output captured), killing it when its
/// resident memory passes `rss_limit` bytes or it runs past `deadline`.
pub fn run_watched(command: &mut Command, deadline: Duration, rss_limit: u64) -> Measured {
    run_watched_on_disk(command, deadline, rss_limit, None)
}

/// As [`run_watched`], also measuring what `disk`'s directory holds (every
/// file's allocated blocks) while it runs, killed past its limit.
// Reaped by `wait4` below, which std's `Child::wait` would do without the
// rusage.
#[allow(clippy::zombie_processes)]
pub fn run_watched_on_disk(
    command: &mut Command,
    deadline: Duration,
    rss_limit: u64,
    disk: Option<DiskWatch<'_>>,
) -> Measured {
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
    let mut peak_disk = 0;
    let mut watched_peak = 0;
    let (status, rusage) = loop {
        if let Some(done) = reap(pid, libc::WNOHANG) {
            break done;
        }
        watched_peak = watched_peak.max(status_kib(&pid.to_string(), "VmHWM:") * 1024);
        if killed.is_none() {
            let rss = resident(pid);
            let used = disk.map_or(0, |watch| disk_use(watch.dir));
            peak_disk = peak_disk.max(used);
            if rss > rss_limit {
                killed = Some(format!("resident memory {rss} bytes passed {rss_limit}"));
            } else if let Some(watch) = disk.filter(|watch| used > watch.limit) {
                killed = Some(format!(
                    "{} held {used} bytes, past {}",
                    watch.dir.display(),
                    watch.limit
                ));
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
    // The rusage peak of a child spawned sharing this process's memory
    // until its exec is at least this process's peak then: it is the
    // child's own only when it passes this process's peak, which only
    // grows, read after the child is gone.
    let inherited = status_kib("self", "VmHWM:") * 1024;
    Measured {
        output: Output {
            status,
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        },
        peak_rss: own_peak(&rusage, inherited, watched_peak),
        elapsed,
        killed,
        peak_disk,
    }
}

/// The bytes allocated to the files under `dir` (those that vanish while
/// it is walked are left out).
pub fn disk_use(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = fs_err::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => disk_use(&entry.path()),
            Ok(meta) => meta.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
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

/// The child's own peak: the rusage peak (Linux reports it in KiB) when
/// it passed this process's peak (`inherited`), so that it is the
/// child's; else the highest peak its own `/proc` status showed while it
/// was watched.
fn own_peak(rusage: &libc::rusage, inherited: u64, watched: u64) -> u64 {
    let reported = u64::try_from(rusage.ru_maxrss).unwrap_or(0) * 1024;
    if reported > inherited {
        reported
    } else {
        watched
    }
}

/// The current resident set size of `pid` in bytes (0 once it is gone).
fn resident(pid: libc::pid_t) -> u64 {
    status_kib(&pid.to_string(), "VmRSS:") * 1024
}

/// A `kB` field of `/proc/<process>/status` (0 when it cannot be read).
fn status_kib(process: &str, field: &str) -> u64 {
    let Ok(status) = fs_err::read_to_string(format!("/proc/{process}/status")) else {
        return 0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|value| value.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse::<u64>().ok())
        .unwrap_or(0)
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

//! Ctrl-C during a download says what the cache keeps for the next run,
//! then exits 130 as shells expect; at any other time it does what it
//! would have done anyway (the prefix's journal makes an interrupted
//! change safe).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Once;

static DOWNLOADING: AtomicBool = AtomicBool::new(false);
static FETCHED: AtomicU64 = AtomicU64::new(0);
static HANDLER: Once = Once::new();

/// While this lives, Ctrl-C is a download interrupted.
#[must_use]
pub struct Downloading(());

/// Marks a download under way until the value returned is dropped.
pub fn downloading() -> Downloading {
    HANDLER.call_once(|| {
        // SAFETY: the handler only reads atomics, formats into a stack
        // buffer and makes async-signal-safe calls (write, _exit, signal,
        // raise).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        }
    });
    DOWNLOADING.store(true, Ordering::SeqCst);
    Downloading(())
}

impl Drop for Downloading {
    fn drop(&mut self) {
        DOWNLOADING.store(false, Ordering::SeqCst);
    }
}

/// `bytes` more arrived in this run.
pub fn fetched(bytes: u64) {
    FETCHED.fetch_add(bytes, Ordering::Relaxed);
}

extern "C" fn on_interrupt(_: libc::c_int) {
    if !DOWNLOADING.load(Ordering::SeqCst) {
        // SAFETY: signal and raise are async-signal-safe.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::raise(libc::SIGINT);
        }
        return;
    }
    let mut buffer = Buffer::default();
    let _ = message(&mut buffer, FETCHED.load(Ordering::Relaxed));
    // SAFETY: write and _exit are async-signal-safe; the buffer outlives
    // the call.
    unsafe {
        libc::write(2, buffer.bytes.as_ptr().cast(), buffer.len);
        libc::_exit(130);
    }
}

/// What is said, with integers only (no allocation in a signal handler).
fn message(out: &mut impl std::fmt::Write, fetched: u64) -> std::fmt::Result {
    out.write_str("\ninterrupted: the files being downloaded are kept in the cache (")?;
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    while unit + 1 < units.len() && fetched >= 1024u64 << (10 * unit) {
        unit += 1;
    }
    if unit == 0 {
        write!(out, "{fetched} B")?;
    } else {
        let tenths = fetched.saturating_mul(10) >> (10 * unit);
        write!(out, "{}.{} {}", tenths / 10, tenths % 10, units[unit])?;
    }
    out.write_str(" fetched in this run); the same command resumes them\n")
}

/// A fixed buffer that keeps what fits.
struct Buffer {
    bytes: [u8; 256],
    len: usize,
}

impl Default for Buffer {
    fn default() -> Buffer {
        Buffer {
            bytes: [0; 256],
            len: 0,
        }
    }
}

impl std::fmt::Write for Buffer {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.bytes.len() - self.len;
        let taken = s.len().min(room);
        self.bytes[self.len..self.len + taken].copy_from_slice(&s.as_bytes()[..taken]);
        self.len += taken;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_says_what_was_fetched_in_people_units() {
        let said = |bytes| {
            let mut buffer = Buffer::default();
            message(&mut buffer, bytes).unwrap();
            String::from_utf8(buffer.bytes[..buffer.len].to_vec()).unwrap()
        };
        assert!(said(0).contains("(0 B fetched in this run)"), "{}", said(0));
        assert!(
            said(3_355_443).contains("(3.1 MiB fetched"),
            "{}",
            said(3_355_443)
        );
        assert!(said(1536).contains("(1.5 KiB fetched"), "{}", said(1536));
        assert!(said(1536).ends_with("resumes them\n"));
    }
}

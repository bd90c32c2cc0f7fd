//! The faults a test can inject, and how the one a request meets is chosen
//! (and, when counted, used up).

use super::state::Shared;
use std::time::Duration;

/// A fault injected for requests whose path contains a pattern.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Answer 500 (empty body) to the next `times` GETs of matching paths,
    /// then serve normally.  HEAD requests are not affected.
    Status500 { times: usize },
    /// Send the headers and `after` bytes of the body (at most the whole
    /// body), then shut the connection down (the client sees EOF before
    /// `Content-Length` is reached), for the next `times` GETs.  HEAD
    /// requests are not affected.
    ResetAfter { after: u64, times: usize },
    /// Ignore Range / If-Range headers: always 200 with the whole file.
    IgnoreRange,
    /// Send the headers, then sleep `stall` before sending the body (to
    /// trigger the client's read timeout).  Other connections are served
    /// normally meanwhile.
    Stall { stall: Duration },
    /// Serve the file with the byte at offset `len / 2` flipped (xor 0xff),
    /// same length, same ETag: a tampered mirror.  Range requests get the
    /// corresponding slice of the tampered content.
    Tamper,
    /// Read the request, then close the connection without any response.
    Down,
    /// 200 with no `Content-Length`, then filler bytes for as long as the
    /// client reads: a body without end.
    Endless,
    /// 200 with a body of `size` bytes (the file's, then filler), declared
    /// in `Content-Length` or, when `declared` is false, ended by closing
    /// the connection.
    Oversized { size: u64, declared: bool },
    /// The file's headers, then its body one byte every `every`: a body
    /// that never stalls long enough for a read timeout and never ends in
    /// useful time.
    Drip { every: Duration },
    /// The file's headers, then its body at about `bytes_per_second`, in
    /// twentieths of a second: a slow link.
    Throttle { bytes_per_second: u64 },
    /// A GET without a range gets the headers and `cut_after` bytes of the
    /// body, then the connection is shut down; a GET with a range gets 206
    /// with the `Content-Range` asked for, but the file's first bytes as
    /// its body: a mirror that resumes from the wrong place.
    RangeFromStart { cut_after: u64 },
}

impl Fault {
    /// Counted faults only apply to GET.
    fn applies_to(&self, method: &str) -> bool {
        match self {
            Fault::Status500 { .. } | Fault::ResetAfter { .. } => method == "GET",
            _ => true,
        }
    }
}

impl Shared {
    /// Finds the first fault matching `path` for `method`, consuming one use
    /// of a counted fault and dropping it when exhausted.
    pub(super) fn take_fault(&self, method: &str, path: &str) -> Option<Fault> {
        let mut st = self.lock();
        let idx = st
            .faults
            .iter()
            .position(|(pat, f)| path.contains(pat.as_str()) && f.applies_to(method))?;
        let fault = st.faults[idx].1.clone();
        let exhausted = match &mut st.faults[idx].1 {
            Fault::Status500 { times } | Fault::ResetAfter { times, .. } => {
                *times = times.saturating_sub(1);
                *times == 0
            }
            _ => false,
        };
        if exhausted {
            st.faults.remove(idx);
        }
        Some(fault)
    }
}

//! What the accept loop and the connection threads share: the served root,
//! the stop flag, the active faults and the log of requests, each counted
//! as its body bytes go out.

use super::fault::Fault;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard};

/// One request seen by the server.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Percent-decoded path without the leading '/' and without the query.
    pub path: String,
    /// Raw `Range` header value.
    pub range: Option<String>,
    /// Raw `If-Range` header value.
    pub if_range: Option<String>,
    /// Status sent (0 when the connection was dropped without a response).
    pub status: u16,
    /// Body bytes actually written to the socket.
    pub body_bytes: u64,
}

/// The faults and the request log, behind [`Shared`]'s lock.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) faults: Vec<(String, Fault)>,
    /// (id, request), in arrival order.
    pub(super) requests: Vec<(u64, Request)>,
    next_id: u64,
}

/// The server's state, one per server, held by every thread it runs.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) root: PathBuf,
    pub(super) state: Mutex<State>,
    pub(super) stop: AtomicBool,
}

impl Shared {
    /// The state; a thread that panicked while holding it does not poison
    /// it for the rest of the test.
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Logs `req`; returns the id its later updates name.
    pub(super) fn record(&self, req: Request) -> u64 {
        let mut st = self.lock();
        let id = st.next_id;
        st.next_id += 1;
        st.requests.push((id, req));
        id
    }

    /// Changes logged request `id` (counting its body bytes), if it is still
    /// in the log.
    pub(super) fn update(&self, id: u64, f: impl FnOnce(&mut Request)) {
        let mut st = self.lock();
        if let Some((_, r)) = st.requests.iter_mut().rev().find(|(i, _)| *i == id) {
            f(r);
        }
    }
}

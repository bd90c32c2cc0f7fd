//! The server a test holds: started on loopback, given faults, asked what
//! it saw, and stopped (its accept loop woken and joined) when dropped.

use super::connection::handle_connection;
use super::fault::Fault;
use super::state::{Request, Shared, State};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A static file server on 127.0.0.1 with fault injection.
#[derive(Debug)]
pub struct TestServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl TestServer {
    /// Starts on 127.0.0.1 with an OS-chosen port, serving files under `root`
    /// (paths are percent-decoded; '..' segments are refused with 404).
    pub fn start(root: &Path) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind test server");
        let addr = listener.local_addr().expect("test server address");
        let shared = Arc::new(Shared {
            root: root.to_path_buf(),
            state: Mutex::new(State::default()),
            stop: AtomicBool::new(false),
        });
        let sh = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("test-server-accept".into())
            .spawn(move || accept_loop(listener, sh))
            .expect("spawn test server");
        TestServer {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// Base URL without trailing slash, e.g. "http://127.0.0.1:40123".
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Adds a fault for requests whose path (after the leading '/') contains
    /// `pattern` ("" = every path).  Several faults may be active; the first
    /// match wins; exhausted counted faults are dropped.
    pub fn fault(&self, pattern: &str, fault: Fault) {
        let drop_now = matches!(
            fault,
            Fault::Status500 { times: 0 } | Fault::ResetAfter { times: 0, .. }
        );
        if !drop_now {
            self.shared.lock().faults.push((pattern.to_string(), fault));
        }
    }

    pub fn clear_faults(&self) {
        self.shared.lock().faults.clear();
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared
            .lock()
            .requests
            .iter()
            .map(|(_, r)| r.clone())
            .collect()
    }

    pub fn clear_requests(&self) {
        self.shared.lock().requests.clear();
    }

    /// Body bytes actually written to sockets for paths containing `pattern`
    /// (since the last `clear_requests`).
    pub fn bytes_sent(&self, pattern: &str) -> u64 {
        self.shared
            .lock()
            .requests
            .iter()
            .filter(|(_, r)| r.path.contains(pattern))
            .map(|(_, r)| r.body_bytes)
            .sum()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let woke = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5)).is_ok();
        if let Some(h) = self.accept.take() {
            if woke {
                let _ = h.join();
            }
        }
    }
}

/// Accepts connections until the server stops, serving each on a thread of
/// its own.
fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        match conn {
            Ok(stream) => {
                let sh = Arc::clone(&shared);
                let _ = std::thread::Builder::new()
                    .name("test-server-conn".into())
                    .spawn(move || {
                        let _ = handle_connection(stream, &sh);
                    });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

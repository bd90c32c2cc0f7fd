//! A small HTTP/1.1 static file server on loopback for the integration tests.
//!
//! std only: one accept thread, one thread per connection.  Connections are
//! kept alive (every response carries `Content-Length`) unless the client
//! asks for `Connection: close`, speaks HTTP/1.0, or a fault drops the
//! connection.  Tests can inject faults per path pattern and inspect every
//! request the server saw, including how many body bytes were actually
//! written to the socket.
//!
//! Bookkeeping is done *before* the bytes reach the socket (the request is
//! recorded with its status before the headers are sent, and a body chunk is
//! counted before it is written and corrected if the write fails), so a test
//! that has just received a response always sees it in `requests()`.

use fs_err::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

#[derive(Debug, Default)]
struct State {
    faults: Vec<(String, Fault)>,
    /// (id, request), in arrival order.
    requests: Vec<(u64, Request)>,
    next_id: u64,
}

#[derive(Debug)]
struct Shared {
    root: PathBuf,
    state: Mutex<State>,
    stop: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self, req: Request) -> u64 {
        let mut st = self.lock();
        let id = st.next_id;
        st.next_id += 1;
        st.requests.push((id, req));
        id
    }

    fn update(&self, id: u64, f: impl FnOnce(&mut Request)) {
        let mut st = self.lock();
        if let Some((_, r)) = st.requests.iter_mut().rev().find(|(i, _)| *i == id) {
            f(r);
        }
    }

    /// Finds the first fault matching `path` for `method`, consuming one use
    /// of a counted fault and dropping it when exhausted.
    fn take_fault(&self, method: &str, path: &str) -> Option<Fault> {
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

const MAX_HEADER_BYTES: usize = 64 * 1024;
const CHUNK: usize = 64 * 1024;

struct Parsed {
    method: String,
    target: String,
    http10: bool,
    headers: Vec<(String, String)>,
}

impl Parsed {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }
}

enum ReadOutcome {
    Request(Parsed),
    Eof,
    Bad,
}

/// Reads one line (up to '\n'), bounded by the remaining header budget.
fn read_line(r: &mut BufReader<TcpStream>, budget: &mut usize) -> io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let n = r
        .by_ref()
        .take(*budget as u64 + 1)
        .read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if n <= *budget && line.last() != Some(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "eof in headers",
        ));
    }
    if n > *budget {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "header too long",
        ));
    }
    *budget -= n;
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Ok(Some(line))
}

fn read_request(r: &mut BufReader<TcpStream>) -> io::Result<ReadOutcome> {
    let mut budget = MAX_HEADER_BYTES;
    // Skip stray empty lines before the request line (RFC 9112 §2.2).
    let line = loop {
        match read_line(r, &mut budget)? {
            None => return Ok(ReadOutcome::Eof),
            Some(l) if l.is_empty() => continue,
            Some(l) => break l,
        }
    };
    let Ok(line) = String::from_utf8(line) else {
        return Ok(ReadOutcome::Bad);
    };
    let mut parts = line.split_ascii_whitespace();
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Ok(ReadOutcome::Bad);
    };
    if !version.starts_with("HTTP/1.") {
        return Ok(ReadOutcome::Bad);
    }
    let mut parsed = Parsed {
        method: method.to_string(),
        target: target.to_string(),
        http10: version == "HTTP/1.0",
        headers: Vec::new(),
    };
    loop {
        let Some(l) = read_line(r, &mut budget)? else {
            return Ok(ReadOutcome::Eof);
        };
        if l.is_empty() {
            break;
        }
        let l = String::from_utf8_lossy(&l);
        if let Some((name, value)) = l.split_once(':') {
            parsed
                .headers
                .push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    Ok(ReadOutcome::Request(parsed))
}

fn handle_connection(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(300)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let parsed = match read_request(&mut reader) {
            Ok(ReadOutcome::Request(p)) => p,
            // Idle timeout or connection error: close quietly.
            Ok(ReadOutcome::Eof) => return Ok(()),
            Err(e) if e.kind() != io::ErrorKind::InvalidData => return Ok(()),
            Ok(ReadOutcome::Bad) | Err(_) => {
                let _ = write_head(&mut writer, 400, &[], 0, true);
                let _ = writer.shutdown(Shutdown::Both);
                return Ok(());
            }
        };
        // Discard a request body, if any (GET/HEAD normally have none).
        if parsed.header("transfer-encoding").is_some() {
            let _ = write_head(&mut writer, 501, &[], 0, true);
            let _ = writer.shutdown(Shutdown::Both);
            return Ok(());
        }
        if let Some(cl) = parsed.header("content-length") {
            let Ok(n) = cl.parse::<u64>() else {
                let _ = write_head(&mut writer, 400, &[], 0, true);
                let _ = writer.shutdown(Shutdown::Both);
                return Ok(());
            };
            io::copy(&mut reader.by_ref().take(n), &mut io::sink())?;
        }
        let close = parsed.http10 || parsed.has_token("connection", "close");
        let keep = serve(&parsed, &mut writer, shared, close)?;
        if !keep || close {
            let _ = writer.flush();
            let _ = writer.shutdown(Shutdown::Both);
            return Ok(());
        }
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Request target -> decoded path without leading '/' and without query.
fn target_path(target: &str) -> String {
    // Absolute form: http://host:port/path
    let mut t = target;
    if let Some(rest) = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
    {
        t = rest.find('/').map_or("/", |i| &rest[i..]);
    }
    let t = t.split(['?', '#']).next().unwrap_or("");
    let t = t.strip_prefix('/').unwrap_or(t);
    percent_decode(t).unwrap_or_else(|| t.to_string())
}

/// HTML pages (package indexes, find-links pages) as HTML, the rest as bytes.
fn content_type(path: &str) -> &'static str {
    if path.is_empty() || path.ends_with('/') || path.ends_with(".html") {
        "text/html"
    } else {
        "application/octet-stream"
    }
}

/// A package index's JSON page type (PEP 691).
const PYPI_JSON: &str = "application/vnd.pypi.simple.v1+json";

/// A directory's `index.json` for a request that accepts a package index's
/// JSON page (PEP 691) when there is one, as an index serving both forms
/// answers; `None` for the HTML page (or any other file).
fn negotiated_json(p: &Parsed, root: &Path, path: &str) -> Option<PathBuf> {
    let accepts = p.header("accept").is_some_and(|a| a.contains(PYPI_JSON));
    let page = resolve(root, path).filter(|_| accepts && path.ends_with('/'))?;
    let json = page.with_file_name("index.json");
    json.is_file().then_some(json)
}

/// Maps a decoded path to a file under root; None when it escapes root. A
/// directory's path (ending in `/`) maps to its `index.html`, as a static
/// web server serves a package index.
fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let mut p = root.to_path_buf();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => return None,
            s if s.contains('\\') || s.contains('\0') => return None,
            s => p.push(s),
        }
    }
    if path.is_empty() || path.ends_with('/') {
        p.push("index.html");
    }
    Some(p)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        416 => "Range Not Satisfiable",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        _ => "Unknown",
    }
}

fn write_head(
    w: &mut TcpStream,
    status: u16,
    headers: &[(&str, String)],
    content_length: u64,
    close: bool,
) -> io::Result<()> {
    let mut h = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    h.push_str(&format!("Date: {}\r\n", http_date(SystemTime::now())));
    for (n, v) in headers {
        h.push_str(&format!("{n}: {v}\r\n"));
    }
    h.push_str(&format!("Content-Length: {content_length}\r\n"));
    h.push_str(if close {
        "Connection: close\r\n"
    } else {
        "Connection: keep-alive\r\n"
    });
    h.push_str("\r\n");
    w.write_all(h.as_bytes())?;
    w.flush()
}

/// Serves one request.  Returns Ok(false) when the connection must be dropped.
fn serve(p: &Parsed, w: &mut TcpStream, shared: &Shared, close: bool) -> io::Result<bool> {
    let path = target_path(&p.target);
    let range = p.header("range").map(str::to_string);
    let if_range = p.header("if-range").map(str::to_string);
    let record = |status: u16| {
        shared.record(Request {
            method: p.method.clone(),
            path: path.clone(),
            range: range.clone(),
            if_range: if_range.clone(),
            status,
            body_bytes: 0,
        })
    };

    let is_head = p.method == "HEAD";
    if p.method != "GET" && !is_head {
        record(405);
        write_head(w, 405, &[("Allow", "GET, HEAD".into())], 0, close)?;
        return Ok(true);
    }

    let fault = shared.take_fault(&p.method, &path);
    match fault {
        Some(Fault::Down) => {
            record(0);
            let _ = w.shutdown(Shutdown::Both);
            return Ok(false);
        }
        Some(Fault::Status500 { .. }) => {
            record(500);
            write_head(w, 500, &[], 0, close)?;
            return Ok(true);
        }
        _ => {}
    }

    if let Some(fault @ (Fault::Endless | Fault::Oversized { .. })) = &fault {
        let file = resolve(&shared.root, &path).and_then(|fp| fs_err::read(fp).ok());
        let id = record(200);
        return serve_unbounded(w, fault, file.unwrap_or_default(), shared, id);
    }

    let json = negotiated_json(p, &shared.root, &path);
    let file = json
        .clone()
        .or_else(|| resolve(&shared.root, &path))
        .and_then(|fp| {
            let f = File::open(&fp).ok()?;
            let md = f.metadata().ok()?;
            md.is_file().then_some((f, md))
        });
    let Some((mut file, md)) = file else {
        record(404);
        write_head(w, 404, &[], 0, close)?;
        return Ok(true);
    };

    let total = md.len();
    let (etag, last_modified) = validators(&md);
    let honour_range = fault != Some(Fault::IgnoreRange)
        && if_range_holds(if_range.as_deref(), &etag, &last_modified);
    let spec = match range.as_deref() {
        Some(range) if honour_range => parse_range(range, total),
        _ => RangeSpec::Ignore,
    };

    let media = match json {
        Some(_) => PYPI_JSON,
        None => content_type(&path),
    };
    let mut headers = vec![
        ("Content-Type", media.to_string()),
        ("Accept-Ranges", "bytes".to_string()),
        ("ETag", etag),
        ("Last-Modified", last_modified),
    ];
    let Some((status, start, len)) = status_and_range(spec, total, &mut headers) else {
        record(416);
        write_head(w, 416, &headers, 0, close)?;
        return Ok(true);
    };

    let id = record(status);
    write_head(w, status, &headers, len, close)?;
    if is_head {
        return Ok(true);
    }

    let (send, drop_after) = match &fault {
        Some(Fault::ResetAfter { after, .. }) => ((*after).min(len), true),
        Some(Fault::RangeFromStart { cut_after }) if status == 200 => ((*cut_after).min(len), true),
        _ => (len, false),
    };
    let start = match &fault {
        Some(Fault::RangeFromStart { .. }) => 0,
        _ => start,
    };
    if let Some(Fault::Stall { stall }) = &fault {
        std::thread::sleep(*stall);
    }
    let tamper_at = (fault == Some(Fault::Tamper) && total > 0).then_some(total / 2);

    if let Some(Fault::Drip { every }) = &fault {
        file.seek(SeekFrom::Start(start))?;
        return drip(&mut file, w, shared, id, send, (1, *every));
    }
    if let Some(Fault::Throttle { bytes_per_second }) = &fault {
        file.seek(SeekFrom::Start(start))?;
        let chunk = (bytes_per_second / 20).max(1);
        return drip(
            &mut file,
            w,
            shared,
            id,
            send,
            (chunk, Duration::from_millis(50)),
        );
    }

    file.seek(SeekFrom::Start(start))?;
    let sent = send_body(&mut file, w, shared, id, start..start + send, tamper_at)?;
    Ok(sent && !drop_after)
}

/// Serves an endless or oversized body: `file`'s bytes, then filler, with
/// `Content-Length` only when the fault declares it; the connection is
/// closed afterwards. The bytes written are counted in request `id`.
fn serve_unbounded(
    w: &mut TcpStream,
    fault: &Fault,
    file: Vec<u8>,
    shared: &Shared,
    id: u64,
) -> io::Result<bool> {
    let (size, declared) = match fault {
        Fault::Oversized { size, declared } => (Some(*size), *declared),
        _ => (None, false),
    };
    let mut head = format!(
        "HTTP/1.1 200 OK\r\nDate: {}\r\n",
        http_date(SystemTime::now())
    );
    if let (Some(size), true) = (size, declared) {
        head.push_str(&format!("Content-Length: {size}\r\n"));
    }
    head.push_str("Content-Type: application/octet-stream\r\nConnection: close\r\n\r\n");
    w.write_all(head.as_bytes())?;
    let filler = vec![b'#'; CHUNK];
    let mut sent = 0u64;
    let mut pending: &[u8] = &file;
    while size.is_none_or(|size| sent < size) {
        let chunk = if pending.is_empty() {
            &filler[..]
        } else {
            pending
        };
        let want = size.map_or(chunk.len() as u64, |size| {
            (size - sent).min(chunk.len() as u64)
        });
        let chunk = &chunk[..want as usize];
        let written = write_some(w, chunk);
        shared.update(id, |r| r.body_bytes += written as u64);
        if written < chunk.len() {
            break;
        }
        sent += want;
        pending = pending
            .get(chunk.len().min(pending.len())..)
            .unwrap_or_default();
    }
    Ok(false)
}

/// Sends `len` bytes of `file` one byte every `every`, counted in request
/// `id`; stops when the client goes away.
fn drip(
    file: &mut File,
    w: &mut TcpStream,
    shared: &Shared,
    id: u64,
    len: u64,
    (chunk, every): (u64, Duration),
) -> io::Result<bool> {
    let mut buffer = vec![0u8; usize::try_from(chunk).unwrap_or(1)];
    let mut left = len;
    while left > 0 {
        std::thread::sleep(every);
        let want = buffer
            .len()
            .min(usize::try_from(left).unwrap_or(usize::MAX));
        let read = file.read(&mut buffer[..want])?;
        let written = write_some(w, &buffer[..read]);
        let _ = w.flush();
        shared.update(id, |r| r.body_bytes += written as u64);
        if read == 0 || written < read {
            return Ok(false);
        }
        left -= read as u64;
    }
    Ok(true)
}

/// The status, first byte and length of the response for `spec`, with
/// the Content-Range it needs; `None` for an unsatisfiable range (416, its
/// headers then replace `headers`).
fn status_and_range(
    spec: RangeSpec,
    total: u64,
    headers: &mut Vec<(&'static str, String)>,
) -> Option<(u16, u64, u64)> {
    match spec {
        RangeSpec::Ignore => Some((200, 0, total)),
        RangeSpec::Unsatisfiable => {
            *headers = vec![
                ("Content-Range", format!("bytes */{total}")),
                ("Accept-Ranges", "bytes".into()),
            ];
            None
        }
        RangeSpec::Range(s, e) => {
            headers.push(("Content-Range", format!("bytes {s}-{e}/{total}")));
            Some((206, s, e - s + 1))
        }
    }
}

/// A file's validators: an ETag from its size and time, and Last-Modified.
fn validators(md: &std::fs::Metadata) -> (String, String) {
    let mtime = md.modified().unwrap_or(UNIX_EPOCH);
    let nanos = mtime
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    (format!("\"{:x}-{nanos:x}\"", md.len()), http_date(mtime))
}

/// Whether an `If-Range` (if any) still names the file: a strong ETag or
/// the date; a weak ETag never does.
fn if_range_holds(if_range: Option<&str>, etag: &str, last_modified: &str) -> bool {
    match if_range.map(str::trim) {
        None => true,
        Some(ir) if ir.starts_with('"') => ir == etag,
        Some(ir) if ir.starts_with("W/") => false,
        Some(ir) => ir == last_modified,
    }
}

/// Sends `range` of `file` (read from its current position), flipping the
/// byte at `tamper_at`; false when the file ended early or the client went
/// away. Bytes are counted in request `id` before they are written.
fn send_body(
    file: &mut File,
    w: &mut TcpStream,
    shared: &Shared,
    id: u64,
    range: std::ops::Range<u64>,
    tamper_at: Option<u64>,
) -> io::Result<bool> {
    let mut buf = vec![0u8; CHUNK];
    let mut pos = range.start;
    while pos < range.end {
        let want = (range.end - pos).min(CHUNK as u64) as usize;
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            // File shrank underneath us: the response cannot be completed.
            return Ok(false);
        }
        if let Some(t) = tamper_at {
            if t >= pos && t < pos + n as u64 {
                buf[(t - pos) as usize] ^= 0xff;
            }
        }
        // Count first so that a client that has the bytes sees them counted.
        shared.update(id, |r| r.body_bytes += n as u64);
        let written = write_some(w, &buf[..n]);
        if written < n {
            let unsent = (n - written) as u64;
            shared.update(id, |r| r.body_bytes -= unsent);
            return Ok(false);
        }
        pos += n as u64;
    }
    w.flush()?;
    Ok(true)
}

/// Writes as much of `bytes` as the client takes; returns how much.
fn write_some(w: &mut TcpStream, bytes: &[u8]) -> usize {
    let mut written = 0;
    while written < bytes.len() {
        match w.write(&bytes[written..]) {
            Ok(0) => break,
            Ok(k) => written += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    written
}

enum RangeSpec {
    Ignore,
    Unsatisfiable,
    /// Inclusive.
    Range(u64, u64),
}

/// Single byte ranges only (`N-`, `N-M`, `-SUFFIX`); anything else is ignored
/// (served as a full 200), as RFC 9110 allows.
fn parse_range(value: &str, total: u64) -> RangeSpec {
    let v = value.trim();
    let Some(unit_end) = v.find('=') else {
        return RangeSpec::Ignore;
    };
    if !v[..unit_end].trim().eq_ignore_ascii_case("bytes") {
        return RangeSpec::Ignore;
    }
    let set = v[unit_end + 1..].trim();
    if set.contains(',') {
        return RangeSpec::Ignore;
    }
    let Some((a, b)) = set.split_once('-') else {
        return RangeSpec::Ignore;
    };
    let (a, b) = (a.trim(), b.trim());
    let num = |s: &str| -> Option<u64> {
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            None
        } else {
            s.parse().ok()
        }
    };
    if a.is_empty() {
        // Suffix range: the last `b` bytes.
        let Some(n) = num(b) else {
            return RangeSpec::Ignore;
        };
        if n == 0 || total == 0 {
            return RangeSpec::Unsatisfiable;
        }
        return RangeSpec::Range(total.saturating_sub(n), total - 1);
    }
    let Some(start) = num(a) else {
        return RangeSpec::Ignore;
    };
    let end = if b.is_empty() {
        None
    } else {
        match num(b) {
            Some(e) if e >= start => Some(e),
            _ => return RangeSpec::Ignore,
        }
    };
    if start >= total {
        return RangeSpec::Unsatisfiable;
    }
    let end = end.map_or(total - 1, |e| e.min(total - 1));
    RangeSpec::Range(start, end)
}

/// IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT".
fn http_date(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, (rem % 3600) / 60, rem % 60);
    // 1970-01-01 was a Thursday.
    const WD: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MON: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let wd = WD[(days % 7) as usize];
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{wd}, {d:02} {} {year} {h:02}:{m:02}:{s:02} GMT",
        MON[(month - 1) as usize]
    )
}

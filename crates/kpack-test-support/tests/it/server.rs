//! Self-test of the loopback HTTP test server, using a raw std TcpStream client.

use kpack_test_support::server::{Fault, TestServer};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const FILE_LEN: usize = 200_000;

fn content() -> Vec<u8> {
    // Deterministic, non-repeating-ish bytes.
    let mut x: u32 = 0x1234_5678;
    (0..FILE_LEN)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

/// A fixture directory, removed on drop.
struct Fixture(PathBuf);

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs_err::remove_dir_all(&self.0);
    }
}

fn fixture() -> Fixture {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "server-selftest-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = fs_err::remove_dir_all(&dir);
    fs_err::create_dir_all(dir.join("sub dir")).unwrap();
    fs_err::write(dir.join("a.bin"), content()).unwrap();
    fs_err::write(dir.join("sub dir/b.txt"), b"hello world").unwrap();
    fs_err::write(dir.join("empty"), b"").unwrap();
    Fixture(dir)
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Whether the body was cut short by EOF before Content-Length.
    truncated: bool,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn content_length(&self) -> u64 {
        self.header("content-length").unwrap().parse().unwrap()
    }
}

fn addr(srv: &TestServer) -> String {
    srv.url().trim_start_matches("http://").to_string()
}

fn connect(srv: &TestServer) -> TcpStream {
    let s = TcpStream::connect(addr(srv)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Reads one response; None when the connection is closed before a status line.
fn read_resp(r: &mut BufReader<TcpStream>, head: bool) -> Option<Resp> {
    let mut line = String::new();
    if r.read_line(&mut line).unwrap_or(0) == 0 {
        return None;
    }
    let status = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.trim().to_string(), v.trim().to_string()));
    }
    let mut resp = Resp {
        status,
        headers,
        body: Vec::new(),
        truncated: false,
    };
    if !head {
        let len = resp.content_length();
        r.by_ref().take(len).read_to_end(&mut resp.body).unwrap();
        resp.truncated = (resp.body.len() as u64) < len;
    }
    Some(resp)
}

fn request(srv: &TestServer, method: &str, path: &str, extra: &[(&str, &str)]) -> Option<Resp> {
    let mut s = connect(srv);
    let mut req = format!("{method} /{path} HTTP/1.1\r\nHost: {}\r\n", addr(srv));
    for (n, v) in extra {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let resp = read_resp(&mut r, method == "HEAD");
    if let Some(resp) = &resp {
        if !resp.truncated {
            // Connection: close was honoured.
            let mut rest = Vec::new();
            r.read_to_end(&mut rest).unwrap();
            assert!(rest.is_empty(), "unexpected trailing bytes");
        }
    }
    resp
}

fn get(srv: &TestServer, path: &str, extra: &[(&str, &str)]) -> Resp {
    request(srv, "GET", path, extra).expect("response")
}

#[test]
fn full_get_has_length_etag_and_is_recorded() {
    let dir = fixture();
    let srv = TestServer::start(&dir.0);
    assert!(srv.url().starts_with("http://127.0.0.1:"));
    assert!(!srv.url().ends_with('/'));

    let r = get(&srv, "a.bin", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.content_length(), FILE_LEN as u64);
    assert_eq!(r.body, content());
    let etag = r.header("etag").unwrap();
    assert!(etag.len() > 2 && etag.starts_with('"') && etag.ends_with('"'));
    assert!(r.header("last-modified").unwrap().ends_with(" GMT"));
    assert_eq!(r.header("accept-ranges"), Some("bytes"));
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));

    // Stable ETag across requests; HEAD has the same headers and no body.
    let h = request(&srv, "HEAD", "a.bin", &[]).unwrap();
    assert_eq!(h.status, 200);
    assert_eq!(h.header("etag"), Some(etag));
    assert_eq!(h.content_length(), FILE_LEN as u64);

    // Percent-decoding, 404s, '..' refused.
    let b = get(&srv, "sub%20dir/b.txt?x=1", &[]);
    assert_eq!((b.status, &b.body[..]), (200, &b"hello world"[..]));
    assert_eq!(get(&srv, "missing", &[]).status, 404);
    assert_eq!(get(&srv, "sub%20dir", &[]).status, 404);
    assert_eq!(get(&srv, "sub%20dir/../a.bin", &[]).status, 404);
    assert_eq!(get(&srv, "%2e%2e/server-selftest", &[]).status, 404);
    let e = get(&srv, "empty", &[]);
    assert_eq!((e.status, e.body.len()), (200, 0));

    let reqs = srv.requests();
    assert_eq!(reqs.len(), 8);
    assert_eq!(reqs[0].method, "GET");
    assert_eq!(reqs[0].path, "a.bin");
    assert_eq!(reqs[0].status, 200);
    assert_eq!(reqs[0].body_bytes, FILE_LEN as u64);
    assert_eq!(reqs[1].method, "HEAD");
    assert_eq!(reqs[1].body_bytes, 0);
    assert_eq!(reqs[2].path, "sub dir/b.txt");
    assert_eq!(reqs[3].status, 404);
    assert_eq!(srv.bytes_sent("a.bin"), FILE_LEN as u64);
    assert_eq!(srv.bytes_sent("b.txt"), 11);
    assert_eq!(srv.bytes_sent(""), FILE_LEN as u64 + 11);
    srv.clear_requests();
    assert!(srv.requests().is_empty());
    assert_eq!(srv.bytes_sent(""), 0);
}

#[test]
fn range_requests() {
    let dir = fixture();
    let srv = TestServer::start(&dir.0);
    let data = content();

    let r = get(&srv, "a.bin", &[("range", "bytes=1000-1999")]);
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 1000-1999/{FILE_LEN}").as_str())
    );
    assert_eq!(r.body, &data[1000..2000]);

    let r = get(&srv, "a.bin", &[("RANGE", "bytes=150000-")]);
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes 150000-{}/{FILE_LEN}", FILE_LEN - 1).as_str())
    );
    assert_eq!(r.body, &data[150_000..]);

    // End past the file is clamped.
    let r = get(&srv, "a.bin", &[("Range", "bytes=199990-999999")]);
    assert_eq!((r.status, &r.body[..]), (206, &data[199_990..]));

    // Start at or past the end: 416.
    let r = get(&srv, "a.bin", &[("Range", &format!("bytes={FILE_LEN}-"))]);
    assert_eq!(r.status, 416);
    assert_eq!(
        r.header("content-range"),
        Some(format!("bytes */{FILE_LEN}").as_str())
    );
    assert!(r.body.is_empty());

    // If-Range: matching ETag honours the range, another one gives 200.
    let etag = get(&srv, "a.bin", &[]).header("etag").unwrap().to_string();
    let r = get(
        &srv,
        "a.bin",
        &[("Range", "bytes=10-"), ("If-Range", etag.as_str())],
    );
    assert_eq!((r.status, &r.body[..]), (206, &data[10..]));
    let r = get(
        &srv,
        "a.bin",
        &[("Range", "bytes=10-"), ("if-range", "\"other\"")],
    );
    assert_eq!((r.status, r.body.len()), (200, FILE_LEN));

    let reqs = srv.requests();
    assert_eq!(reqs[0].range.as_deref(), Some("bytes=1000-1999"));
    assert_eq!(reqs[0].body_bytes, 1000);
    assert_eq!(reqs[6].if_range.as_deref(), Some("\"other\""));
}

#[test]
fn ignore_range_fault() {
    let dir = fixture();
    let srv = TestServer::start(&dir.0);
    srv.fault("a.bin", Fault::IgnoreRange);
    let r = get(&srv, "a.bin", &[("Range", "bytes=100-")]);
    assert_eq!(r.status, 200);
    assert!(r.header("content-range").is_none());
    assert_eq!(r.body, content());
    // Persistent until cleared.
    assert_eq!(get(&srv, "a.bin", &[("Range", "bytes=100-")]).status, 200);
    srv.clear_faults();
    assert_eq!(get(&srv, "a.bin", &[("Range", "bytes=100-")]).status, 206);
}

#[test]
fn status500_twice_then_ok() {
    let dir = fixture();
    let srv = TestServer::start(&dir.0);
    srv.fault("nomatch", Fault::Down);
    srv.fault("a.bin", Fault::Status500 { times: 2 });
    // HEAD does not consume the counted fault.
    assert_eq!(request(&srv, "HEAD", "a.bin", &[]).unwrap().status, 200);
    assert_eq!(get(&srv, "sub%20dir/b.txt", &[]).status, 200);
    assert_eq!(get(&srv, "a.bin", &[]).status, 500);
    assert_eq!(get(&srv, "a.bin", &[]).status, 500);
    let r = get(&srv, "a.bin", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), FILE_LEN);
    let statuses: Vec<u16> = srv.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 500, 500, 200]);
    assert_eq!(srv.bytes_sent("a.bin"), FILE_LEN as u64);
}

#[test]
fn reset_after_delivers_exact_bytes_then_eof() {
    let dir = fixture();
    let srv = TestServer::start(&dir.0);
    srv.fault(
        "",
        Fault::ResetAfter {
            after: 70_000,
            times: 1,
        },
    );
    let mut s = connect(&srv);
    // Keep-alive request: the server must close on its own.
    s.write_all(b"GET /a.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut r = BufReader::new(s);
    let resp = read_resp(&mut r, false).unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.content_length(), FILE_LEN as u64);
    assert!(resp.truncated);
    assert_eq!(resp.body, &content()[..70_000]);
    let mut rest = Vec::new();
    assert_eq!(r.read_to_end(&mut rest).unwrap_or(0), 0);

    // Range + reset, then the fault is exhausted.
    srv.fault("a.bin", Fault::ResetAfter { after: 5, times: 1 });
    let r = get(&srv, "a.bin", &[("Range", "bytes=100-")]);
    assert_eq!((r.status, r.truncated), (206, true));
    assert_eq!(r.body, &content()[100..105]);
    let r = get(&srv, "a.bin", &[("Range", "bytes=100-")]);
    assert_eq!((r.status, r.truncated), (206, false));

    assert_eq!(
        srv.bytes_sent("a.bin"),
        70_000 + 5 + (FILE_LEN as u64 - 100)
    );
    let reqs = srv.requests();
    assert_eq!(reqs[0].body_bytes, 70_000);
    assert_eq!(reqs[1].body_bytes, 5);
}

#[test]
fn keep_alive_and_pipelining() {
    let dir = fixture();
    let srv = TestServer::start(&dir.0);
    let mut s = connect(&srv);
    s.write_all(
        b"GET /sub%20dir/b.txt HTTP/1.1\r\nhost: x\r\n\r\n\
          get /nope HTTP/1.1\r\nHost: x\r\n\r\n\
          HEAD /a.bin HTTP/1.1\r\nHost: x\r\n\r\n\
          GET /a.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-9\r\nconnection: Close\r\n\r\n",
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let a = read_resp(&mut r, false).unwrap();
    assert_eq!((a.status, &a.body[..]), (200, &b"hello world"[..]));
    assert_eq!(a.header("connection"), Some("keep-alive"));
    let b = read_resp(&mut r, false).unwrap();
    assert_eq!(b.status, 405); // methods are case-sensitive
    let c = read_resp(&mut r, true).unwrap();
    assert_eq!(c.status, 200);
    let d = read_resp(&mut r, false).unwrap();
    assert_eq!((d.status, &d.body[..]), (206, &content()[..10]));
    assert_eq!(d.header("connection"), Some("close"));
    assert!(read_resp(&mut r, false).is_none());
    assert_eq!(srv.requests().len(), 4);
}

#[test]
fn stall_does_not_block_other_connections() {
    let dir = fixture();
    let srv = TestServer::start(&dir.0);
    srv.fault(
        "a.bin",
        Fault::Stall {
            stall: Duration::from_millis(1500),
        },
    );
    let mut s = connect(&srv);
    s.write_all(b"GET /a.bin HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut r = BufReader::new(s);
    let start = Instant::now();
    // Headers arrive immediately.
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"));
    // Another connection is served meanwhile.
    let b = get(&srv, "sub%20dir/b.txt", &[]);
    assert_eq!(b.status, 200);
    assert!(start.elapsed() < Duration::from_millis(1000));
    // The body is stalled.
    let mut skip = String::new();
    while r.read_line(&mut skip).unwrap() > 2 {
        skip.clear();
    }
    let mut byte = [0u8; 1];
    let err = r.read(&mut byte).unwrap_err();
    assert!(matches!(
        err.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    ));
    r.get_ref()
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut body = Vec::new();
    r.read_to_end(&mut body).unwrap();
    assert_eq!(body, content());
    assert!(start.elapsed() >= Duration::from_millis(1400));
}

#[test]
fn tamper_flips_one_byte() {
    let dir = fixture();
    let srv = TestServer::start(&dir.0);
    srv.fault("a.bin", Fault::Tamper);
    let good = content();
    let r = get(&srv, "a.bin", &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), good.len());
    let diffs: Vec<usize> = (0..good.len()).filter(|&i| r.body[i] != good[i]).collect();
    assert_eq!(diffs, [FILE_LEN / 2]);
    // Range over the tampered byte gets the tampered slice.
    let r = get(&srv, "a.bin", &[("Range", "bytes=99990-100009")]);
    assert_eq!(r.body, &get(&srv, "a.bin", &[]).body[99_990..100_010]);
    assert_ne!(r.body, &good[99_990..100_010]);
}

#[test]
fn down_closes_without_response() {
    let dir = fixture();
    let srv = TestServer::start(&dir.0);
    srv.fault("", Fault::Down);
    assert!(request(&srv, "GET", "a.bin", &[]).is_none());
    let reqs = srv.requests();
    assert_eq!((reqs.len(), reqs[0].status), (1, 0));
    srv.clear_faults();
    assert_eq!(get(&srv, "a.bin", &[]).status, 200);
}

#[test]
fn drop_stops_the_server() {
    let dir = fixture();
    let srv = TestServer::start(&dir.0);
    let a = addr(&srv);
    let start = Instant::now();
    drop(srv);
    assert!(start.elapsed() < Duration::from_secs(2));
    assert!(TcpStream::connect(a).is_err());
}

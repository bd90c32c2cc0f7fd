//! Reading a request: its request line and headers, within a size bound,
//! and the decoded path its target names.

use std::io::{self, BufRead, BufReader, Read};
use std::net::TcpStream;

/// The most a request line and its headers may take together.
const MAX_HEADER_BYTES: usize = 64 * 1024;

/// A request's line and headers, as read.
pub(super) struct Parsed {
    pub(super) method: String,
    pub(super) target: String,
    pub(super) http10: bool,
    headers: Vec<(String, String)>,
}

impl Parsed {
    /// The first value of header `name` (any case).
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether any comma-separated value of header `name` is `token` (any
    /// case), as in `Connection: close`.
    pub(super) fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }
}

/// What reading the next request found.
pub(super) enum ReadOutcome {
    Request(Parsed),
    /// The client closed the connection (before or within a request).
    Eof,
    /// Not an HTTP/1.x request line.
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

/// Reads the next request's line and headers; headers longer than
/// [`MAX_HEADER_BYTES`] are an `InvalidData` error.
pub(super) fn read_request(r: &mut BufReader<TcpStream>) -> io::Result<ReadOutcome> {
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

/// `%XX` escapes decoded; `None` for a broken escape or bytes that are not
/// UTF-8.
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
pub(super) fn target_path(target: &str) -> String {
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

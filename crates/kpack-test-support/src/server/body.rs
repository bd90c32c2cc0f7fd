//! Writing a response's body: the file's bytes as asked for, or as a fault
//! shapes them (cut short, stalled, tampered, dripped, throttled, without
//! end), every byte counted in the request log.

use super::fault::Fault;
use super::head::http_date;
use super::state::Shared;
use fs_err::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::TcpStream;
use std::time::{Duration, SystemTime};

/// The most read from a file (or written as filler) at a time.
const CHUNK: usize = 64 * 1024;

/// Where a response's body lies in its file.
pub(super) struct Span {
    /// The status sent: 200 for the whole file, 206 for a range.
    pub(super) status: u16,
    /// The first byte the response declares.
    pub(super) start: u64,
    /// How many bytes the response declares.
    pub(super) len: u64,
    /// The file's size.
    pub(super) total: u64,
}

/// Sends the body of a response whose head has been written: `span` of
/// `file`, as `fault` (if any) shapes it, counted in request `id`. Returns
/// whether the connection may be kept.
pub(super) fn send_shaped(
    file: &mut File,
    w: &mut TcpStream,
    shared: &Shared,
    id: u64,
    fault: Option<&Fault>,
    span: Span,
) -> io::Result<bool> {
    let (send, drop_after) = match fault {
        Some(Fault::ResetAfter { after, .. }) => ((*after).min(span.len), true),
        Some(Fault::RangeFromStart { cut_after }) if span.status == 200 => {
            ((*cut_after).min(span.len), true)
        }
        _ => (span.len, false),
    };
    let start = match fault {
        Some(Fault::RangeFromStart { .. }) => 0,
        _ => span.start,
    };
    if let Some(Fault::Stall { stall }) = fault {
        std::thread::sleep(*stall);
    }
    let tamper_at = (fault == Some(&Fault::Tamper) && span.total > 0).then_some(span.total / 2);

    file.seek(SeekFrom::Start(start))?;
    match fault {
        Some(Fault::Drip { every }) => drip(file, w, shared, id, send, (1, *every)),
        Some(Fault::Throttle { bytes_per_second }) => {
            let chunk = (bytes_per_second / 20).max(1);
            drip(
                file,
                w,
                shared,
                id,
                send,
                (chunk, Duration::from_millis(50)),
            )
        }
        _ => {
            let sent = send_body(file, w, shared, id, start..start + send, tamper_at)?;
            Ok(sent && !drop_after)
        }
    }
}

/// Serves an endless or oversized body: `file`'s bytes, then filler, with
/// `Content-Length` only when the fault declares it; the connection is
/// closed afterwards. The bytes written are counted in request `id`.
pub(super) fn serve_unbounded(
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

/// Sends `len` bytes of `file` `chunk` bytes every `every`, counted in
/// request `id`; stops when the client goes away.
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

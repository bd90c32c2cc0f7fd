//! One connection: its requests read in turn and each served (logged,
//! faulted if a fault matches, answered from the file it names) until the
//! client or a fault ends it.

use super::body::{send_shaped, serve_unbounded, Span};
use super::fault::Fault;
use super::files::{open, resolve, validators};
use super::head::write_head;
use super::parse::{read_request, target_path, Parsed, ReadOutcome};
use super::range::{if_range_holds, parse_range, status_and_range, RangeSpec};
use super::state::{Request, Shared};
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

/// Serves the requests of one connection until it is closed: by the
/// client, by `Connection: close` or HTTP/1.0, by a request this server
/// refuses (400, 501), or by a fault.
pub(super) fn handle_connection(stream: TcpStream, shared: &Shared) -> io::Result<()> {
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

/// Serves one request.  Returns Ok(false) when the connection must be dropped.
fn serve(p: &Parsed, w: &mut TcpStream, shared: &Shared, close: bool) -> io::Result<bool> {
    let seen = Request {
        method: p.method.clone(),
        path: target_path(&p.target),
        range: p.header("range").map(str::to_string),
        if_range: p.header("if-range").map(str::to_string),
        status: 0,
        body_bytes: 0,
    };
    let record = |status: u16| {
        shared.record(Request {
            status,
            ..seen.clone()
        })
    };
    let path = seen.path.as_str();
    // Logs `status` and answers it with `headers` and no body.
    let answer = |w: &mut TcpStream, status: u16, headers: &[(&str, String)]| {
        record(status);
        write_head(w, status, headers, 0, close)?;
        Ok(true)
    };

    let is_head = p.method == "HEAD";
    if p.method != "GET" && !is_head {
        return answer(w, 405, &[("Allow", "GET, HEAD".into())]);
    }

    let fault = shared.take_fault(&p.method, path);
    match &fault {
        Some(Fault::Down) => {
            record(0);
            let _ = w.shutdown(Shutdown::Both);
            return Ok(false);
        }
        Some(Fault::Status500 { .. }) => return answer(w, 500, &[]),
        Some(fault @ (Fault::Endless | Fault::Oversized { .. })) => {
            let file = resolve(&shared.root, path).and_then(|fp| fs_err::read(fp).ok());
            let id = record(200);
            return serve_unbounded(w, fault, file.unwrap_or_default(), shared, id);
        }
        _ => {}
    }

    let Some((mut file, md, media)) = open(p, &shared.root, path) else {
        return answer(w, 404, &[]);
    };

    let total = md.len();
    let (etag, last_modified) = validators(&md);
    let honour_range = fault != Some(Fault::IgnoreRange)
        && if_range_holds(seen.if_range.as_deref(), &etag, &last_modified);
    let spec = match seen.range.as_deref() {
        Some(range) if honour_range => parse_range(range, total),
        _ => RangeSpec::Ignore,
    };

    let mut headers = vec![
        ("Content-Type", media.to_string()),
        ("Accept-Ranges", "bytes".to_string()),
        ("ETag", etag),
        ("Last-Modified", last_modified),
    ];
    let Some((status, start, len)) = status_and_range(spec, total, &mut headers) else {
        return answer(w, 416, &headers);
    };

    let id = record(status);
    write_head(w, status, &headers, len, close)?;
    if is_head {
        return Ok(true);
    }
    let span = Span {
        status,
        start,
        len,
        total,
    };
    send_shaped(&mut file, w, shared, id, fault.as_ref(), span)
}

//! A response's head: the status line, `Date`, the headers given,
//! `Content-Length` and `Connection`.

use std::io::{self, Write};
use std::net::TcpStream;
use std::time::{SystemTime, UNIX_EPOCH};

/// The reason phrase for each status this server sends.
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

/// Writes and flushes a response head; `close` says whether the connection
/// ends after this response.
pub(super) fn write_head(
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

/// IMF-fixdate, e.g. "Sun, 06 Nov 1994 08:49:37 GMT".
pub(super) fn http_date(t: SystemTime) -> String {
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

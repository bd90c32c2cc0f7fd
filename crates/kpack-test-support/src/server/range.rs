//! Byte ranges: which part of a file a `Range` header asks for, whether an
//! `If-Range` still allows it, and the status and `Content-Range` answering
//! it.

/// What a `Range` header asks of a file.
pub(super) enum RangeSpec {
    /// No range (or one this server does not serve): the whole file.
    Ignore,
    /// A range wholly past the file's end: 416.
    Unsatisfiable,
    /// Inclusive.
    Range(u64, u64),
}

/// Whether an `If-Range` (if any) still names the file: a strong ETag or
/// the date; a weak ETag never does.
pub(super) fn if_range_holds(if_range: Option<&str>, etag: &str, last_modified: &str) -> bool {
    match if_range.map(str::trim) {
        None => true,
        Some(ir) if ir.starts_with('"') => ir == etag,
        Some(ir) if ir.starts_with("W/") => false,
        Some(ir) => ir == last_modified,
    }
}

/// The status, first byte and length of the response for `spec`, with
/// the Content-Range it needs; `None` for an unsatisfiable range (416, its
/// headers then replace `headers`).
pub(super) fn status_and_range(
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

/// Single byte ranges only (`N-`, `N-M`, `-SUFFIX`); anything else is ignored
/// (served as a full 200), as RFC 9110 allows.
pub(super) fn parse_range(value: &str, total: u64) -> RangeSpec {
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

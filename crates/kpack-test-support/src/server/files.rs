//! The file a request's path names under the served root, served as a
//! static web server serves a package index, and how it is described: its
//! media type and its validators (ETag, Last-Modified).

use super::head::http_date;
use super::parse::Parsed;
use fs_err::File;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// A package index's JSON page type (PEP 691).
const PYPI_JSON: &str = "application/vnd.pypi.simple.v1+json";

/// The file request `p` for `path` names, opened, with its metadata and
/// media type; `None` when there is no such file (or it is not a file).
pub(super) fn open(
    p: &Parsed,
    root: &Path,
    path: &str,
) -> Option<(File, std::fs::Metadata, &'static str)> {
    let json = negotiated_json(p, root, path);
    let media = match json {
        Some(_) => PYPI_JSON,
        None => content_type(path),
    };
    let fp = json.or_else(|| resolve(root, path))?;
    let f = File::open(&fp).ok()?;
    let md = f.metadata().ok()?;
    md.is_file().then_some((f, md, media))
}

/// HTML pages (package indexes, find-links pages) as HTML, the rest as bytes.
fn content_type(path: &str) -> &'static str {
    if path.is_empty() || path.ends_with('/') || path.ends_with(".html") {
        "text/html"
    } else {
        "application/octet-stream"
    }
}

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
pub(super) fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
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

/// A file's validators: an ETag from its size and time, and Last-Modified.
pub(super) fn validators(md: &std::fs::Metadata) -> (String, String) {
    let mtime = md.modified().unwrap_or(UNIX_EPOCH);
    let nanos = mtime
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    (format!("\"{:x}-{nanos:x}\"", md.len()), http_date(mtime))
}

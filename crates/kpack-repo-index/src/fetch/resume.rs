//! Resuming over HTTP: the ranged request for the rest of a partial
//! download, where the response's bytes start (`Content-Range`), the size
//! it declares, and where the partial file came from (for `If-Range`).

use fs_err::File;

use super::failure::{AttemptError, Failure};
use super::{Cache, Progress, Wanted};

/// The GET, asking for the rest of the file when part of it is here; the
/// validator goes only to the server that gave it (the bytes are pinned by
/// hash either way).
pub(super) fn resume_request(
    http: &reqwest::Client,
    cache: &Cache,
    url: &str,
    item: &Wanted,
    have: u64,
) -> reqwest::RequestBuilder {
    let request = http.get(url);
    if have == 0 {
        return request;
    }
    let request = request.header(reqwest::header::RANGE, format!("bytes={have}-"));
    match read_origin(cache, item) {
        Some((origin, validator)) if origin == url && !validator.is_empty() => {
            request.header(reqwest::header::IF_RANGE, validator)
        }
        _ => request,
    }
}

/// Where the response's bytes start in the file, from its status; a status
/// that brings no bytes is the attempt's failure.
pub(super) fn resume_point(
    response: &reqwest::Response,
    have: u64,
    url: &str,
    file: &File,
    progress: &dyn Progress,
) -> Result<u64, Failure> {
    let status = response.status();
    match status.as_u16() {
        206 if have > 0 => {
            let start = content_range(response).and_then(|(start, _)| start.parse::<u64>().ok());
            if start != Some(have) {
                file.set_len(0)?;
                return Err(Failure::Retry(AttemptError::DownloadRange {
                    asked: have,
                    got: start,
                }));
            }
            Ok(have)
        }
        200 | 206 => {
            if have > 0 {
                progress.note(&format!(
                    "{url}: the server sent the whole file instead of resuming at byte {have}"
                ));
            }
            Ok(0)
        }
        416 => {
            file.set_len(0)?;
            Err(Failure::Retry(AttemptError::Status(status)))
        }
        _ => Err(Failure::status(status)),
    }
}

/// The start and the total of a `Content-Range: bytes START-END/TOTAL`.
pub(super) fn content_range(response: &reqwest::Response) -> Option<(&str, &str)> {
    let value = response
        .headers()
        .get(reqwest::header::CONTENT_RANGE)?
        .to_str()
        .ok()?
        .strip_prefix("bytes ")?;
    let (range, total) = value.split_once('/')?;
    Some((range.split('-').next()?, total))
}

/// The whole file's size as the server declares it: another size is not
/// the pinned file, and no retry will make it so.
pub(super) fn check_declared_size(
    response: &reqwest::Response,
    have: u64,
    item: &Wanted,
) -> Result<(), Failure> {
    let declared = if have > 0 {
        content_range(response).and_then(|(_, total)| total.parse::<u64>().ok())
    } else {
        response.content_length()
    };
    match declared {
        Some(declared) if declared != item.size => {
            Err(Failure::integrity(AttemptError::WrongSize {
                actual: declared,
                pinned: item.size,
            }))
        }
        _ => Ok(()),
    }
}

/// Keeps the URL and the server's validator (ETag or Last-Modified) beside
/// the partial file, for `If-Range` when it is resumed.
pub(super) fn record_origin(
    cache: &Cache,
    item: &Wanted,
    url: &str,
    response: &reqwest::Response,
) -> Result<(), Failure> {
    let validator = [reqwest::header::ETAG, reqwest::header::LAST_MODIFIED]
        .iter()
        .find_map(|name| response.headers().get(name))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    fs_err::write(
        cache.partial_origin(&item.sha256),
        format!("{url}\n{validator}\n"),
    )?;
    Ok(())
}

/// Where a partial file came from: the URL and its validator.
fn read_origin(cache: &Cache, item: &Wanted) -> Option<(String, String)> {
    let text = fs_err::read_to_string(cache.partial_origin(&item.sha256)).ok()?;
    let (url, validator) = text.split_once('\n')?;
    Some((url.to_owned(), validator.trim_end().to_owned()))
}

//! Where the installer finds distributions, as kpack-get reads them to
//! choose variant wheels: local find-links directories, find-links pages
//! over HTTP, and package indexes given with `--index-url` /
//! `--extra-index-url` (PEP 503 pages, `{index}/{name}/`).

use std::io::Write;
use std::path::{Path, PathBuf};

use kpack_repo_index::fetch::{Client, Mirror, Progress};
use kpack_repo_index::limits::Cap;
use kpack_repo_index::{HashingWriter, Sha256};
use kpack_wheel::DistName;
use reqwest::Url;

use super::PipError;

/// One place the installer arguments name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkSource {
    /// A local directory of files.
    Dir(PathBuf),
    /// An HTML page of links.
    Page(Url),
    /// A package index: each project at `{url}/{name}/`.
    Index(Url),
}

/// A file a source offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkedFile {
    /// On this machine.
    File(PathBuf),
    /// To download.
    Url(Url),
}

/// A file name and where it is, with what the page says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub filename: String,
    pub location: LinkedFile,
    /// The digest the page gives (`#sha256=...`): the file must have it.
    pub sha256: Option<Sha256>,
    /// The size the page gives (PEP 700): the file is read no further.
    pub size: Option<u64>,
}

/// What a fetched file is, for the bound it is read within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A small metadata file (`variants.json`): the index cap.
    Index,
    /// A wheel: the size the page gives, else the wheel cap.
    Wheel,
}

/// The value of an option in its spellings (`--opt V`, `--opt=V`, `-sV`, `-s V`).
fn option_values(args: &[String], long: &str, short: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut iter = args.iter();
    let equals = format!("{long}=");
    while let Some(arg) = iter.next() {
        if arg == long || Some(arg.as_str()) == short {
            out.extend(iter.next().cloned());
        } else if let Some(value) = arg.strip_prefix(&equals) {
            out.push(value.to_owned());
        } else if let Some(value) = short
            .and_then(|s| arg.strip_prefix(s))
            .filter(|v| !v.is_empty() && !v.starts_with('-'))
        {
            out.push(value.to_owned());
        }
    }
    out
}

/// The sources among installer arguments, find-links first.
pub fn sources(args: &[String]) -> Vec<LinkSource> {
    let mut out = Vec::new();
    for value in option_values(args, "--find-links", Some("-f")) {
        if let Some(path) = value.strip_prefix("file://") {
            out.push(LinkSource::Dir(PathBuf::from(path)));
        } else if let Some(url) = Url::parse(&value)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
        {
            out.push(LinkSource::Page(url));
        } else {
            out.push(LinkSource::Dir(PathBuf::from(value)));
        }
    }
    let indexes = option_values(args, "--index-url", Some("-i"))
        .into_iter()
        .chain(option_values(args, "--extra-index-url", None));
    for value in indexes {
        if let Ok(mut url) = Url::parse(&value) {
            if !url.path().ends_with('/') {
                url.set_path(&format!("{}/", url.path()));
            }
            out.push(LinkSource::Index(url));
        }
    }
    out.retain(|s| !matches!(s, LinkSource::Dir(d) if !d.is_dir()));
    out
}

/// Reads pages and downloads files through the one fetch path of
/// [`Client`]: the retries, resume, failover and low-speed limit every
/// other download gets; retries are told to the progress.
pub struct Fetcher {
    client: Client,
    progress: Box<dyn Progress>,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    pub fn new(client: Client, progress: Box<dyn Progress>) -> Fetcher {
        Fetcher { client, progress }
    }

    /// The files a source offers for `dist` (everything a page or directory
    /// lists; the project page of an index); none when the page is absent.
    pub fn links(&mut self, source: &LinkSource, dist: &DistName) -> Result<Vec<Link>, PipError> {
        let page = match source {
            LinkSource::Dir(dir) => return dir_links(dir),
            LinkSource::Page(url) => url.clone(),
            LinkSource::Index(url) => {
                url.join(&format!("{dist}/"))
                    .map_err(|e| PipError::Requirement {
                        text: url.to_string(),
                        reason: e.to_string(),
                    })?
            }
        };
        let (mirror, rest) = split_url(&page);
        let cap = Cap::Index(self.client.options().limits.index_size);
        let accept = matches!(source, LinkSource::Index(_)).then_some(SIMPLE_ACCEPT);
        let fetched = self
            .client
            .fetch_page(&[mirror], &rest, cap, accept, self.progress.as_ref())
            .map_err(|source| PipError::Fetch {
                url: page.to_string(),
                source,
            })?;
        let Some(bytes) = fetched else {
            return Ok(Vec::new());
        };
        // A JSON page (PEP 691) is an object; an HTML one never starts so.
        if bytes.trim_ascii_start().starts_with(b"{") {
            return json_links(&bytes, &page);
        }
        Ok(anchors(&String::from_utf8_lossy(&bytes), &page))
    }

    /// The file of a link on this machine: itself, or downloaded into `dir`
    /// under `name`; either way no longer than the bound for `kind` and
    /// with the digest the page gives, if it gives one.
    pub fn fetch(
        &mut self,
        link: &Link,
        kind: FileKind,
        dir: &Path,
        name: &str,
    ) -> Result<PathBuf, PipError> {
        let limits = &self.client.options().limits;
        let cap = match (kind, link.size) {
            (FileKind::Index, _) => Cap::Index(limits.index_size),
            (FileKind::Wheel, Some(size)) => Cap::Listed(size),
            (FileKind::Wheel, None) => Cap::Wheel(limits.wheel_size),
        };
        let target = dir.join(name);
        let fetched = match &link.location {
            LinkedFile::File(path) => local(path, &target, cap),
            LinkedFile::Url(url) => self.download(url, &target, cap),
        };
        let checked = fetched.and_then(|sha256| match (link.sha256, sha256) {
            (Some(expected), Some(actual)) if expected != actual => Err(PipError::HashMismatch {
                location: link.location.to_string(),
                expected,
                actual,
            }),
            _ => Ok(target.clone()),
        });
        if checked.is_err() {
            let _ = fs_err::remove_file(&target);
        }
        checked
    }

    /// Streams `url` into `target`, at most `cap` bytes; its digest.
    fn download(&mut self, url: &Url, target: &Path, cap: Cap) -> Result<Option<Sha256>, PipError> {
        let (mirror, rest) = split_url(url);
        let file = fs_err::File::create(target).map_err(PipError::Io)?;
        let mut hashed = HashingWriter::new(file);
        let found = self
            .client
            .stream(&[mirror], &rest, cap, &mut hashed, self.progress.as_ref())
            .map_err(|source| PipError::Fetch {
                url: url.to_string(),
                source,
            })?;
        if !found {
            return Err(PipError::Gone {
                url: url.to_string(),
            });
        }
        let (sha256, _, mut file) = hashed.finish();
        file.flush().map_err(PipError::Io)?;
        Ok(Some(sha256))
    }
}

/// A file of a local source at `target` (a hard link, else a copy), no
/// longer than `cap` (a directory gives no digest: `None`).
fn local(path: &Path, target: &Path, cap: Cap) -> Result<Option<Sha256>, PipError> {
    let length = fs_err::metadata(path).map_err(PipError::Io)?.len();
    cap.check(length).map_err(|source| PipError::TooLarge {
        location: path.display().to_string(),
        source,
    })?;
    if fs_err::hard_link(path, target).is_err() {
        fs_err::copy(path, target).map_err(PipError::Io)?;
    }
    Ok(None)
}

impl std::fmt::Display for LinkedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkedFile::File(path) => write!(f, "{}", path.display()),
            LinkedFile::Url(url) => write!(f, "{url}"),
        }
    }
}

/// What a package index is asked for: its JSON pages (PEP 691), which
/// give each file's size (PEP 700), before its HTML ones.
const SIMPLE_ACCEPT: &str = "application/vnd.pypi.simple.v1+json, \
                             application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01";

/// A project's JSON page (PEP 691), as far as choosing variants reads it.
#[derive(Debug, serde::Deserialize)]
struct JsonPage {
    files: Vec<JsonFile>,
}

#[derive(Debug, serde::Deserialize)]
struct JsonFile {
    filename: String,
    url: String,
    #[serde(default)]
    hashes: std::collections::BTreeMap<String, String>,
    /// PEP 700; absent from older indexes.
    size: Option<u64>,
}

/// The files of a project's JSON page, their URLs resolved against the
/// page, with the digest and size it gives.
fn json_links(bytes: &[u8], page: &Url) -> Result<Vec<Link>, PipError> {
    let parsed: JsonPage = serde_json::from_slice(bytes).map_err(|source| PipError::Page {
        url: page.to_string(),
        source,
    })?;
    Ok(parsed
        .files
        .into_iter()
        .filter_map(|file| {
            let mut url = page.join(&file.url).ok()?;
            url.set_fragment(None);
            Some(Link {
                filename: file.filename,
                location: LinkedFile::Url(url),
                sha256: file.hashes.get("sha256").and_then(|hex| hex.parse().ok()),
                size: file.size,
            })
        })
        .collect())
}

/// `url` as the fetch path takes it: a base (up to its path's last `/`)
/// and the rest (the last segment and the query), fragment dropped.
fn split_url(url: &Url) -> (Mirror, String) {
    let mut url = url.clone();
    url.set_fragment(None);
    let text = url.as_str();
    let path_end = text.find('?').unwrap_or(text.len());
    let cut = text[..path_end]
        .rfind('/')
        .map_or(path_end, |slash| slash + 1);
    (Mirror::http(text[..cut].to_owned()), text[cut..].to_owned())
}

fn dir_links(dir: &Path) -> Result<Vec<Link>, PipError> {
    let mut out = Vec::new();
    for entry in fs_err::read_dir(dir).map_err(PipError::Io)? {
        let path = entry.map_err(PipError::Io)?.path();
        if let Some(filename) = path.file_name().and_then(|n| n.to_str()) {
            out.push(Link {
                filename: filename.to_owned(),
                location: LinkedFile::File(path.clone()),
                sha256: None,
                size: None,
            });
        }
    }
    out.sort_by(|a, b| a.filename.cmp(&b.filename));
    Ok(out)
}

/// The `href`s of an HTML page's anchors, resolved against the page, with
/// their file names (fragments such as `#sha256=...` dropped).
fn anchors(html: &str, page: &Url) -> Vec<Link> {
    let mut out = Vec::new();
    for piece in html.split("href=").skip(1) {
        let Some(quote) = piece.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            continue;
        };
        let Some(value) = piece[1..].split(quote).next() else {
            continue;
        };
        let value = value.replace("&amp;", "&");
        let Ok(mut url) = page.join(&value) else {
            continue;
        };
        let sha256 = url
            .fragment()
            .and_then(|fragment| fragment.strip_prefix("sha256="))
            .and_then(|hex| hex.parse().ok());
        url.set_fragment(None);
        let filename = url
            .path_segments()
            .and_then(|mut s| s.next_back())
            .unwrap_or("")
            .to_owned();
        let filename = percent_decoded(&filename);
        if !filename.is_empty() {
            out.push(Link {
                filename,
                location: LinkedFile::Url(url),
                sha256,
                size: None,
            });
        }
    }
    out
}

/// `%XX` escapes decoded (a file name in a URL path).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = || {
            std::str::from_utf8(bytes.get(i + 1..i + 3)?)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        };
        match (bytes[i], hex()) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_in_every_spelling() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let args: Vec<String> = [
            "--no-index",
            "--find-links",
            &d,
            &format!("--find-links={d}"),
            "-f",
            &d,
            &format!("-f{d}"),
            &format!("--find-links=file://{d}"),
            "--find-links",
            "https://example.org/wheels.html",
            "--find-links",
            "/no/such/dir",
            "-i",
            "https://example.org/simple",
            "--extra-index-url=https://example.org/extra/",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let found = sources(&args);
        assert_eq!(
            found
                .iter()
                .filter(|s| matches!(s, LinkSource::Dir(_)))
                .count(),
            5
        );
        assert!(found.contains(&LinkSource::Page(
            Url::parse("https://example.org/wheels.html").unwrap()
        )));
        assert!(found.contains(&LinkSource::Index(
            Url::parse("https://example.org/simple/").unwrap()
        )));
        assert!(found.contains(&LinkSource::Index(
            Url::parse("https://example.org/extra/").unwrap()
        )));
    }

    #[test]
    fn json_pages_give_each_file_its_digest_and_size() {
        let page = Url::parse("http://host/simple/demo/").unwrap();
        let sha256 = Sha256::of(b"wheel");
        let json = format!(
            r#"{{"meta": {{"api-version": "1.1"}}, "name": "demo", "files": [
                {{"filename": "demo-1.0-py3-none-any.whl", "url": "../../files/demo-1.0-py3-none-any.whl#x",
                  "hashes": {{"sha256": "{sha256}"}}, "size": 5}},
                {{"filename": "demo-1.0-variants.json", "url": "https://cdn.example/v.json", "hashes": {{}}}}
            ]}}"#
        );
        let links = json_links(json.as_bytes(), &page).unwrap();
        assert_eq!(
            links[0],
            Link {
                filename: "demo-1.0-py3-none-any.whl".into(),
                location: LinkedFile::Url(
                    Url::parse("http://host/files/demo-1.0-py3-none-any.whl").unwrap()
                ),
                sha256: Some(sha256),
                size: Some(5),
            }
        );
        assert_eq!((links[1].sha256, links[1].size), (None, None));
        let error = json_links(b"{\"files\": 3}", &page)
            .unwrap_err()
            .to_string();
        assert!(error.contains("http://host/simple/demo/"), "{error}");
    }

    #[test]
    fn anchors_resolve_against_the_page() {
        let page = Url::parse("http://host/simple/demo/").unwrap();
        let html = r#"<html><body>
            <a href="demo-1.0-py3-none-any-gfx1100.whl#sha256=abc">x</a>
            <a href='../../files/demo-1.0-variants.json' data-x="y">y</a>
            <a href="https://cdn.example/demo%2Bx-1.0.whl?a=1&amp;b=2">z</a>
            </body></html>"#;
        let links = anchors(html, &page);
        let names: Vec<&str> = links.iter().map(|l| l.filename.as_str()).collect();
        assert_eq!(
            names,
            [
                "demo-1.0-py3-none-any-gfx1100.whl",
                "demo-1.0-variants.json",
                "demo+x-1.0.whl"
            ]
        );
        assert_eq!(
            links[1].location,
            LinkedFile::Url(Url::parse("http://host/files/demo-1.0-variants.json").unwrap())
        );
        assert_eq!(
            links[2].location,
            LinkedFile::Url(Url::parse("https://cdn.example/demo%2Bx-1.0.whl?a=1&b=2").unwrap())
        );
    }
}

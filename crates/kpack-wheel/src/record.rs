//! `RECORD`: the CSV list of a distribution's files, each with its hash
//! (`sha256=` and the digest in urlsafe base64 without padding) and size,
//! as the wheel format and installed distributions keep it (PEP 376,
//! PEP 627). Installers remove exactly what it lists on uninstall.
//!
//! [`Record`] reads an installed distribution's RECORD and edits it in
//! place: rows not changed are written back byte for byte, a changed row
//! gets its new hash and size, new rows go before RECORD's own row. Any
//! hash algorithm is kept as written; only sha256 is computed.

use std::fmt;
use std::io::Read;
use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sha2::{Digest, Sha256};

/// A RECORD that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("RECORD line {line}: {reason}")]
pub struct RecordError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    #[source]
    pub reason: RecordProblem,
}

/// What is wrong with a line of RECORD.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordProblem {
    #[error("unterminated quote")]
    UnterminatedQuote,
    #[error("not three fields (path, hash, size)")]
    NotThreeFields,
    #[error("hash {0:?} is not algorithm=digest")]
    Hash(String),
    #[error("size {0:?} is not a number")]
    Size(String),
}

/// A file's hash as RECORD writes it: `<algorithm>=<urlsafe base64 digest>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordHash(String);

impl RecordHash {
    /// The hash of a sha256 digest.
    pub fn sha256(digest: &[u8; 32]) -> RecordHash {
        RecordHash(format!("sha256={}", URL_SAFE_NO_PAD.encode(digest)))
    }

    /// The sha256 hash of `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> RecordHash {
        RecordHash::sha256(&Sha256::digest(bytes).into())
    }

    /// The sha256 hash and the size of everything `reader` gives.
    pub fn of_reader(mut reader: impl Read) -> std::io::Result<(RecordHash, u64)> {
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; 1 << 16];
        let mut size = 0u64;
        loop {
            let read = match reader.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => read,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            hasher.update(&buffer[..read]);
            size += read as u64;
        }
        Ok((RecordHash::sha256(&hasher.finalize().into()), size))
    }

    /// The sha256 hash and the size of the file at `path`.
    pub fn of_file(path: &Path) -> std::io::Result<(RecordHash, u64)> {
        RecordHash::of_reader(fs_err::File::open(path)?)
    }

    /// `algorithm=digest` text; `None` when there is no `=` or either side
    /// is empty.
    pub fn parse(text: &str) -> Option<RecordHash> {
        let (algorithm, digest) = text.split_once('=')?;
        (!algorithm.is_empty() && !digest.is_empty()).then(|| RecordHash(text.to_owned()))
    }

    /// The text, `sha256=...`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RecordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One file RECORD lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRow {
    /// The path, relative to the directory holding the `.dist-info`
    /// (`pkg/_ext.so`, `../../../bin/tool` for a script).
    pub path: String,
    /// `None` for RECORD itself and files not hashed (`.pyc`).
    pub hash: Option<RecordHash>,
    pub size: Option<u64>,
    /// The line as read, written back as it was while the row is unchanged.
    line: Option<String>,
}

impl RecordRow {
    /// The row as a CSV line (without the line ending).
    fn to_line(&self) -> String {
        if let Some(line) = &self.line {
            return line.clone();
        }
        format!(
            "{},{},{}",
            csv_field(&self.path),
            self.hash
                .as_ref()
                .map(RecordHash::as_str)
                .unwrap_or_default(),
            self.size.map(|s| s.to_string()).unwrap_or_default()
        )
    }
}

/// A RECORD's rows, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    rows: Vec<RecordRow>,
}

impl Record {
    /// Reads RECORD text. A row that is not three fields, a hash that is
    /// not `algorithm=digest`, or a size that is not a number is an error
    /// naming its line.
    pub fn parse(text: &str) -> Result<Record, RecordError> {
        let mut rows = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.is_empty() {
                continue;
            }
            let bad = |reason| RecordError {
                line: number + 1,
                reason,
            };
            let fields = csv_fields(line).ok_or_else(|| bad(RecordProblem::UnterminatedQuote))?;
            let [path, hash, size] =
                <[String; 3]>::try_from(fields).map_err(|_| bad(RecordProblem::NotThreeFields))?;
            let hash = match hash.as_str() {
                "" => None,
                text => Some(
                    RecordHash::parse(text)
                        .ok_or_else(|| bad(RecordProblem::Hash(text.to_owned())))?,
                ),
            };
            let size = match size.as_str() {
                "" => None,
                text => Some(
                    text.parse()
                        .map_err(|_| bad(RecordProblem::Size(text.to_owned())))?,
                ),
            };
            rows.push(RecordRow {
                path,
                hash,
                size,
                line: Some(line.to_owned()),
            });
        }
        Ok(Record { rows })
    }

    /// Every row, in order.
    pub fn rows(&self) -> &[RecordRow] {
        &self.rows
    }

    /// The row for `path`, if RECORD lists it.
    pub fn get(&self, path: &str) -> Option<&RecordRow> {
        self.rows.iter().find(|row| row.path == path)
    }

    /// Sets the hash and size of `path`, adding a row for it (before
    /// RECORD's own row) when RECORD does not list it yet. Whether anything
    /// changed.
    pub fn set(&mut self, path: &str, hash: Option<RecordHash>, size: Option<u64>) -> bool {
        if let Some(row) = self.rows.iter_mut().find(|row| row.path == path) {
            if row.hash == hash && row.size == size {
                return false;
            }
            row.hash = hash;
            row.size = size;
            row.line = None;
            return true;
        }
        let row = RecordRow {
            path: path.to_owned(),
            hash,
            size,
            line: None,
        };
        let own = self
            .rows
            .iter()
            .position(|row| row.path.ends_with(".dist-info/RECORD"));
        self.rows.insert(own.unwrap_or(self.rows.len()), row);
        true
    }

    /// The RECORD text, one line per row.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        for row in &self.rows {
            text.push_str(&row.to_line());
            text.push('\n');
        }
        text
    }
}

/// Splits one CSV line into fields (`"` quotes, `""` inside quotes), as
/// Python's `csv` module writes them; `None` for an unterminated quote.
pub fn csv_fields(line: &str) -> Option<Vec<String>> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        let current = fields.last_mut()?;
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                current.push('"');
            }
            ('"', true) => quoted = false,
            ('"', false) if current.is_empty() => quoted = true,
            (',', false) => fields.push(String::new()),
            (c, _) => current.push(c),
        }
    }
    (!quoted).then_some(fields)
}

/// A field quoted when it must be, as Python's `csv` module quotes.
pub fn csv_field(value: &str) -> String {
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INSTALLED: &str = "demo/__init__.py,sha256=AAAA,10\r\n\
        \"demo/a,b.so\",sha256=BBBB,20\n\
        demo/__pycache__/__init__.cpython-311.pyc,,\n\
        demo-1.0.dist-info/INSTALLER,sha384=CCCC,4\n\
        demo-1.0.dist-info/RECORD,,\n";

    #[test]
    fn an_unchanged_record_is_written_back_as_read_but_for_line_endings() {
        let record = Record::parse(INSTALLED).unwrap();
        assert_eq!(record.to_text(), INSTALLED.replace("\r\n", "\n"));
        let row = record.get("demo/a,b.so").unwrap();
        assert_eq!(row.hash.as_ref().unwrap().as_str(), "sha256=BBBB");
        assert_eq!(row.size, Some(20));
        let pyc = record
            .get("demo/__pycache__/__init__.cpython-311.pyc")
            .unwrap();
        assert_eq!((pyc.hash.as_ref(), pyc.size), (None, None));
    }

    #[test]
    fn a_changed_row_is_rewritten_and_a_new_one_goes_before_records_own() {
        let mut record = Record::parse(INSTALLED).unwrap();
        let hash = RecordHash::of_bytes(b"fat");
        assert!(record.set("demo/a,b.so", Some(hash.clone()), Some(3)));
        assert!(!record.set("demo/a,b.so", Some(hash.clone()), Some(3)));
        assert!(record.set(
            "demo-1.0.dist-info/kpack/host/demo/a,b.so",
            Some(RecordHash::of_bytes(b"host")),
            Some(4)
        ));
        let text = record.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "demo/__init__.py,sha256=AAAA,10");
        assert_eq!(lines[1], format!("\"demo/a,b.so\",{hash},3"));
        assert!(
            lines[4].starts_with("\"demo-1.0.dist-info/kpack/host/demo/a,b.so\",sha256="),
            "{text}"
        );
        assert_eq!(lines[5], "demo-1.0.dist-info/RECORD,,");
        assert_eq!(
            Record::parse(&text)
                .unwrap()
                .get("demo/a,b.so")
                .unwrap()
                .hash,
            Some(hash)
        );
    }

    #[test]
    fn hashes_are_sha256_in_urlsafe_base64_without_padding() {
        // sha256 of the empty input, as pip writes it.
        let empty = "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU";
        assert_eq!(RecordHash::of_bytes(b"").as_str(), empty);
        assert_eq!(
            RecordHash::of_reader(&b""[..]).unwrap(),
            (RecordHash::parse(empty).unwrap(), 0)
        );
        let data = vec![7u8; 200_000];
        assert_eq!(
            RecordHash::of_reader(&data[..]).unwrap(),
            (RecordHash::of_bytes(&data), 200_000)
        );
    }

    #[test]
    fn malformed_lines_name_their_number() {
        let error = Record::parse("a,sha256=x,1\nb,md5,2\n").unwrap_err();
        assert_eq!(error.line, 2);
        assert!(Record::parse("a,sha256=x\n").is_err());
        assert!(Record::parse("\"a,sha256=x,1\n").is_err());
        assert!(Record::parse("a,sha256=x,one\n").is_err());
    }
}

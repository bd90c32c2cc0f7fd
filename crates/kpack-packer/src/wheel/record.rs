//! `RECORD`: the CSV list of a wheel's files with their sha256 (urlsafe
//! base64, no padding) and size. Read to check the input, written anew for
//! every output wheel.

use std::collections::BTreeMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use kpack_wheel::record::{csv_field, csv_fields};

use super::error::{BadRecord, WheelError};

/// What RECORD says about one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// `sha256=<digest>`, or `None` (RECORD itself, signatures).
    pub hash: Option<String>,
    pub size: Option<u64>,
}

/// `sha256=<urlsafe base64 without padding>` of a digest.
pub fn hash_field(digest: &[u8; 32]) -> String {
    format!("sha256={}", URL_SAFE_NO_PAD.encode(digest))
}

/// Parses RECORD into path -> what it says.
pub fn parse(text: &str) -> Result<BTreeMap<String, Recorded>, WheelError> {
    let mut record = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            continue;
        }
        let bad = |reason| WheelError::BadRecord {
            line: number + 1,
            reason,
        };
        let fields = csv_fields(line).ok_or_else(|| bad(BadRecord::UnterminatedQuote))?;
        let [path, hash, size] =
            <[String; 3]>::try_from(fields).map_err(|_| bad(BadRecord::NotThreeFields))?;
        let hash = (!hash.is_empty()).then_some(hash);
        if let Some(hash) = &hash {
            if !hash.starts_with("sha256=") {
                return Err(bad(BadRecord::NotSha256 {
                    hash: hash.clone(),
                    path,
                }));
            }
        }
        let size = if size.is_empty() {
            None
        } else {
            Some(size.parse().map_err(|_| bad(BadRecord::SizeNotANumber))?)
        };
        if record
            .insert(path.clone(), Recorded { hash, size })
            .is_some()
        {
            return Err(bad(BadRecord::ListedTwice(path)));
        }
    }
    Ok(record)
}

/// A RECORD being written, one line per file in the order written.
#[derive(Debug, Default)]
pub struct RecordWriter {
    text: String,
}

impl RecordWriter {
    /// Adds a file with its digest and size.
    pub fn add(&mut self, path: &str, digest: &[u8; 32], size: u64) {
        let line = format!("{},{},{size}\n", csv_field(path), hash_field(digest));
        self.text.push_str(&line);
    }

    /// The finished RECORD, ending with its own line (no hash, no size).
    pub fn finish(mut self, record_path: &str) -> String {
        self.text
            .push_str(&format!("{},,\n", csv_field(record_path)));
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_records_read_back() {
        let mut writer = RecordWriter::default();
        writer.add("pkg/a,b.py", &[0u8; 32], 5);
        writer.add("pkg/x.so", &[0xffu8; 32], 7);
        let text = writer.finish("pkg-1.dist-info/RECORD");
        assert_eq!(
            text,
            "\"pkg/a,b.py\",sha256=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA,5\n\
             pkg/x.so,sha256=__________________________________________8,7\n\
             pkg-1.dist-info/RECORD,,\n"
        );
        let record = parse(&text).unwrap();
        assert_eq!(record["pkg/a,b.py"].size, Some(5));
        assert_eq!(record["pkg-1.dist-info/RECORD"].hash, None);
    }

    #[test]
    fn malformed_lines_name_their_number() {
        let error = parse("a,sha256=x,1\nb,md5=y,2\n").unwrap_err();
        assert!(error.to_string().starts_with("RECORD line 2:"), "{error}");
        assert!(parse("a,sha256=x\n").is_err());
        assert!(parse("\"a,sha256=x,1\n").is_err());
        assert!(parse("a,sha256=x,one\n").is_err());
    }
}

//! `RECORD`: the CSV list of a wheel's files with their sha256 (urlsafe
//! base64, no padding) and size. Read with kpack-wheel's grammar to check
//! the input (sha256 only, each path once), written anew for every output
//! wheel.

use std::collections::BTreeMap;

use kpack_wheel::record::{csv_field, Record, RecordHash};

use super::error::WheelError;

/// What RECORD says about one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// `None` for RECORD itself and signatures.
    pub hash: Option<RecordHash>,
    pub size: Option<u64>,
}

/// Parses RECORD into path -> what it says: every hash sha256, no path
/// listed twice.
pub fn parse(text: &str) -> Result<BTreeMap<String, Recorded>, WheelError> {
    let parsed = Record::parse(text).map_err(|source| WheelError::BadRecord { source })?;
    let mut record = BTreeMap::new();
    for row in parsed.rows() {
        if let Some(hash) = row
            .hash
            .as_ref()
            .filter(|h| !h.as_str().starts_with("sha256="))
        {
            return Err(WheelError::RecordNotSha256 {
                path: row.path.clone(),
                hash: hash.to_string(),
            });
        }
        let recorded = Recorded {
            hash: row.hash.clone(),
            size: row.size,
        };
        if record.insert(row.path.clone(), recorded).is_some() {
            return Err(WheelError::RecordListedTwice {
                path: row.path.clone(),
            });
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
        let line = format!(
            "{},{},{size}\n",
            csv_field(path),
            RecordHash::sha256(digest)
        );
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
    fn malformed_lines_name_their_number_and_other_hashes_their_path() {
        let error = parse("a,sha256=x,1\nb,y,2\n").unwrap_err();
        assert!(error.to_string().starts_with("RECORD line 2:"), "{error}");
        let error = parse("a,sha256=x,1\nb,md5=y,2\n").unwrap_err();
        assert_eq!(
            error.to_string(),
            "RECORD: hash \"md5=y\" for \"b\": only sha256 is supported"
        );
        let error = parse("a,sha256=x,1\na,sha256=x,1\n").unwrap_err();
        assert_eq!(error.to_string(), "RECORD: \"a\" listed twice");
        assert!(parse("a,sha256=x\n").is_err());
        assert!(parse("\"a,sha256=x,1\n").is_err());
        assert!(parse("a,sha256=x,one\n").is_err());
    }
}

//! `<dist-info>/kpack/materialized.json`: what each of a host
//! distribution's binaries was last materialized from (the targets, and
//! the archives found through its marker: path, size, modification time,
//! inode) and what was written (hash and size), so that a sync with
//! nothing changed rewrites nothing, and a device distribution removed,
//! added or reinstalled is noticed.
//!
//! An entry without a hash is a binary being replaced, materialized or
//! put back: it is written before any installed file is, so an
//! interrupted run is never taken for a finished one. A binary without an
//! entry holds its host-only original. The file is listed in RECORD, so
//! uninstalling the host removes it; one that cannot be read, or of a
//! newer version, is taken as empty (a fat binary is then made again, or
//! put back when RECORD does not give it its original's hash).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use kpack_binary::materialize::BundleEncoding;
use kpack_gpu::Target;
use kpack_wheel::RecordHash;
use serde::{Deserialize, Serialize};

use super::MaterializeError;

/// The state file, under the `.dist-info`.
pub(crate) const STATE_FILE: &str = "kpack/materialized.json";
/// The format version written; a newer one is not read.
const VERSION: u32 = 1;

/// An archive a binary's code came from, as it was on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArchiveStamp {
    pub path: PathBuf,
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub modified_ns: i64,
    pub inode: u64,
}

impl ArchiveStamp {
    /// The archive at `path`; `None` when there is no file there.
    pub fn of(path: &Path) -> Result<Option<ArchiveStamp>, MaterializeError> {
        let metadata = match fs_err::metadata(path) {
            Ok(metadata) if metadata.is_file() => metadata,
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(MaterializeError::Io(e)),
        };
        Ok(Some(ArchiveStamp {
            path: path.to_owned(),
            size: metadata.len(),
            modified_ns: metadata
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(metadata.mtime_nsec()),
            inode: metadata.ino(),
        }))
    }
}

/// What one binary was materialized from and into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaterializedBinary {
    pub targets: Vec<Target>,
    pub archives: Vec<ArchiveStamp>,
    /// How its bundles were written (states written before compressed
    /// bundles existed hold plain ones).
    #[serde(default)]
    pub bundles: BundleEncoding,
    /// The fat file's RECORD hash; `None` while it is being replaced.
    pub hash: Option<String>,
    pub size: Option<u64>,
}

impl MaterializedBinary {
    /// A binary being replaced: from nothing yet, into nothing yet.
    pub fn unfinished() -> MaterializedBinary {
        MaterializedBinary {
            targets: Vec::new(),
            archives: Vec::new(),
            bundles: BundleEncoding::Plain,
            hash: None,
            size: None,
        }
    }

    /// Whether the binary was finished from exactly these inputs and the
    /// installed file is what was written (by RECORD's hash and its size).
    pub fn finished(
        &self,
        (targets, archives, bundles): (&[Target], &[ArchiveStamp], BundleEncoding),
        recorded: Option<&RecordHash>,
        installed_size: Option<u64>,
    ) -> bool {
        self.targets == targets
            && self.archives == archives
            && self.bundles == bundles
            && self.hash.is_some()
            && self.hash.as_deref() == recorded.map(RecordHash::as_str)
            && self.size.is_some()
            && self.size == installed_size
    }
}

/// The state file's contents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    /// By the binary's RECORD path.
    pub binaries: BTreeMap<String, MaterializedBinary>,
}

impl Default for State {
    fn default() -> State {
        State {
            version: VERSION,
            binaries: BTreeMap::new(),
        }
    }
}

impl State {
    /// The state of the distribution at `dist_info`: empty when there is
    /// none, it cannot be parsed, or it is of a newer version.
    pub fn read(dist_info: &Path) -> Result<State, MaterializeError> {
        let text = match fs_err::read_to_string(dist_info.join(STATE_FILE)) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(State::default()),
            Err(e) => return Err(MaterializeError::Io(e)),
        };
        Ok(serde_json::from_str::<State>(&text)
            .ok()
            .filter(|state| state.version <= VERSION)
            .unwrap_or_default())
    }

    /// The state file's bytes, for the distribution at `dist_info`.
    pub fn to_bytes(&self, dist_info: &Path) -> Result<Vec<u8>, MaterializeError> {
        let mut text =
            serde_json::to_vec_pretty(self).map_err(|source| MaterializeError::State {
                path: dist_info.join(STATE_FILE),
                source,
            })?;
        text.push(b'\n');
        Ok(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_reads_back_and_a_newer_or_broken_one_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = State::default();
        state.binaries.insert(
            "pkg/_ext.so".into(),
            MaterializedBinary {
                targets: vec![Target::parse("gfx1100").unwrap()],
                archives: vec![ArchiveStamp {
                    path: "/site/pkg/.kpack/rocm_gfx1100.kpack".into(),
                    size: 10,
                    modified_ns: 1,
                    inode: 2,
                }],
                bundles: BundleEncoding::Compressed,
                hash: Some("sha256=x".into()),
                size: Some(3),
            },
        );
        let bytes = state.to_bytes(dir.path()).unwrap();
        fs_err::create_dir_all(dir.path().join("kpack")).unwrap();
        fs_err::write(dir.path().join(STATE_FILE), bytes).unwrap();
        assert_eq!(State::read(dir.path()).unwrap(), state);

        fs_err::write(
            dir.path().join(STATE_FILE),
            "{\"version\": 2, \"binaries\": {}}",
        )
        .unwrap();
        assert_eq!(State::read(dir.path()).unwrap(), State::default());
        fs_err::write(dir.path().join(STATE_FILE), "not json").unwrap();
        assert_eq!(State::read(dir.path()).unwrap(), State::default());
        assert_eq!(
            State::read(&dir.path().join("none")).unwrap(),
            State::default()
        );
    }
}

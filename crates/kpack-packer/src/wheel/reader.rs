//! Reading an input wheel as a stream: its members listed and their paths
//! checked, its `.dist-info` found, and every member checked against
//! RECORD as it is read, ELF files spooled to disk for splitting.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use kpack_binary::sniff::BinaryFormat;
use kpack_hash::HashingReader;
use kpack_wheel::{DistName, WheelFilename};
use rayon::prelude::*;
use zip::read::ZipFile;
use zip::ZipArchive;

use super::error::{BadRecord, NotAWheel, WheelError};
use super::record::{self, hash_field, Recorded};

/// The most bytes a METADATA, WHEEL or RECORD file may have: they are read
/// whole.
const SMALL_FILE_LIMIT: u64 = 64 * 1024 * 1024;

/// One file in the wheel (directory entries are left out).
#[derive(Debug, Clone)]
pub struct Member {
    /// Its index in the zip archive.
    pub index: usize,
    pub name: String,
    /// 0o755 when any execute bit is set, else 0o644.
    pub mode: u32,
}

/// A member read through: its digest and size, and where it was spooled
/// when it is an ELF file.
#[derive(Debug)]
pub struct Checked {
    pub digest: [u8; 32],
    pub size: u64,
    pub spooled: Option<PathBuf>,
}

/// An input wheel, open for reading.
#[derive(Debug)]
pub struct InputWheel {
    pub path: PathBuf,
    pub file_name: WheelFilename,
    archive: ZipArchive<fs_err::File>,
    pub members: Vec<Member>,
    /// `<name>-<version>.dist-info`.
    pub dist_info: String,
    record: BTreeMap<String, Recorded>,
    pub metadata: Vec<u8>,
    pub wheel: Vec<u8>,
}

impl InputWheel {
    /// Opens the wheel at `path`: its name, members, `.dist-info` and RECORD.
    pub fn open(path: &Path) -> Result<InputWheel, WheelError> {
        let not_a_wheel = |reason| WheelError::NotAWheel {
            path: path.to_owned(),
            reason,
        };
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let file_name =
            WheelFilename::parse(&name).map_err(|e| not_a_wheel(NotAWheel::FileName(e)))?;
        let file = fs_err::File::open(path)?;
        let archive = ZipArchive::new(file).map_err(|source| WheelError::Zip {
            path: path.to_owned(),
            source,
        })?;
        if archive.has_duplicate_names() {
            return Err(WheelError::DuplicateMember {
                path: path.to_owned(),
            });
        }
        let members = list_members(&archive, path)?;
        let dist_info = find_dist_info(&members, &file_name).map_err(not_a_wheel)?;
        let mut wheel = InputWheel {
            path: path.to_owned(),
            file_name,
            archive,
            members,
            dist_info,
            record: BTreeMap::new(),
            metadata: Vec::new(),
            wheel: Vec::new(),
        };
        let record = wheel.read_small("RECORD")?;
        let record = String::from_utf8(record).map_err(|_| WheelError::BadRecord {
            line: 0,
            reason: BadRecord::NotUtf8,
        })?;
        wheel.record = record::parse(&record)?;
        wheel.metadata = wheel.read_small("METADATA")?;
        wheel.wheel = wheel.read_small("WHEEL")?;
        Ok(wheel)
    }

    /// The path of `file` in the `.dist-info` directory.
    pub fn dist_info_file(&self, file: &str) -> String {
        format!("{}/{file}", self.dist_info)
    }

    /// Reads a small `.dist-info` file whole (it is checked against RECORD
    /// with every other member later).
    fn read_small(&mut self, file: &str) -> Result<Vec<u8>, WheelError> {
        let name = self.dist_info_file(file);
        let mut member = self
            .archive
            .by_name(&name)
            .map_err(|_| WheelError::NotAWheel {
                path: self.path.clone(),
                reason: NotAWheel::Missing(name.clone()),
            })?;
        let mut bytes = Vec::new();
        (&mut member)
            .take(SMALL_FILE_LIMIT + 1)
            .read_to_end(&mut bytes)
            .map_err(|source| WheelError::Member {
                member: name.clone(),
                source,
            })?;
        if bytes.len() as u64 > SMALL_FILE_LIMIT {
            return Err(WheelError::NotAWheel {
                path: self.path.clone(),
                reason: NotAWheel::TooLarge {
                    name,
                    limit: SMALL_FILE_LIMIT,
                },
            });
        }
        Ok(bytes)
    }

    /// The member at `index` as stored (for a raw copy).
    pub fn raw(&mut self, member: &Member) -> Result<ZipFile<'_, fs_err::File>, WheelError> {
        self.archive
            .by_index_raw(member.index)
            .map_err(|source| WheelError::MemberZip {
                member: member.name.clone(),
                source,
            })
    }

    /// The member at `index`, decompressed as it is read.
    pub fn open_member(
        &mut self,
        member: &Member,
    ) -> Result<ZipFile<'_, fs_err::File>, WheelError> {
        self.archive
            .by_index(member.index)
            .map_err(|source| WheelError::MemberZip {
                member: member.name.clone(),
                source,
            })
    }

    /// Reads every member through, checking it against RECORD (every file
    /// but RECORD and its signatures must be listed with a matching hash
    /// and size, every file listed must be there), and spools each ELF file
    /// into `spool`. Members are read on every core, each worker through
    /// its own handle on the wheel.
    pub fn check_and_spool(&self, spool: &Path) -> Result<Vec<Checked>, WheelError> {
        let unhashed: HashSet<String> = ["RECORD", "RECORD.jws", "RECORD.p7s"]
            .iter()
            .map(|file| self.dist_info_file(file))
            .collect();
        let open = || -> Result<ZipArchive<fs_err::File>, WheelError> {
            let file = fs_err::File::open(&self.path)?;
            ZipArchive::new(file).map_err(|source| WheelError::Zip {
                path: self.path.clone(),
                source,
            })
        };
        let checked = self
            .members
            .par_iter()
            .enumerate()
            .map_init(
                || None,
                |archive: &mut Option<ZipArchive<fs_err::File>>, (number, member)| {
                    let archive = match archive {
                        Some(archive) => archive,
                        None => archive.insert(open()?),
                    };
                    let file =
                        archive
                            .by_index(member.index)
                            .map_err(|source| WheelError::MemberZip {
                                member: member.name.clone(),
                                source,
                            })?;
                    let unhashed = unhashed.contains(&member.name);
                    let (limit, given_by) = self.size_limit(&member.name, unhashed, file.size())?;
                    let spool_path = spool.join(format!("member-{number}"));
                    let result = read_through(file, &spool_path, limit).map_err(|source| {
                        WheelError::Member {
                            member: member.name.clone(),
                            source,
                        }
                    })?;
                    if result.size > limit {
                        if let Some(spooled) = &result.spooled {
                            // Its directory goes too; this frees the space now.
                            let _ = fs_err::remove_file(spooled);
                        }
                        return Err(WheelError::Inflates {
                            member: member.name.clone(),
                            limit,
                            given_by,
                        });
                    }
                    if !unhashed {
                        self.check_recorded(&member.name, &result)?;
                    }
                    Ok(result)
                },
            )
            .collect::<Result<Vec<_>, WheelError>>()?;
        let present: HashSet<&str> = self.members.iter().map(|m| m.name.as_str()).collect();
        if let Some(missing) = self.record.keys().find(|p| !present.contains(p.as_str())) {
            return Err(WheelError::MissingMember {
                member: missing.clone(),
            });
        }
        Ok(checked)
    }

    /// How many bytes `member` may inflate to, and who says so: the size
    /// RECORD gives it; for RECORD and its signatures (which RECORD cannot
    /// size), the limit of files read whole; for a member RECORD lists
    /// without a size, the size its zip entry declares. A member RECORD
    /// does not hash is refused here, before it is read at all.
    fn size_limit(
        &self,
        member: &str,
        unhashed: bool,
        zip_size: u64,
    ) -> Result<(u64, &'static str), WheelError> {
        if unhashed {
            return Ok((SMALL_FILE_LIMIT, "allowed for RECORD and its signatures"));
        }
        let recorded = self.record.get(member).filter(|r| r.hash.is_some());
        let Some(recorded) = recorded else {
            return Err(WheelError::NotInRecord {
                member: member.to_owned(),
            });
        };
        Ok(match recorded.size {
            Some(size) => (size, "RECORD gives it"),
            None => (zip_size, "its zip entry declares"),
        })
    }

    fn check_recorded(&self, member: &str, checked: &Checked) -> Result<(), WheelError> {
        let recorded = self.record.get(member);
        let Some(expected) = recorded.and_then(|r| r.hash.as_ref()) else {
            return Err(WheelError::NotInRecord {
                member: member.to_owned(),
            });
        };
        let actual = hash_field(&checked.digest);
        if *expected != actual {
            return Err(WheelError::HashMismatch {
                member: member.to_owned(),
                expected: expected.clone(),
                actual,
            });
        }
        match recorded.and_then(|r| r.size) {
            Some(size) if size != checked.size => Err(WheelError::SizeMismatch {
                member: member.to_owned(),
                expected: size,
                actual: checked.size,
            }),
            _ => Ok(()),
        }
    }
}

/// Reads `reader` to its end, but never more than `limit` bytes and one
/// more (a size over `limit` says it goes on), hashing it, and copies it to
/// `spool` when it starts like an ELF file.
fn read_through(reader: impl Read, spool: &Path, limit: u64) -> std::io::Result<Checked> {
    let mut reader = HashingReader::new(reader.take(limit.saturating_add(1)));
    let mut buffer = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    let mut file: Option<std::io::BufWriter<fs_err::File>> = None;
    loop {
        let n = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buffer[..n];
        if size == 0 && BinaryFormat::of_prefix(chunk).is_some() {
            file = Some(std::io::BufWriter::new(fs_err::File::create(spool)?));
        }
        if let Some(file) = &mut file {
            file.write_all(chunk)?;
        }
        size += n as u64;
    }
    let spooled = match file {
        Some(file) => {
            file.into_inner().map_err(|e| e.into_error())?;
            Some(spool.to_owned())
        }
        None => None,
    };
    let (digest, _) = reader.finish();
    Ok(Checked {
        digest: *digest.as_bytes(),
        size,
        spooled,
    })
}

/// Whether a member path is safe: relative, no `..`, no backslash, no
/// empty or `.` part, no NUL.
fn safe_path(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('/')
        && !name.contains(['\\', '\0'])
        && !name
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
        && name.as_bytes().get(1).is_none_or(|b| *b != b':')
}

/// The archive's files, their paths checked; directory entries left out.
fn list_members(
    archive: &ZipArchive<fs_err::File>,
    path: &Path,
) -> Result<Vec<Member>, WheelError> {
    let mut members = Vec::new();
    for index in 0..archive.len() {
        let entry = archive
            .by_index_data(index)
            .map_err(|source| WheelError::Zip {
                path: path.to_owned(),
                source,
            })?;
        let name = entry.name().map_err(|source| WheelError::Zip {
            path: path.to_owned(),
            source,
        })?;
        let name = name.into_owned();
        if entry.is_dir() {
            let trimmed = name.trim_end_matches('/');
            if !trimmed.is_empty() && !safe_path(trimmed) {
                return Err(WheelError::UnsafePath { member: name });
            }
            continue;
        }
        if !safe_path(&name) {
            return Err(WheelError::UnsafePath { member: name });
        }
        let executable = entry.unix_mode().is_some_and(|mode| mode & 0o111 != 0);
        members.push(Member {
            index,
            name,
            mode: if executable { 0o755 } else { 0o644 },
        });
    }
    Ok(members)
}

/// The one top-level `.dist-info` directory, named for the wheel's
/// distribution.
fn find_dist_info(members: &[Member], file_name: &WheelFilename) -> Result<String, NotAWheel> {
    let mut found: Vec<&str> = members
        .iter()
        .filter_map(|m| m.name.split_once('/').map(|(top, _)| top))
        .filter(|top| top.ends_with(".dist-info"))
        .collect();
    found.sort_unstable();
    found.dedup();
    let [dist_info] = found[..] else {
        return Err(NotAWheel::DistInfoCount(found.len()));
    };
    let stem = dist_info.trim_end_matches(".dist-info");
    let name = stem.rsplit_once('-').map_or(stem, |(name, _)| name);
    if DistName::new(name).ok().as_ref() != Some(&file_name.dist) {
        return Err(NotAWheel::OtherDistribution {
            dist_info: dist_info.to_owned(),
            dist: file_name.dist.to_string(),
        });
    }
    Ok(dist_info.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_through_stops_one_byte_past_the_limit_and_spools_no_more() {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("member");
        let endless = std::io::Cursor::new(b"\x7fELF".to_vec()).chain(std::io::repeat(0));
        let checked = read_through(endless, &spool, 1 << 20).unwrap();
        assert_eq!(checked.size, (1 << 20) + 1);
        assert_eq!(fs_err::metadata(&spool).unwrap().len(), (1 << 20) + 1);
    }

    #[test]
    fn paths_leaving_the_wheel_are_unsafe() {
        for name in ["pkg/x.py", "pkg-1.dist-info/RECORD", "a..b/c"] {
            assert!(safe_path(name), "{name}");
        }
        for name in [
            "/etc/passwd",
            "../x",
            "pkg/../../x",
            "pkg\\x",
            "pkg//x",
            "C:x",
            "./x",
            "",
        ] {
            assert!(!safe_path(name), "{name}");
        }
    }
}

//! Reading an input wheel as a stream: its members listed and their paths
//! checked, its `.dist-info` found, and every member checked against
//! RECORD as it is read (disagreements noted, or refused when strict), ELF
//! files spooled to disk for splitting.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use kpack_binary::code_object;
use kpack_binary::BinaryFormat;
use kpack_gpu::Target;
use kpack_hash::HashingReader;
use kpack_wheel::{DistName, WheelFilename};
use rayon::prelude::*;
use zip::read::ZipFile;
use zip::ZipArchive;

use kpack_fs::RelativePath;
use kpack_wheel::record::RecordHash;

use super::error::{NotAWheel, RecordProblem, WheelError};
use super::record::{self, Recorded};

/// The most bytes a METADATA, WHEEL or RECORD file may have: they are read
/// whole.
const SMALL_FILE_LIMIT: u64 = kpack_wheel::MAX_DIST_INFO_FILE_SIZE;

/// One file in the wheel (directory entries are left out).
#[derive(Debug, Clone)]
pub struct Member {
    /// Its index in the zip archive.
    pub index: usize,
    pub name: String,
    /// 0o755 when any execute bit is set, else 0o644.
    pub mode: u32,
}

/// A member and what reading it through found: its digest and size,
/// and where it was spooled when it is an ELF or PE file.
#[derive(Debug)]
pub struct Checked {
    pub member: Member,
    pub digest: [u8; 32],
    pub size: u64,
    pub spooled: Option<PathBuf>,
    /// The target of the code object it is, when it is one (it is then
    /// not spooled: it is routed whole, never split).
    pub code_object: Option<Target>,
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
        super::local_headers::check(&archive, path)?;
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
        let record = String::from_utf8(record).map_err(|_| WheelError::RecordNotUtf8)?;
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

    /// Reads every member through, checking it against RECORD, and spools
    /// each ELF file into `spool`. Members are read on every core, each
    /// worker through its own handle on the wheel.
    ///
    /// pip installs wheels whose RECORD is stale, hashless or incomplete,
    /// so by default each disagreement is returned as a note; with
    /// `strict` the first one refuses the wheel (a member whose zip entry
    /// disagrees with RECORD's size before it is read). Either way no
    /// member may inflate past the size its zip entry declares.
    pub fn check_and_spool(
        &self,
        spool: &Path,
        strict: bool,
    ) -> Result<(Vec<Checked>, Vec<RecordNote>), WheelError> {
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
        let checked =
            self.members
                .par_iter()
                .enumerate()
                .map_init(
                    || None,
                    |archive: &mut Option<ZipArchive<fs_err::File>>, (number, member)| {
                        let archive = match archive {
                            Some(archive) => archive,
                            None => archive.insert(open()?),
                        };
                        let file = archive.by_index(member.index).map_err(|source| {
                            WheelError::MemberZip {
                                member: member.name.clone(),
                                source,
                            }
                        })?;
                        let unhashed = unhashed.contains(&member.name);
                        if strict && !unhashed {
                            self.refuse_stale_size(&member.name, file.size())?;
                        }
                        let (limit, given_by) = self.size_limit(unhashed, file.size());
                        let spool_path = spool.join(format!("member-{number}"));
                        let result =
                            read_through(member, file, &spool_path, limit).map_err(|source| {
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
                        let problem = if unhashed {
                            None
                        } else {
                            self.record_problem(&member.name, &result)
                        };
                        Ok((result, problem))
                    },
                )
                .collect::<Result<Vec<_>, WheelError>>()?;
        let mut notes = Vec::new();
        let mut members = Vec::with_capacity(checked.len());
        for ((result, problem), member) in checked.into_iter().zip(&self.members) {
            if let Some(problem) = problem {
                notes.push(RecordNote {
                    member: member.name.clone(),
                    problem,
                });
            }
            members.push(result);
        }
        let present: HashSet<&str> = self.members.iter().map(|m| m.name.as_str()).collect();
        notes.extend(
            self.record
                .keys()
                .filter(|p| !present.contains(p.as_str()))
                .map(|p| RecordNote {
                    member: p.clone(),
                    problem: RecordProblem::NotInWheel,
                }),
        );
        if let (true, Some(note)) = (strict, notes.first()) {
            return Err(WheelError::Record {
                member: note.member.clone(),
                problem: note.problem.clone(),
            });
        }
        Ok((members, notes))
    }

    /// How many bytes a member may inflate to, and who says so: the size
    /// its zip entry declares (which the zip reader holds it to as well);
    /// for RECORD and its signatures, the limit of files read whole.
    fn size_limit(&self, unhashed: bool, zip_size: u64) -> (u64, &'static str) {
        if unhashed {
            (SMALL_FILE_LIMIT, "allowed for RECORD and its signatures")
        } else {
            (zip_size, "its zip entry declares")
        }
    }

    /// Refuses, before reading it, a member whose zip entry holds another
    /// size than RECORD gives it (a stale RECORD, or a bomb's disguise).
    fn refuse_stale_size(&self, member: &str, zip_size: u64) -> Result<(), WheelError> {
        match self.record.get(member).and_then(|r| r.size) {
            Some(recorded) if recorded != zip_size => Err(WheelError::Record {
                member: member.to_owned(),
                problem: RecordProblem::Size {
                    recorded,
                    actual: zip_size,
                },
            }),
            _ => Ok(()),
        }
    }

    /// How RECORD's row for `member` disagrees with what was read, if it
    /// does.
    fn record_problem(&self, member: &str, checked: &Checked) -> Option<RecordProblem> {
        let Some(recorded) = self.record.get(member) else {
            return Some(RecordProblem::NotListed);
        };
        let Some(expected) = &recorded.hash else {
            return Some(RecordProblem::Hashless);
        };
        match recorded.size {
            Some(size) if size != checked.size => {
                return Some(RecordProblem::Size {
                    recorded: size,
                    actual: checked.size,
                })
            }
            _ => {}
        }
        let actual = RecordHash::sha256(&checked.digest);
        (*expected != actual).then(|| RecordProblem::Hash {
            recorded: expected.to_string(),
            actual: actual.to_string(),
        })
    }
}

/// A member whose RECORD row was missing, hashless or stale: the wheels
/// written carry a RECORD computed from their bytes instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordNote {
    /// The member's path in the wheel.
    pub member: String,
    pub problem: RecordProblem,
}

impl std::fmt::Display for RecordNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "member {:?}: {}", self.member, self.problem)
    }
}

/// Reads `reader` to its end, but never more than `limit` bytes and one
/// more (a size over `limit` says it goes on), hashing it; notes the code
/// object it is, if it is one, and otherwise copies it to `spool` when it
/// starts like an ELF or PE file (a binary that may carry bundles).
fn read_through(
    member: &Member,
    reader: impl Read,
    spool: &Path,
    limit: u64,
) -> std::io::Result<Checked> {
    let mut reader = HashingReader::new(reader.take(limit.saturating_add(1)));
    let mut head = Vec::with_capacity(code_object::HEADER_SIZE);
    (&mut reader)
        .take(code_object::HEADER_SIZE as u64)
        .read_to_end(&mut head)?;
    let code_object = code_object::read_header(&head).map(|c| c.target);
    let mut file = match BinaryFormat::of_prefix(&head) {
        Some(_) if code_object.is_none() => {
            let mut file = std::io::BufWriter::new(fs_err::File::create(spool)?);
            file.write_all(&head)?;
            Some(file)
        }
        _ => None,
    };
    let mut buffer = vec![0u8; 256 * 1024];
    let mut size = head.len() as u64;
    loop {
        let n = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if let Some(file) = &mut file {
            file.write_all(&buffer[..n])?;
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
        member: member.clone(),
        digest: *digest.as_bytes(),
        size,
        spooled,
        code_object,
    })
}

/// Whether a member path is safe: what [`RelativePath`] takes.
fn safe_path(name: &str) -> bool {
    name.parse::<RelativePath>().is_ok()
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
        let member = Member {
            index: 0,
            name: "pkg/libendless.so".into(),
            mode: 0o755,
        };
        let checked = read_through(&member, endless, &spool, 1 << 20).unwrap();
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

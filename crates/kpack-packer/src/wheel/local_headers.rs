//! What the zip crate does not check and other readers rely on: each
//! member's local header agrees with its central directory entry (name,
//! compression method; CRC-32 and sizes unless a data descriptor follows
//! the data), and no member's data runs into another member or the
//! central directory. Python's `zipfile` reads by the central directory
//! and refuses a local name that differs; streaming installers read by
//! the local headers. A wheel they would read differently is refused.

use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use zip::ZipArchive;

use super::error::{WheelError, ZipMismatch};

/// The local file header's signature.
const LOCAL_SIGNATURE: u32 = 0x0403_4b50;
/// Its fixed part's length; the name and extra field follow.
const LOCAL_FIXED: u64 = 30;
/// A 32-bit size standing for one in the ZIP64 extra field.
const ZIP64_SIZE: u32 = u32::MAX;
/// General purpose flag bit 3: CRC-32 and sizes follow the data.
const DATA_DESCRIPTOR: u16 = 1 << 3;

/// One member's place in the file, as its headers give it.
struct Span {
    name: String,
    start: u64,
    /// Where its data ends.
    end: u64,
}

/// Checks every member of `archive` (the wheel at `path`) against its
/// local header, and that no member overlaps another or the central
/// directory.
pub fn check(archive: &ZipArchive<fs_err::File>, path: &Path) -> Result<(), WheelError> {
    let mut file = BufReader::new(fs_err::File::open(path)?);
    let mut spans = Vec::with_capacity(archive.len());
    let mut directory = u64::MAX;
    for index in 0..archive.len() {
        let entry = archive
            .by_index_data(index)
            .map_err(|source| WheelError::Zip {
                path: path.to_owned(),
                source,
            })?;
        directory = directory.min(entry.central_header_start());
        let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        let unreadable = |source| WheelError::Member {
            member: name.clone(),
            source,
        };
        let method = central_method(&mut file, entry.central_header_start()).map_err(unreadable)?;
        let central = Central {
            name: entry.name_raw(),
            method,
            crc: entry.crc32(),
            sizes: (entry.compressed_size(), entry.size()),
        };
        let start = entry.header_start();
        let data = compare(&mut file, start, &central).map_err(|mismatch| match mismatch {
            Ok(mismatch) => WheelError::ZipMismatch {
                member: name.clone(),
                mismatch,
            },
            Err(source) => unreadable(source),
        })?;
        let end = data.saturating_add(entry.compressed_size());
        spans.push(Span { name, start, end });
    }
    check_overlaps(spans, directory)
}

/// The compression method the central directory entry at `at` gives
/// (read from the file: the zip crate folds methods it does not know).
fn central_method(file: &mut BufReader<fs_err::File>, at: u64) -> std::io::Result<u16> {
    let mut method = [0u8; 2];
    file.seek(SeekFrom::Start(at + 10))?;
    file.read_exact(&mut method)?;
    Ok(u16::from_le_bytes(method))
}

/// What the central directory says of a member.
struct Central<'a> {
    name: &'a [u8],
    method: u16,
    crc: u32,
    sizes: (u64, u64),
}

/// Reads the local header at `start` and compares it with `central`;
/// returns where the member's data starts.
fn compare(
    file: &mut BufReader<fs_err::File>,
    start: u64,
    central: &Central<'_>,
) -> Result<u64, Result<ZipMismatch, std::io::Error>> {
    let mut fixed = [0u8; LOCAL_FIXED as usize];
    file.seek(SeekFrom::Start(start)).map_err(Err)?;
    let missing = || Ok(ZipMismatch::NoLocalHeader { offset: start });
    file.read_exact(&mut fixed).map_err(|_| missing())?;
    let u16_at = |at: usize| u16::from_le_bytes([fixed[at], fixed[at + 1]]);
    let u32_at =
        |at: usize| u32::from_le_bytes([fixed[at], fixed[at + 1], fixed[at + 2], fixed[at + 3]]);
    if u32_at(0) != LOCAL_SIGNATURE {
        return Err(missing());
    }
    let mut name = vec![0u8; usize::from(u16_at(26))];
    file.read_exact(&mut name).map_err(|_| missing())?;
    if name != central.name {
        let local = String::from_utf8_lossy(&name).into_owned();
        return Err(Ok(ZipMismatch::Name { local }));
    }
    let method = u16_at(8);
    if method != central.method {
        return Err(Ok(ZipMismatch::Method {
            local: method,
            central: central.method,
        }));
    }
    let (crc, compressed, size) = (u32_at(14), u32_at(18), u32_at(22));
    let descriptor = u16_at(6) & DATA_DESCRIPTOR != 0;
    let zip64 = compressed == ZIP64_SIZE || size == ZIP64_SIZE;
    let local = (crc, u64::from(compressed), u64::from(size));
    let agree = crc == central.crc && (zip64 || (local.1, local.2) == central.sizes);
    if !descriptor && !agree {
        return Err(Ok(ZipMismatch::Sizes {
            local,
            central: (central.crc, central.sizes.0, central.sizes.1),
        }));
    }
    Ok(start + LOCAL_FIXED + name.len() as u64 + u64::from(u16_at(28)))
}

/// Checks that no member's data runs into the next member's local header
/// or the central directory (at `directory`).
fn check_overlaps(mut spans: Vec<Span>, directory: u64) -> Result<(), WheelError> {
    spans.sort_by_key(|span| span.start);
    for (index, span) in spans.iter().enumerate() {
        let (next, other) = match spans.get(index + 1) {
            Some(next) => (next.start, format!("member {:?}", next.name)),
            None => (directory, "the central directory".to_owned()),
        };
        if span.end > next {
            return Err(WheelError::ZipMismatch {
                member: span.name.clone(),
                mismatch: ZipMismatch::Overlap { other },
            });
        }
    }
    Ok(())
}

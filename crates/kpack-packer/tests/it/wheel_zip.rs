//! Wheels whose zip headers disagree: a member's local header and its
//! central directory entry give another name, compression method or size,
//! or its data runs into the next member. Python's `zipfile` refuses some
//! and reads others by the central directory, where a reader going by the
//! local headers gets other bytes; `wheel split` refuses each, naming the
//! member.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::wheel::{python, writes_nothing};

const STORED: &str = "pkg/__init__.py";
const DEFLATED: &str = "pkg/data.txt";

/// A wheel of `pkg` 1.0: `STORED` stored, then `DEFLATED` and the
/// `.dist-info` files deflated.
fn wheel(dir: &Path) -> PathBuf {
    use zip::write::SimpleFileOptions;
    use zip::CompressionMethod::{Deflated, Stored};
    let path = dir.join("pkg-1.0-py3-none-any.whl");
    let mut zip = zip::ZipWriter::new(fs_err::File::create(&path).unwrap());
    let members: [(&str, &[u8], _); 5] = [
        (STORED, &b"x = 1\n".repeat(50), Stored),
        (DEFLATED, &b"hello\n".repeat(50), Deflated),
        (
            "pkg-1.0.dist-info/METADATA",
            b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
            Deflated,
        ),
        (
            "pkg-1.0.dist-info/WHEEL",
            b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
            Deflated,
        ),
        ("pkg-1.0.dist-info/RECORD", b"", Deflated),
    ];
    for (name, bytes, method) in members {
        let options = SimpleFileOptions::default().compression_method(method);
        zip.start_file(name, options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
    path
}

/// Where `member`'s local header and central directory entry are.
fn headers(wheel: &Path, member: &str) -> (usize, usize) {
    let mut archive = zip::ZipArchive::new(fs_err::File::open(wheel).unwrap()).unwrap();
    let entry = archive.by_name(member).unwrap();
    (
        entry.header_start() as usize,
        entry.central_header_start() as usize,
    )
}

/// The wheel of [`wheel`] in its own directory under `dir`, `spoil`
/// applied to its bytes with the local and central headers of `member`.
fn spoiled(dir: &Path, member: &str, spoil: impl FnOnce(&mut [u8], usize, usize)) -> PathBuf {
    let dir = dir.join(member.replace('/', "_"));
    fs_err::create_dir(&dir).unwrap();
    let path = wheel(&dir);
    let (local, central) = headers(&path, member);
    let mut bytes = fs_err::read(&path).unwrap();
    spoil(&mut bytes, local, central);
    fs_err::write(&path, bytes).unwrap();
    path
}

/// What Python's `zipfile` reads of `member`, or why it refuses it.
fn python_reads(wheel: &Path, member: &str) -> Result<Vec<u8>, String> {
    let script = "import sys, zipfile\n\
        try:\n    sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))\n\
        except zipfile.BadZipFile as e:\n    sys.exit(str(e))\n";
    let out = python()
        .args(["-c", script])
        .arg(wheel)
        .arg(member)
        .output()
        .unwrap();
    match out.status.success() {
        true => Ok(out.stdout),
        false => Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
    }
}

/// Adds `delta` to the 32-bit little-endian field at `at`.
fn add(bytes: &mut [u8], at: usize, delta: u32) {
    let value = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    bytes[at..at + 4].copy_from_slice(&(value + delta).to_le_bytes());
}

#[test]
fn the_untouched_wheel_is_read_by_python_and_split() {
    let work = tempfile::tempdir().unwrap();
    let path = wheel(work.path());
    assert_eq!(python_reads(&path, STORED).unwrap(), b"x = 1\n".repeat(50));
    let split = crate::wheel::split(&path, &work.path().join("out"));
    assert!(split.status.success(), "{split:?}");
}

#[test]
fn a_local_header_naming_another_file_is_refused_naming_the_member() {
    let work = tempfile::tempdir().unwrap();
    let wheel = spoiled(work.path(), STORED, |bytes, local, _| {
        bytes[local + 30 + STORED.len() - 1] = b'z';
    });
    assert_eq!(
        python_reads(&wheel, STORED).unwrap_err(),
        "File name in directory 'pkg/__init__.py' and header b'pkg/__init__.pz' differ."
    );
    let refused = writes_nothing(&wheel, &work.path().join("out"));
    assert!(
        refused.contains(
            r#"member "pkg/__init__.py": its local header names it "pkg/__init__.pz"; refused"#
        ),
        "{refused}"
    );
}

#[test]
fn a_local_header_saying_stored_for_a_deflated_member_is_refused_naming_it() {
    let work = tempfile::tempdir().unwrap();
    let wheel = spoiled(work.path(), DEFLATED, |bytes, local, _| {
        bytes[local + 8..local + 10].copy_from_slice(&0u16.to_le_bytes());
    });
    // Python goes by the central directory and inflates it; a reader
    // going by the local header takes the deflate stream as the content.
    let content = b"hello\n".repeat(50);
    assert_eq!(python_reads(&wheel, DEFLATED).unwrap(), content);
    let (local, _) = headers(&wheel, DEFLATED);
    let bytes = fs_err::read(&wheel).unwrap();
    let stored_len = u32::from_le_bytes(bytes[local + 18..local + 22].try_into().unwrap());
    let data = local + 30 + DEFLATED.len();
    assert_ne!(&bytes[data..data + stored_len as usize], &content[..]);
    let refused = writes_nothing(&wheel, &work.path().join("out"));
    assert!(
        refused.contains(r#"member "pkg/data.txt": its local header gives compression method 0, the central directory 8; refused"#),
        "{refused}"
    );
}

#[test]
fn a_member_running_into_the_next_is_refused_naming_both() {
    let work = tempfile::tempdir().unwrap();
    // Both headers agree on 16 bytes more: the next local header's.
    let wheel = spoiled(work.path(), STORED, |bytes, local, central| {
        for at in [local + 18, local + 22, central + 20, central + 24] {
            add(bytes, at, 16);
        }
    });
    assert_eq!(
        python_reads(&wheel, STORED).unwrap_err(),
        "Bad CRC-32 for file 'pkg/__init__.py'"
    );
    let refused = writes_nothing(&wheel, &work.path().join("out"));
    assert!(
        refused.contains(
            r#"member "pkg/__init__.py": its data overlaps member "pkg/data.txt"; refused"#
        ),
        "{refused}"
    );
}

#[test]
fn central_sizes_the_local_header_does_not_give_are_refused() {
    let work = tempfile::tempdir().unwrap();
    let wheel = spoiled(work.path(), STORED, |bytes, _, central| {
        add(bytes, central + 20, 16);
        add(bytes, central + 24, 16);
    });
    assert_eq!(
        python_reads(&wheel, STORED).unwrap_err(),
        "Bad CRC-32 for file 'pkg/__init__.py'"
    );
    let refused = writes_nothing(&wheel, &work.path().join("out"));
    assert!(
        refused.contains(r#"member "pkg/__init__.py": its local header gives CRC-32"#)
            && refused.contains("sizes 300 and 300, the central directory"),
        "{refused}"
    );
}

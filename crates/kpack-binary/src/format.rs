//! The container formats binaries with device code come in, told from
//! their first bytes.

use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::Serialize;

/// The container formats binaries with device code come in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BinaryFormat {
    Elf,
    /// PE/COFF: Windows DLLs, `.pyd` modules and executables.
    Pe,
}

/// The ELF magic, `\x7fELF`.
const ELF_MAGIC: [u8; 4] = *b"\x7fELF";
/// The DOS header's magic every PE image starts with, `MZ`.
const MZ_MAGIC: [u8; 2] = *b"MZ";

impl BinaryFormat {
    /// The format a file starting with `prefix` is in, if any (a PE image
    /// only as far as its DOS header's magic tells).
    pub fn of_prefix(prefix: &[u8]) -> Option<BinaryFormat> {
        if prefix.starts_with(&ELF_MAGIC) {
            Some(BinaryFormat::Elf)
        } else if prefix.starts_with(&MZ_MAGIC) {
            Some(BinaryFormat::Pe)
        } else {
            None
        }
    }

    /// The format of `file`, from its first bytes (read in place, the
    /// file's position unchanged); `None` for a file too short to tell.
    pub fn of_file(file: &std::fs::File) -> std::io::Result<Option<BinaryFormat>> {
        let mut magic = [0u8; ELF_MAGIC.len()];
        match file.read_exact_at(&mut magic, 0) {
            Ok(()) => Ok(BinaryFormat::of_prefix(&magic)),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The format of the file at `path`, which must be readable.
    pub fn of_path(path: &Path) -> std::io::Result<Option<BinaryFormat>> {
        BinaryFormat::of_file(fs_err::File::open(path)?.file())
    }
}

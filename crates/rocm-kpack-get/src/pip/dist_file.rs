//! An installed distribution's METADATA and RECORD, read as untrusted
//! input: anyone who can write into a shared environment can put a FIFO,
//! a link to a device or a huge sparse file there. Each is opened without
//! following a link and without blocking, taken only when it is a regular
//! file, and read to [`MAX_DIST_INFO_FILE_SIZE`].

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub use kpack_wheel::MAX_DIST_INFO_FILE_SIZE;

/// Why a `.dist-info` file was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DistFileError {
    /// It is a link, a FIFO, a device, a directory or a socket.
    #[error("{path} is {kind}, not a regular file")]
    NotAFile { path: PathBuf, kind: &'static str },
    /// It is larger than such a file may be.
    #[error("{path} is larger than the {limit} bytes such a file may have")]
    TooLarge { path: PathBuf, limit: u64 },
    /// It is not UTF-8 text.
    #[error("{path} is not UTF-8 text")]
    NotText { path: PathBuf },
    /// It cannot be opened or read.
    #[error("cannot read {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl DistFileError {
    /// Whether the file is not there at all.
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, DistFileError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

/// The text of the `.dist-info` file at `path`, read as the module says.
pub(crate) fn read_dist_info_file(path: &Path) -> Result<String, DistFileError> {
    let io = |source| DistFileError::Io {
        path: path.to_owned(),
        source,
    };
    // std's error keeps the raw errno that tells a link (ELOOP); every
    // error made here names the path.
    #[allow(clippy::disallowed_methods)]
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| match source.raw_os_error() {
            // O_NOFOLLOW on a link.
            Some(libc::ELOOP) => DistFileError::NotAFile {
                path: path.to_owned(),
                kind: "a symbolic link",
            },
            _ => io(source),
        })?;
    let metadata = file.metadata().map_err(io)?;
    if !metadata.is_file() {
        return Err(DistFileError::NotAFile {
            path: path.to_owned(),
            kind: kpack_fs::kind_in_words(metadata.file_type()),
        });
    }
    if metadata.len() > MAX_DIST_INFO_FILE_SIZE {
        return Err(too_large(path));
    }
    let mut bytes = Vec::new();
    file.take(MAX_DIST_INFO_FILE_SIZE + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_DIST_INFO_FILE_SIZE {
        return Err(too_large(path));
    }
    String::from_utf8(bytes).map_err(|_| DistFileError::NotText {
        path: path.to_owned(),
    })
}

fn too_large(path: &Path) -> DistFileError {
    DistFileError::TooLarge {
        path: path.to_owned(),
        limit: MAX_DIST_INFO_FILE_SIZE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_within_the_cap_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("METADATA");
        fs_err::write(&good, "Name: demo\n").unwrap();
        assert_eq!(read_dist_info_file(&good).unwrap(), "Name: demo\n");

        let link = dir.path().join("link");
        fs_err::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let fifo = dir.path().join("fifo");
        let c_path = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
        let sparse = dir.path().join("sparse");
        let file = fs_err::File::create(&sparse).unwrap();
        file.set_len(MAX_DIST_INFO_FILE_SIZE + 1).unwrap();
        for (path, says) in [
            (&link, "a symbolic link"),
            (&fifo, "a FIFO"),
            (&sparse, "larger than"),
        ] {
            let error = read_dist_info_file(path).unwrap_err().to_string();
            assert!(error.contains(says), "{path:?}: {error}");
        }
        let missing = read_dist_info_file(&dir.path().join("none")).unwrap_err();
        assert!(missing.is_not_found());
    }
}

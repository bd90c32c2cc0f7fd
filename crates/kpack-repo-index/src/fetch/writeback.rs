//! Asking the kernel to start writing a download's bytes to disk while
//! the network brings the next ones.

use fs_err::File;

/// How often a download asks the kernel to start writing what arrived.
pub(super) const WRITEBACK_STEP: u64 = 8 << 20;

/// Starts writing `from..to` of `file` to disk without waiting, so the
/// final flush finds little left to do and the disk works while the
/// network does (as dpkg does). Advisory: a failure is ignored.
pub(super) fn start_writeback(file: &File, from: u64, to: u64) {
    use std::os::unix::io::AsRawFd;
    let (Ok(offset), Ok(length)) = (i64::try_from(from), i64::try_from(to - from)) else {
        return;
    };
    // SAFETY: a valid open descriptor and a byte range; no memory is passed.
    unsafe {
        libc::sync_file_range(
            file.file().as_raw_fd(),
            offset,
            length,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

//! Real packages from PyPI, fetched and checked by `./test.sh` into the
//! download cache (`downloads.txt` lists them), never by a test: tests find
//! them here, or fail naming the file and the set-up command.

use std::path::PathBuf;

use crate::SETUP_COMMAND;

/// The table `./test.sh` fetches from: file, sha256, requirement, flags.
const DOWNLOADS: &str = include_str!("../downloads.txt");

/// The download cache: `$KPACK_TEST_DOWNLOADS`, else
/// `$XDG_CACHE_HOME/rocm-kpack-get/test-downloads` (`~/.cache` when unset),
/// as `./test.sh` computes it.
pub fn download_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KPACK_TEST_DOWNLOADS") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        });
    cache.join("rocm-kpack-get/test-downloads")
}

/// The downloaded file `file_name`, which `downloads.txt` must list; fails
/// the test when `./test.sh` has not fetched it. (`./test.sh` checks each
/// file's sha256 and keeps only whole, matching files.)
pub fn download(file_name: &str) -> PathBuf {
    let listed = DOWNLOADS
        .lines()
        .filter(|line| !line.starts_with('#'))
        .any(|line| line.split_whitespace().next() == Some(file_name));
    assert!(
        listed,
        "{file_name} is not listed in kpack-test-support's downloads.txt"
    );
    let path = download_dir().join(file_name);
    assert!(
        path.is_file(),
        "{} is missing: the tests' downloads are fetched by `{SETUP_COMMAND}`",
        path.display()
    );
    path
}

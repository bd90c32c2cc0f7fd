//! Transport encoding at publish time (04-repo-index.md): a kpack archive
//! with its code objects stored as they are, compressed whole for the
//! download, published so when that is smaller than the archive by
//! enough. An archive compresses each code object on its own; whole, the
//! code objects of one target's translation units share much, as a
//! distribution's whole-file compression of the same library finds.

use std::io::{self, Write};
use std::path::Path;

use kpack_repo_index::transport::WINDOW_LOG_MAX;

/// The zstd level archives are encoded at, with long-distance matching.
/// On Debian 13's gfx1100 archives (132 MB, their code objects 357 MB),
/// whole against per code object: level 12 is 6.3% smaller, 16 8.3%, 18
/// 11.0% and 19 11.5%, level 19 taking twice 18's time.
pub const LEVEL: i32 = 18;

/// When archives are published transport-encoded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransportPolicy {
    /// Whether archives are tried at all.
    pub enabled: bool,
    /// The least saving worth an encoding, in per cent of the archive's
    /// size: below it the archive is served as it is, readable by every
    /// client and with nothing to decode.
    pub min_saving_percent: f64,
}

impl Default for TransportPolicy {
    fn default() -> TransportPolicy {
        TransportPolicy {
            enabled: true,
            min_saving_percent: 2.0,
        }
    }
}

impl TransportPolicy {
    /// Whether `encoded` bytes in place of `size` save enough.
    pub fn worth(&self, size: u64, encoded: u64) -> bool {
        let saved = size.saturating_sub(encoded) as f64;
        self.enabled && size > 0 && saved * 100.0 >= self.min_saving_percent * size as f64
    }
}

/// `file` (of `size` bytes) compressed whole as one zstd frame into a
/// temporary file: the content size stated, long-distance matching over a
/// window no larger than the file and within what clients accept
/// ([`WINDOW_LOG_MAX`]), on `workers` threads. The bytes are the same for
/// any number of workers, so two publishers of one archive agree.
pub fn encode(file: &Path, size: u64, workers: u32) -> io::Result<tempfile::NamedTempFile> {
    let mut out = tempfile::NamedTempFile::new()?;
    let mut encoder = zstd::Encoder::new(io::BufWriter::new(out.as_file_mut()), LEVEL)?;
    encoder.long_distance_matching(true)?;
    encoder.window_log(window_log(size))?;
    encoder.set_pledged_src_size(Some(size))?;
    encoder.include_contentsize(true)?;
    encoder.include_checksum(false)?;
    encoder.multithread(workers.max(1))?;
    io::copy(&mut fs_err::File::open(file)?, &mut encoder)?;
    encoder.finish()?.flush()?;
    Ok(out)
}

/// zstd's smallest window (`ZSTD_WINDOWLOG_MIN`).
const WINDOW_LOG_MIN: u32 = 10;

/// The smallest window that covers `size` bytes, within the bounds zstd
/// and clients set.
fn window_log(size: u64) -> u32 {
    let bits = u64::BITS - size.saturating_sub(1).leading_zeros();
    bits.clamp(WINDOW_LOG_MIN, WINDOW_LOG_MAX)
}

/// The threads an encoding runs on: every core.
pub fn workers() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_covers_the_file_within_the_client_bound() {
        assert_eq!(window_log(1), WINDOW_LOG_MIN);
        assert_eq!(window_log(1 << 20), 20);
        assert_eq!(window_log((1 << 20) + 1), 21);
        assert_eq!(window_log(1 << 40), WINDOW_LOG_MAX);
    }

    #[test]
    fn a_saving_below_the_threshold_is_not_worth_it() {
        let policy = TransportPolicy::default();
        assert!(policy.worth(1000, 980));
        assert!(!policy.worth(1000, 981));
        assert!(!policy.worth(1000, 1200));
        assert!(!policy.worth(0, 0));
        let off = TransportPolicy {
            enabled: false,
            ..policy
        };
        assert!(!off.worth(1000, 10));
    }

    #[test]
    fn the_bytes_are_the_same_on_one_or_two_workers() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("a.kpack");
        let data: Vec<u8> = (0..3_000_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8 & 0x0f)
            .collect();
        fs_err::write(&input, &data).unwrap();
        let size = data.len() as u64;
        let one = fs_err::read(encode(&input, size, 1).unwrap().path()).unwrap();
        let two = fs_err::read(encode(&input, size, 2).unwrap().path()).unwrap();
        assert_eq!(one, two);
        assert!(one.len() < data.len() / 2);
        assert_eq!(zstd::decode_all(&one[..]).unwrap(), data);
    }
}

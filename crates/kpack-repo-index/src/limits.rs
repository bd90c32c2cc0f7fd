//! How much, and how slowly, a mirror may answer before a read is given
//! up: the one definition both `kpack-get` and `kpack-repo` read mirrors
//! with (05-kpack-get.md, "every read from a mirror is bounded in bytes
//! and in time").
//!
//! Bytes: a shard or an artifact is read to at most the size the signed
//! level above pins, plus one byte to tell "longer" from "exact". The root
//! and its signature cannot be pinned by anything signed, so they have
//! caps; so does a shard whose root predates pinned shard sizes.
//!
//! Time: curl's low-speed rule, fewer than `low_speed_limit` bytes per
//! second over a window of `low_speed_time` fails the attempt (retried as a
//! timeout is), and the small index files must also arrive whole within
//! `index_timeout`.

use std::fmt;
use std::time::{Duration, Instant};

/// The cap on the root index, and on a shard its root pins no size for.
/// A root spends about 200 bytes per package: 16 MiB holds some 80,000,
/// far beyond any ROCm repository (a 10,000-package one is about 2 MB),
/// and keeps what a hostile mirror can make a client hold small.
pub const DEFAULT_INDEX_SIZE: u64 = 16 << 20;

/// The cap on a signature: a minisign signature is some 350 bytes (its
/// trusted comment is ours: repository, version, expiry), so 64 KiB is
/// generous for any comment, and not worth a setting.
pub const SIGNATURE_SIZE: u64 = 64 << 10;

/// The cap on a file a package index links to without giving its size (a
/// wheel pip would install): the largest wheels published (PyTorch's for
/// ROCm) are under 5 GiB.
pub const DEFAULT_WHEEL_SIZE: u64 = 8 << 30;

/// Bytes per second below which a transfer is failing (over the window).
pub const DEFAULT_LOW_SPEED_LIMIT: u64 = 1024;

/// The window the minimum rate is judged over.
pub const DEFAULT_LOW_SPEED_TIME: Duration = Duration::from_secs(30);

/// How long the root, its signature or a shard may take in all.
pub const DEFAULT_INDEX_TIMEOUT: Duration = Duration::from_secs(120);

/// The bounds on reads from a mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The cap on the root index and on shards with no pinned size.
    pub index_size: u64,
    /// The cap on a file a package index links to without its size.
    pub wheel_size: u64,
    /// Fewer bytes per second than this over `low_speed_time` fails the
    /// attempt; 0 turns the check off.
    pub low_speed_limit: u64,
    pub low_speed_time: Duration,
    /// The longest one attempt at the root, its signature or a shard may
    /// take.
    pub index_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            index_size: DEFAULT_INDEX_SIZE,
            wheel_size: DEFAULT_WHEEL_SIZE,
            low_speed_limit: DEFAULT_LOW_SPEED_LIMIT,
            low_speed_time: DEFAULT_LOW_SPEED_TIME,
            index_timeout: DEFAULT_INDEX_TIMEOUT,
        }
    }
}

impl Limits {
    /// The cap on `path` when nothing signed pins its size: a signature's,
    /// or the index cap (the root, a shard of an older root).
    pub fn unpinned(&self, path: &str) -> Cap {
        if path.ends_with(".minisig") {
            Cap::Signature(SIGNATURE_SIZE)
        } else {
            Cap::Index(self.index_size)
        }
    }

    /// The cap on a file whose size may be pinned: the pin, else as
    /// [`Limits::unpinned`].
    pub fn pinned_or_unpinned(&self, path: &str, pinned: Option<u64>) -> Cap {
        pinned.map_or_else(|| self.unpinned(path), Cap::Pinned)
    }
}

/// The most bytes a read may return, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// The configured cap on index files.
    Index(u64),
    /// The fixed cap on signatures.
    Signature(u64),
    /// The exact size the signed index pins.
    Pinned(u64),
    /// The size a package index's page gives a file it links to.
    Listed(u64),
    /// The configured cap on a file a package index links to without its
    /// size (a wheel).
    Wheel(u64),
}

impl Cap {
    pub fn bytes(self) -> u64 {
        match self {
            Cap::Index(bytes)
            | Cap::Signature(bytes)
            | Cap::Pinned(bytes)
            | Cap::Listed(bytes)
            | Cap::Wheel(bytes) => bytes,
        }
    }

    /// Whether going past it contradicts the signed index (tampering), as
    /// opposed to a file merely too large to accept.
    pub fn is_pinned(self) -> bool {
        matches!(self, Cap::Pinned(_))
    }

    /// Checks that `length` bytes are within the cap.
    pub fn check(self, length: u64) -> Result<(), LimitError> {
        if length > self.bytes() {
            return Err(LimitError::TooLarge { cap: self });
        }
        Ok(())
    }
}

impl fmt::Display for Cap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cap::Index(bytes) => write!(f, "the {bytes}-byte cap on index files (max-index-size)"),
            Cap::Signature(bytes) => write!(f, "the {bytes}-byte cap on signatures"),
            Cap::Pinned(bytes) => write!(f, "the {bytes} bytes the signed index pins"),
            Cap::Listed(bytes) => write!(f, "the {bytes} bytes the package index gives"),
            Cap::Wheel(bytes) => write!(f, "the {bytes}-byte cap on wheels (max-wheel-size)"),
        }
    }
}

/// A read that went past a bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    #[error("longer than {cap}; stopped there")]
    TooLarge { cap: Cap },
    #[error("declares {declared} bytes, more than {cap}")]
    DeclaredTooLarge { declared: u64, cap: Cap },
    #[error("fewer than {limit} bytes per second over {}s (low-speed-limit, low-speed-time)", time.as_secs_f64())]
    TooSlow { limit: u64, time: Duration },
    #[error("not complete after {}s (index-timeout)", .0.as_secs_f64())]
    Deadline(Duration),
}

/// The minimum-rate rule over consecutive windows: each window of
/// `low_speed_time` must bring `low_speed_limit × low_speed_time` bytes.
#[derive(Debug, Clone)]
pub struct LowSpeed {
    limit: u64,
    time: Duration,
    window_start: Instant,
    in_window: u64,
}

impl LowSpeed {
    /// Starts the first window now.
    pub fn new(limits: &Limits) -> LowSpeed {
        LowSpeed {
            limit: limits.low_speed_limit,
            time: limits.low_speed_time.max(Duration::from_millis(1)),
            window_start: Instant::now(),
            in_window: 0,
        }
    }

    /// When the current window closes: waiting for bytes past it must end
    /// to judge the window.
    pub fn window_end(&self) -> Instant {
        self.window_start + self.time
    }

    /// Counts `bytes` received at `now` (0 when a wait ended without
    /// bytes); once the window has closed, fails if it brought too few,
    /// else starts the next.
    pub fn received(&mut self, bytes: u64, now: Instant) -> Result<(), LimitError> {
        self.in_window = self.in_window.saturating_add(bytes);
        if now < self.window_end() {
            return Ok(());
        }
        let needed = self.limit as f64 * now.duration_since(self.window_start).as_secs_f64();
        if (self.in_window as f64) < needed {
            return Err(LimitError::TooSlow {
                limit: self.limit,
                time: self.time,
            });
        }
        self.window_start = now;
        self.in_window = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_with_too_few_bytes_fails_and_a_full_one_starts_the_next() {
        let limits = Limits {
            low_speed_limit: 100,
            low_speed_time: Duration::from_secs(2),
            ..Limits::default()
        };
        let mut speed = LowSpeed::new(&limits);
        let start = speed.window_start;
        speed.received(150, start + Duration::from_secs(1)).unwrap();
        speed.received(50, start + Duration::from_secs(2)).unwrap();
        speed.received(10, start + Duration::from_secs(3)).unwrap();
        let error = speed
            .received(0, start + Duration::from_secs(4))
            .unwrap_err();
        assert!(
            error.to_string().contains("100 bytes per second"),
            "{error}"
        );

        let off = Limits {
            low_speed_limit: 0,
            ..limits
        };
        let mut speed = LowSpeed::new(&off);
        let start = speed.window_start;
        speed.received(0, start + Duration::from_secs(60)).unwrap();
    }

    #[test]
    fn caps_name_what_they_bound() {
        let limits = Limits::default();
        let root = limits.unpinned("index.toml");
        assert_eq!(root, Cap::Index(DEFAULT_INDEX_SIZE));
        assert!(root.check(DEFAULT_INDEX_SIZE).is_ok());
        let error = root.check(DEFAULT_INDEX_SIZE + 1).unwrap_err().to_string();
        assert!(
            error.contains("16777216") && error.contains("max-index-size"),
            "{error}"
        );
        assert_eq!(
            limits.unpinned("roots/3.toml.minisig"),
            Cap::Signature(SIGNATURE_SIZE)
        );
        assert_eq!(
            limits.pinned_or_unpinned("packages/a/b.toml", Some(10)),
            Cap::Pinned(10)
        );
        assert!(Cap::Pinned(10).is_pinned());
    }
}

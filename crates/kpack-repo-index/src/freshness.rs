//! Whether a root index is fresh enough to use: not older than a version
//! already seen (a rollback) and not expired. One check, with one policy,
//! for `kpack-repo verify` and `mirror` and for kpack-get.

use crate::schema::RootIndex;
use crate::types::Timestamp;

/// What a reader accepts of a root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    pub now: Timestamp,
    /// The highest version of this repository already seen, if any.
    pub seen: Option<u64>,
    /// Accept an older version than `seen` (and say so).
    pub allow_rollback: bool,
    /// Accept an expired root (and say so).
    pub allow_expired: bool,
}

/// Why a root is not fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stale {
    Rollback { found: u64, seen: u64 },
    Expired { expires: Timestamp, now: Timestamp },
}

impl Freshness {
    /// A policy that accepts no stale root.
    pub fn strict(now: Timestamp, seen: Option<u64>) -> Freshness {
        Freshness {
            now,
            seen,
            allow_rollback: false,
            allow_expired: false,
        }
    }

    /// Checks `root`, rollback first: the staleness the policy refuses is
    /// the error; what it allows is returned, for the caller to warn about.
    pub fn check(&self, root: &RootIndex) -> Result<Vec<Stale>, Stale> {
        let mut allowed = Vec::new();
        if let Some(seen) = self.seen.filter(|seen| root.repo.version < *seen) {
            let stale = Stale::Rollback {
                found: root.repo.version,
                seen,
            };
            if !self.allow_rollback {
                return Err(stale);
            }
            allowed.push(stale);
        }
        if root.repo.expires < self.now {
            let stale = Stale::Expired {
                expires: root.repo.expires,
                now: self.now,
            };
            if !self.allow_expired {
                return Err(stale);
            }
            allowed.push(stale);
        }
        Ok(allowed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(version: u64, expires: i64) -> RootIndex {
        let text = format!(
            "format = 1\n[repo]\nname = \"rocm\"\nversion = {version}\n\
             generated = 2026-01-01T00:00:00Z\nexpires = {}\n",
            Timestamp::from_second(expires).unwrap()
        );
        RootIndex::parse("index.toml", &text).unwrap()
    }

    #[test]
    fn a_rollback_is_refused_before_expiry_and_allowed_ones_are_returned() {
        let now = Timestamp::from_second(2_000_000_000).unwrap();
        let old_and_expired = root(3, 1_900_000_000);
        let strict = Freshness::strict(now, Some(5));
        assert!(matches!(
            strict.check(&old_and_expired),
            Err(Stale::Rollback { found: 3, seen: 5 })
        ));
        let lenient = Freshness {
            allow_rollback: true,
            ..strict
        };
        assert!(matches!(
            lenient.check(&old_and_expired),
            Err(Stale::Expired { .. })
        ));
        let both = Freshness {
            allow_expired: true,
            ..lenient
        };
        assert_eq!(both.check(&old_and_expired).unwrap().len(), 2);
        assert_eq!(strict.check(&root(5, 2_100_000_000)).unwrap(), []);
    }
}

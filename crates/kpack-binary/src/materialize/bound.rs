//! How far the archives a binary is materialized from may expand: each
//! one's code objects, every TOC entry counted, may decode to what its
//! repository declares (`unpacked-size`), to what whoever materializes
//! gives, or for an archive nothing declares a size for, to a ratio of its
//! own size. An archive whose TOC lists more is refused before anything
//! is written, so a fat binary is at most its input, the code the
//! archives may decode to, and its bundles' headers and alignment.

use rocm_kpack::Archive;

use crate::error::{Error, Result};

/// How many times its own size an archive that declares nothing may
/// decode to: the rule a repository applies to a tree that declares no
/// `unpacked-size`. Code objects compress a few times; a bomb thousands.
pub const UNDECLARED_RATIO: u64 = 256;

/// The least an archive that declares nothing may decode to, whatever
/// its size.
pub const MIN_UNDECLARED_LIMIT: u64 = 64 << 20;

/// Archives checked against the most their code objects may decode to.
#[derive(Debug)]
pub struct BoundedArchives {
    archives: Vec<Archive>,
    decoded: u64,
}

impl BoundedArchives {
    /// Each archive with the bytes its repository declares its code
    /// objects decode to; one whose TOC lists more is refused.
    pub fn declared(archives: Vec<(Archive, u64)>) -> Result<BoundedArchives> {
        let mut bounded = BoundedArchives::empty();
        for (archive, declared) in archives {
            bounded.push(archive, declared, || "its repository declares".to_owned())?;
        }
        Ok(bounded)
    }

    /// Archives nothing declares a size for: each may decode to
    /// [`UNDECLARED_RATIO`] times its size, at least
    /// [`MIN_UNDECLARED_LIMIT`].
    pub fn undeclared(archives: Vec<Archive>) -> Result<BoundedArchives> {
        let mut bounded = BoundedArchives::empty();
        for archive in archives {
            let size = archive.file_size();
            bounded.push(archive, undeclared_limit(size), || {
                format!(
                    "allowed to an archive of {size} bytes that declares no size \
                     ({UNDECLARED_RATIO} times its size, at least {MIN_UNDECLARED_LIMIT})"
                )
            })?;
        }
        Ok(bounded)
    }

    /// Archives whose code objects may decode to `limit` bytes in all.
    pub fn within(archives: Vec<Archive>, limit: u64) -> Result<BoundedArchives> {
        let mut bounded = BoundedArchives::empty();
        for archive in archives {
            let left = limit.saturating_sub(bounded.decoded);
            bounded.push(archive, left, || {
                format!("left of the {limit} given for the archives in all")
            })?;
        }
        Ok(bounded)
    }

    /// The archives, in the order they are searched.
    pub fn archives(&self) -> &[Archive] {
        &self.archives
    }

    /// The bytes their code objects decode to, in all: at most their
    /// limits, and at least what the bundles made from them hold.
    pub fn decoded_size(&self) -> u64 {
        self.decoded
    }

    fn empty() -> BoundedArchives {
        BoundedArchives {
            archives: Vec::new(),
            decoded: 0,
        }
    }

    /// Adds `archive`, refused when its TOC lists more than `limit` bytes
    /// (`why` says where the limit comes from).
    fn push(&mut self, archive: Archive, limit: u64, why: impl FnOnce() -> String) -> Result<()> {
        let decoded = archive.decoded_size();
        if decoded > limit {
            return Err(Error::DecodesPastLimit {
                path: archive.path().to_owned(),
                decoded,
                limit,
                why: why(),
            });
        }
        self.decoded = self.decoded.saturating_add(decoded);
        self.archives.push(archive);
        Ok(())
    }
}

/// The most an archive of `size` bytes that declares nothing may decode to.
pub fn undeclared_limit(size: u64) -> u64 {
    size.saturating_mul(UNDECLARED_RATIO)
        .max(MIN_UNDECLARED_LIMIT)
}

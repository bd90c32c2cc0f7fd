//! How downloads report progress. The library only calls this trait; the
//! binary draws bars or prints lines.

use crate::Sha256;

/// Receives download events, each about the file with the given hash.
pub trait Progress: Send + Sync {
    /// A file starts (or restarts) at `position` of `total` bytes.
    fn start(&self, file: &Sha256, name: &str, total: u64, position: u64);
    /// `bytes` more of `file` arrived.
    fn advance(&self, file: &Sha256, bytes: u64);
    /// `file` is complete; `cached` when nothing had to be downloaded.
    fn finish(&self, file: &Sha256, cached: bool);
    /// Something worth telling: a retry, a mirror switch, a restart.
    fn note(&self, text: &str);
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn start(&self, _: &Sha256, _: &str, _: u64, _: u64) {}
    fn advance(&self, _: &Sha256, _: u64) {}
    fn finish(&self, _: &Sha256, _: bool) {}
    fn note(&self, _: &str) {}
}

//! How downloads report progress. The library only calls this trait; the
//! binary draws bars or prints lines.

/// Receives download events. `id` numbers the files of one batch.
pub trait Progress: Send + Sync {
    /// A file starts (or restarts) at `position` of `total` bytes.
    fn start(&self, id: usize, name: &str, total: u64, position: u64);
    /// `bytes` more arrived for file `id`.
    fn advance(&self, id: usize, bytes: u64);
    /// File `id` is complete; `cached` when nothing had to be downloaded.
    fn finish(&self, id: usize, cached: bool);
    /// Something worth telling: a retry, a mirror switch, a restart.
    fn note(&self, text: &str);
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Progress for Silent {
    fn start(&self, _: usize, _: &str, _: u64, _: u64) {}
    fn advance(&self, _: usize, _: u64) {}
    fn finish(&self, _: usize, _: bool) {}
    fn note(&self, _: &str) {}
}

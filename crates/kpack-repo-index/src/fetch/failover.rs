//! The one failover over a repository's mirrors: each in order, each
//! one's last failure kept, and every mirror's failure reported when none
//! serves. [`Walk`] is the order and the record; [`Failover`] adds the
//! retries with backoff a fetch makes on each mirror, and
//! [`Client::first_mirror`](super::Client::first_mirror) runs any other
//! work (verifying a root) over the same walk.

use super::failure::Failure;
use super::{ClientError, ClientOptions, Mirror, MirrorFailure, MirrorFile, Progress};

/// Which mirror is being tried, and the failure each one given up left.
#[derive(Debug)]
pub(super) struct Walk<'a, F> {
    mirrors: &'a [Mirror],
    at: usize,
    /// The last failure on the mirror being tried.
    last: Option<F>,
    failures: Vec<(&'a Mirror, F)>,
}

impl<'a, F> Walk<'a, F> {
    pub fn new(mirrors: &'a [Mirror]) -> Walk<'a, F> {
        Walk {
            mirrors,
            at: 0,
            last: None,
            failures: Vec::new(),
        }
    }

    /// The mirror being tried; `None` once every mirror was given up.
    pub fn current(&self) -> Option<&'a Mirror> {
        self.mirrors.get(self.at)
    }

    /// Whether a mirror follows the one being tried.
    pub fn has_next(&self) -> bool {
        self.at + 1 < self.mirrors.len()
    }

    /// Keeps `failure` as the mirror's last.
    pub fn failed(&mut self, failure: F) {
        self.last = Some(failure);
    }

    /// Gives up the mirror being tried, keeping its last failure (shaped by
    /// `record`, which is told the mirror), and moves to the next.
    pub fn give_up(&mut self, record: impl FnOnce(&'a Mirror, F) -> F) {
        if let (Some(mirror), Some(failure)) = (self.current(), self.last.take()) {
            self.failures.push((mirror, record(mirror, failure)));
        }
        self.at += 1;
    }

    /// Every mirror's failure, in the order they were tried.
    pub fn into_failures(self) -> Vec<(&'a Mirror, F)> {
        self.failures
    }
}

/// A fetch's failover: each mirror retried with backoff while its failures
/// say a retry may help; when every mirror has failed, the error lists
/// each one's last failure.
///
/// ```text
/// while let Some(location) = failover.next().await {
///     match attempt(location).await { Ok(v) => return Ok(v), Err(f) => failover.failed(f)? }
/// }
/// Err(failover.into_error())
/// ```
pub(super) struct Failover<'a> {
    options: &'a ClientOptions,
    path: &'a str,
    progress: &'a dyn Progress,
    walk: Walk<'a, MirrorFailure>,
    /// The attempts made on the mirror being tried.
    attempts: u32,
}

impl<'a> Failover<'a> {
    pub fn new(
        options: &'a ClientOptions,
        mirrors: &'a [Mirror],
        path: &'a str,
        progress: &'a dyn Progress,
    ) -> Failover<'a> {
        Failover {
            options,
            path,
            progress,
            walk: Walk::new(mirrors),
            attempts: 0,
        }
    }

    fn allowed(&self) -> u32 {
        self.options.attempts.max(1)
    }

    /// Where to try next (after the backoff a retry waits); `None` once
    /// every mirror has failed.
    pub async fn next(&mut self) -> Option<MirrorFile> {
        loop {
            let mirror = self.walk.current()?;
            if self.attempts < self.allowed() {
                if self.attempts > 0 {
                    let delay = self.options.backoff * 2u32.pow(self.attempts - 1);
                    tokio::time::sleep(delay).await;
                }
                self.attempts += 1;
                return Some(mirror.locate(self.path));
            }
            self.give_up_on_mirror();
        }
    }

    /// Takes an attempt's failure: a fatal one ends the fetch.
    pub fn failed(&mut self, failure: Failure) -> Result<(), ClientError> {
        let failure = match failure {
            Failure::Fatal(error) => return Err(error),
            Failure::Retry(error) => {
                if self.attempts < self.allowed() {
                    if let Some(mirror) = self.walk.current() {
                        let location = mirror.locate(self.path);
                        self.progress
                            .note(&format!("{location}: {error}; retrying"));
                    }
                }
                MirrorFailure::new(error, false, false)
            }
            Failure::NextMirror { error, integrity } => {
                self.attempts = self.allowed();
                MirrorFailure::new(error, integrity, false)
            }
            Failure::Missing(error) => {
                self.attempts = self.allowed();
                MirrorFailure::new(error, false, true)
            }
        };
        self.walk.failed(failure);
        Ok(())
    }

    fn give_up_on_mirror(&mut self) {
        let (path, progress, has_next) = (self.path, self.progress, self.walk.has_next());
        self.walk.give_up(|mirror, mut failure| {
            let location = mirror.locate(path);
            if has_next {
                let error = &failure.error;
                progress.note(&format!("{location}: {error}; trying the next mirror"));
            }
            failure.url = location.to_string();
            failure
        });
        self.attempts = 0;
    }

    pub fn into_error(self) -> ClientError {
        ClientError::AllMirrorsFailed {
            path: self.path.to_owned(),
            failures: self
                .walk
                .into_failures()
                .into_iter()
                .map(|(_, failure)| failure)
                .collect(),
        }
    }
}

//! Reading repositories. A [`Mirror`] is a place that serves a copy of a
//! repository (an HTTP(S) base URL or a directory); the [`Client`] fetches
//! files from mirrors with retries, resume and failover, into memory or the
//! content-addressed [`Cache`].

pub mod cache;
mod client;
mod download;
mod failover;
mod failure;
mod mirror;
pub mod progress;
mod resume;
mod sink;
mod small;
mod stream;
mod transfer;
mod writeback;

pub use cache::{Cache, CleanReport};
pub use client::{Client, ClientError, ClientOptions, MirrorFailure, PinnedFile, Wanted};
pub use failure::AttemptError;
pub use mirror::{InvalidMirror, Mirror, MirrorFile};
pub use progress::{Progress, Silent};

//! "Is my GPU's code installed?", answered before a kernel launch fails
//! with `hipErrorInvalidImage`: every installed split or fat binary of a
//! prefix ([`prefix`]) or Python environment ([`environment`]) checked for
//! every GPU the way its runtime will load it ([`binary`]), the packages'
//! device code against what an install for the GPUs would choose
//! ([`package`], with the repository index kept offline: [`index`]), and
//! one typed report ([`report`]) naming each failure, why, and the command
//! that fixes it ([`fix`]).

pub mod binary;
pub mod environment;
pub mod fix;
pub mod index;
pub mod package;
pub mod prefix;
pub mod report;

pub use environment::EnvironmentCheck;
pub use fix::Invocation;
pub use index::{KeptIndex, Published};
pub use prefix::PrefixCheck;
pub use report::{CheckReport, Finding, FixCommand, Reason, Remedy, SCHEMA};

use crate::pip::materialize::MaterializeError;
use crate::pip::PipError;

/// Why an environment cannot be checked.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// Its distributions cannot be read.
    #[error(transparent)]
    Pip(#[from] PipError),
    /// A distribution's RECORD cannot be read.
    #[error(transparent)]
    Materialize(#[from] MaterializeError),
}

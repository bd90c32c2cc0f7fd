//! Python integration (06-python.md): the device extras this machine needs
//! ([`extras`]), the environment and what is installed in it
//! ([`environment`]), the resolver's report of candidates' extras
//! ([`report`]), the environment's installer ([`installer`]), requirement
//! text ([`requirement`]), where installers find files ([`links`]),
//! choosing variant wheels ([`variants`]), requirements resolved with
//! their extras ([`resolution`]), the device distributions an environment
//! lacks installed ([`sync`]), and the host distributions' split binaries
//! laid out for the environment's HIP runtime ([`layout`], with
//! [`materialize`]).

pub mod dist_file;
pub mod download;
pub mod environment;
pub mod extras;
pub mod install;
pub mod installer;
pub mod layout;
pub mod links;
pub mod materialize;
pub mod prune;
pub mod report;
pub mod requirement;
pub mod resolution;
pub mod sync;
pub mod variants;

use std::path::PathBuf;

use kpack_wheel::variants::VariantsFileError;
use kpack_wheel::MetadataError;

/// What can go wrong talking to Python and its installers.
#[derive(Debug, thiserror::Error)]
pub enum PipError {
    /// A program could not be started.
    #[error("cannot run {program}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The interpreter failed to answer about itself.
    #[error("{python} failed to describe its environment: {message}")]
    Interpreter {
        /// The interpreter.
        python: PathBuf,
        /// Its error output.
        message: String,
    },
    /// The interpreter's answer was not the JSON asked for.
    #[error("{python} answered something unexpected about its environment")]
    InterpreterAnswer {
        /// The interpreter.
        python: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// Neither pip in the environment nor uv could be found.
    #[error("the environment of {python} has no pip, and no uv was found (UV or PATH)")]
    NoInstaller {
        /// The interpreter.
        python: PathBuf,
    },
    /// No pip anywhere to resolve requirements with.
    #[error("resolving requirements needs pip, and neither {python} nor python3 on PATH has it")]
    NoResolver {
        /// The interpreter.
        python: PathBuf,
    },
    /// The installer or resolver failed.
    #[error("{command} failed ({status}):\n{message}")]
    Installer {
        /// The command, for people.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr (and stdout when stderr was empty).
        message: String,
    },
    /// pip's report could not be read.
    #[error("pip's installation report is not what was expected")]
    Report(#[source] serde_json::Error),
    /// An installed distribution's METADATA cannot be read.
    #[error("cannot read {path}")]
    Metadata {
        /// The METADATA file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: MetadataError,
    },
    /// A variant metadata file is not valid.
    #[error(transparent)]
    Variants(#[from] VariantsFileError),
    /// A requirement that cannot be understood.
    #[error("requirement `{text}`: {reason}")]
    Requirement {
        /// The requirement.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// A page or file could not be fetched.
    #[error("cannot fetch {url}")]
    Fetch {
        /// What was asked for.
        url: String,
        /// Why.
        #[source]
        source: kpack_repo_index::fetch::ClientError,
    },
    /// A package index's JSON page (PEP 691) is not what the PEP says.
    #[error("{url}: not a package index's JSON page")]
    Page {
        /// The page.
        url: String,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A file does not have the digest its page gives.
    #[error("{location}: sha256 {actual}, but the package index gives {expected}")]
    HashMismatch {
        /// The file.
        location: String,
        /// The digest the page gives.
        expected: kpack_repo_index::Sha256,
        /// The file's.
        actual: kpack_repo_index::Sha256,
    },
    /// A local file is longer than its bound.
    #[error("{location}")]
    TooLarge {
        /// The file.
        location: String,
        /// The bound.
        #[source]
        source: kpack_repo_index::limits::LimitError,
    },
    /// A file a page links to is not there (HTTP 404 or 410).
    #[error("{url}: not found, though a page links to it")]
    Gone {
        /// The file's URL.
        url: String,
    },
    /// An entry wheel demands every GPU's device code, so downloading it
    /// downloads all of them.
    #[error("{name} from this index demands every GPU's device code (`{requirement}`), so downloading it downloads every device wheel; offer the same version with explicit extras (the index's `whl-next/` twin) first, with --index-url or --extra-index-url after --")]
    EveryGpuIndex {
        /// The entry distribution.
        name: String,
        /// Its demanding requirement.
        requirement: String,
    },
    /// A `.dist-info` file a prune reads or edits cannot be read.
    #[error("cannot prune: {reason}")]
    DistInfo {
        /// Why, naming the file.
        reason: String,
    },
    /// A `.dist-info` file a prune edits cannot be written.
    #[error("cannot prune: cannot write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file or directory could not be read or written.
    #[error(transparent)]
    Io(std::io::Error),
}

//! The Python packaging vocabulary shared by the wheel splitter and
//! kpack-get's pip integration (06-python.md):
//!
//! - [`filename`]: wheel file names, with PEP 825 variant labels;
//! - [`names`]: distribution (PEP 503) and extra (PEP 685) names;
//! - [`metadata`]: reading and extending core metadata (`METADATA`);
//! - [`record`]: an installed distribution's `RECORD`, read and edited;
//! - [`variants`]: variant properties, `variant.json` and
//!   `{name}-{version}-variants.json`, and ordering variants for a machine.
#![forbid(unsafe_code)]

pub mod filename;
pub mod metadata;
pub mod names;
pub mod record;
pub mod variants;

pub use filename::{FilenameProblem, InvalidFilename, VariantLabel, WheelFilename};
pub use metadata::{Metadata, MetadataEditor, MetadataError, RequiresDist};
pub use names::{DistName, ExtraName, InvalidName};
pub use record::{Record, RecordError, RecordHash, RecordProblem, RecordRow};

/// The most bytes a `.dist-info`'s METADATA, WHEEL or RECORD may have,
/// wherever it is read (a wheel's member, an installed file): each is
/// read whole.
pub const MAX_DIST_INFO_FILE_SIZE: u64 = 64 << 20;

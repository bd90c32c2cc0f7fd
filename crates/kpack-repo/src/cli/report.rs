//! The parts of reports several commands share.

use serde::Serialize;

/// `signed` or `unsigned`.
pub(super) fn signing(signed: bool) -> &'static str {
    if signed {
        "signed"
    } else {
        "unsigned"
    }
}

/// A package version in a report.
#[derive(Debug, Serialize)]
pub(super) struct VersionReport {
    pub(super) name: String,
    pub(super) version: String,
}

//! All of kpack-get's output goes through here: human lines on stdout,
//! warnings and notes on stderr, or one JSON document on stdout.

use std::io::{IsTerminal, Write};

use kpack_cli::ByteSize;
use kpack_gpu::Owner;
use kpack_repo_index::{Artifact, ArtifactKind, Component, Encoding, Listed, RelativePath};
use serde::Serialize;

/// How much to say, and in what form.
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    pub quiet: bool,
    pub verbose: bool,
    pub json: bool,
    /// Progress bars (a terminal, and not asked to be quiet).
    pub bars: bool,
}

impl Printer {
    pub fn new(quiet: bool, verbose: bool, json: bool, no_progress: bool) -> Printer {
        let bars = !quiet && !json && !no_progress && std::io::stderr().is_terminal();
        Printer {
            quiet,
            verbose,
            json,
            bars,
        }
    }

    /// A line of the command's normal output (not with --json or -q).
    pub fn line(&self, text: impl AsRef<str>) {
        if !self.quiet && !self.json {
            write_out(text.as_ref());
        }
    }

    /// A line only with -v.
    pub fn detail(&self, text: impl AsRef<str>) {
        if self.verbose && !self.json {
            write_out(text.as_ref());
        }
    }

    /// Something the user should know about, on stderr.
    pub fn note(&self, text: impl AsRef<str>) {
        if !self.quiet {
            write_err(&format!("note: {}", text.as_ref()));
        }
    }

    /// A warning, on stderr even with -q.
    pub fn warn(&self, text: impl AsRef<str>) {
        write_err(&format!("warning: {}", text.as_ref()));
    }

    /// A command's typed report, with --json.
    pub fn report(&self, report: &impl serde::Serialize) {
        if self.json {
            write_out(&serde_json::to_string_pretty(report).unwrap_or_default());
        }
    }
}

/// The library's steps say what they find and do through the printer.
impl rocm_kpack_get::output::Output for Printer {
    fn line(&self, text: &str) {
        Printer::line(self, text);
    }

    fn detail(&self, text: &str) {
        Printer::detail(self, text);
    }

    fn note(&self, text: &str) {
        Printer::note(self, text);
    }

    fn warn(&self, text: &str) {
        Printer::warn(self, text);
    }
}

/// Writes a line to stdout; a closed pipe (`| head`) ends quietly.
fn write_out(text: &str) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{text}").is_err() {
        std::process::exit(0);
    }
}

pub fn write_err(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// An artifact for a listing: size, path, and for device code the targets
/// it serves and its component (`[gfx1100] tensile`), or the sub-family or
/// family that owns it (`[owner gfx11] aotriton`).
pub fn artifact_line(artifact: &kpack_repo_index::Artifact) -> String {
    ArtifactReport::from(artifact).line()
}

/// The format version of every report's JSON (`schema`), shared by the
/// kpack tools. Report fields are declared in the order the JSON has
/// always listed them, by name, `schema` first.
pub use kpack_cli::SCHEMA;

/// An artifact in a report: path, kind, size, hash (of the bytes served),
/// targets, owner, component, and the transport encoding it is served
/// with, if any.
#[derive(Debug, Clone, Serialize)]
pub struct ArtifactReport<'a> {
    pub component: Option<&'a Component>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<&'a Encoding>,
    pub kind: ArtifactKind,
    pub owner: &'a Option<Owner>,
    pub path: &'a RelativePath,
    pub sha256: String,
    pub size: u64,
    pub targets: &'a Option<Vec<Listed>>,
}

impl ArtifactReport<'_> {
    /// The artifact for a listing (see [`artifact_line`]).
    pub fn line(&self) -> String {
        let device = match (self.owner, self.targets, self.component) {
            (Some(owner), _, Some(component)) => format!(" [owner {owner}] {component}"),
            (None, Some(targets), Some(component)) => format!(
                " [{}] {component}",
                kpack_repo_index::resolve::join_listed(targets)
            ),
            _ => String::new(),
        };
        format!("{:>10}  {}{device}", ByteSize(self.size), self.path)
    }
}

impl<'a> From<&'a Artifact> for ArtifactReport<'a> {
    fn from(artifact: &'a Artifact) -> ArtifactReport<'a> {
        ArtifactReport {
            component: artifact.component(),
            encoding: artifact.encoding.as_ref(),
            kind: artifact.kind,
            owner: &artifact.owner,
            path: &artifact.path,
            sha256: artifact.sha256.to_string(),
            size: artifact.size,
            targets: &artifact.targets,
        }
    }
}

/// "downloads 2.1 MiB of 9.8 MiB: 79% saved".
pub fn saving(part: u64, full: u64) -> String {
    let saved = (full.saturating_sub(part))
        .saturating_mul(100)
        .checked_div(full)
        .unwrap_or(0);
    format!("{} of {}: {saved}% saved", ByteSize(part), ByteSize(full))
}

/// What an install fetched of the `part` it needed (of a fat install's
/// `full`), `cached` of it taken from the cache: "downloaded 696.7 KiB
/// (7.8 MiB from the cache); 8.4 MiB of 10.2 MiB: 17% saved".
pub fn fetched(part: u64, full: u64, cached: u64) -> String {
    match cached.min(part) {
        0 => format!("downloaded {}", saving(part, full)),
        all if all == part => format!(
            "nothing downloaded (all from the cache); {}",
            saving(part, full)
        ),
        some => format!(
            "downloaded {} ({} from the cache); {}",
            ByteSize(part - some),
            ByteSize(some),
            saving(part, full)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saving_says_what_share_of_a_fat_install_is_left_out() {
        assert_eq!(
            saving(2_202_009, 10_276_044),
            "2.1 MiB of 9.8 MiB: 78% saved"
        );
        assert_eq!(saving(0, 0), "0 B of 0 B: 0% saved");
    }

    #[test]
    fn fetched_says_what_came_from_the_cache() {
        let (part, full) = (2_202_009, 10_276_044);
        assert_eq!(
            fetched(part, full, 0),
            "downloaded 2.1 MiB of 9.8 MiB: 78% saved"
        );
        assert_eq!(
            fetched(part, full, part),
            "nothing downloaded (all from the cache); 2.1 MiB of 9.8 MiB: 78% saved"
        );
        assert_eq!(
            fetched(part, full, 1 << 20),
            "downloaded 1.1 MiB (1.0 MiB from the cache); 2.1 MiB of 9.8 MiB: 78% saved"
        );
    }
}

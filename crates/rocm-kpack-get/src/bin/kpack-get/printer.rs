//! All of kpack-get's output goes through here: human lines on stdout,
//! warnings and notes on stderr, or one JSON document on stdout.

use std::io::IsTerminal;

use kpack_cli::ByteSize;
use kpack_gpu::Owner;
use kpack_repo_index::schema::{BuiltFrom, SourceKind};
use kpack_repo_index::{Artifact, ArtifactKind, Component, Encoding, Listed, RelativePath};
use serde::Serialize;

/// How much to say, and in what form: kpack-cli's printer, which every
/// tool speaks through, and whether progress bars are drawn.
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    text: kpack_cli::Printer,
    /// Progress bars (a terminal, and not asked to be quiet).
    pub bars: bool,
}

impl std::ops::Deref for Printer {
    type Target = kpack_cli::Printer;

    fn deref(&self) -> &kpack_cli::Printer {
        &self.text
    }
}

impl Printer {
    pub fn new(quiet: bool, verbose: bool, json: bool, no_progress: bool) -> Printer {
        let bars = !quiet && !json && !no_progress && std::io::stderr().is_terminal();
        Printer {
            text: kpack_cli::Printer {
                quiet,
                verbose,
                json,
            },
            bars,
        }
    }

    /// A command's typed report, which carries its own `schema`, with
    /// --json.
    pub fn report(&self, report: &impl serde::Serialize) {
        if self.json {
            write_out(&serde_json::to_string_pretty(report).unwrap_or_default());
        }
    }
}

/// The library's steps say what they find and do through the printer.
impl rocm_kpack_get::output::Output for Printer {
    fn line(&self, text: &str) {
        self.text.line(text);
    }

    fn detail(&self, text: &str) {
        self.text.detail(text);
    }

    fn note(&self, text: &str) {
        self.text.note(text);
    }

    fn warn(&self, text: &str) {
        self.text.warn(text);
    }

    fn watched(&self) -> bool {
        self.bars
    }
}

pub use kpack_cli::{write_err, write_out};

/// An artifact for a listing: its size and what it is, with its path in
/// the pool when asked (see [`ArtifactReport::line`]).
pub fn artifact_line(artifact: &kpack_repo_index::Artifact, with_path: bool) -> String {
    ArtifactReport::from(artifact).line(with_path)
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
    /// The artifact for a listing: its size and what it is (see
    /// [`ArtifactReport::label`]), with its path in the pool when asked.
    pub fn line(&self, with_path: bool) -> String {
        let line = format!("{:>10}  {}", ByteSize(self.size), self.label());
        match with_path {
            true => format!("{line}  ({})", self.path),
            false => line,
        }
    }

    /// What the artifact is, as users think of it: "host part", "kernels
    /// for gfx1100", "tensile for gfx1030", "aotriton for every gfx11 GPU".
    pub fn label(&self) -> String {
        let component = self.component.map_or("kernels", Component::as_str);
        match (self.owner, self.targets) {
            (Some(owner), _) => format!("{component} for every {owner} GPU"),
            (None, Some(targets)) if !targets.is_empty() => format!(
                "{component} for {}",
                kpack_repo_index::resolve::join_listed(targets)
            ),
            _ => "host part".to_owned(),
        }
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

/// What a package's chosen artifacts weigh against the fat packages it
/// was built from, where the index records them: "8.1 MiB; the Debian
/// package: 7.9 MiB", "2.1 MiB; the fat wheel: 9.8 MiB (78% less)".
pub fn against_source(part: u64, built_from: &[BuiltFrom]) -> String {
    let Some(first) = built_from.first() else {
        return ByteSize(part).to_string();
    };
    let full: u64 = built_from.iter().map(|b| b.size).sum();
    let one = built_from.len() == 1;
    let what = match first.kind {
        _ if built_from.iter().any(|b| b.kind != first.kind) => "the fat packages",
        SourceKind::Deb if one => "the Debian package",
        SourceKind::Deb => "the Debian packages",
        SourceKind::Wheel if one => "the fat wheel",
        SourceKind::Wheel => "the fat wheels",
        SourceKind::Tree if one => "the fat tree",
        SourceKind::Tree => "the fat trees",
    };
    let less = match full
        .saturating_sub(part)
        .saturating_mul(100)
        .checked_div(full)
    {
        Some(share @ 1..) => format!(" ({share}% less)"),
        _ => String::new(),
    };
    format!("{}; {what}: {}{less}", ByteSize(part), ByteSize(full))
}

/// What an install fetched of the `part` it needed, `cached` of it taken
/// from the cache: "downloaded 696.7 KiB (7.8 MiB from the cache)"; a dry
/// run (`done` false) says what it would download.
pub fn fetched(part: u64, cached: u64, done: bool) -> String {
    let (downloaded, nothing) = if done {
        ("downloaded", "nothing downloaded")
    } else {
        ("would download", "would download nothing")
    };
    match cached.min(part) {
        0 => format!("{downloaded} {}", ByteSize(part)),
        all if all == part => format!("{nothing} (all {} from the cache)", ByteSize(part)),
        some => format!(
            "{downloaded} {} ({} from the cache)",
            ByteSize(part - some),
            ByteSize(some)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(kind: SourceKind, size: u64) -> BuiltFrom {
        BuiltFrom {
            kind,
            file: "f".into(),
            size,
            package: None,
        }
    }

    #[test]
    fn a_download_is_compared_with_what_it_was_built_from() {
        let deb = source(SourceKind::Deb, 10_276_044);
        assert_eq!(
            against_source(2_202_009, std::slice::from_ref(&deb)),
            "2.1 MiB; the Debian package: 9.8 MiB (78% less)"
        );
        // More than the fat package is said as it is, never as a saving.
        assert_eq!(
            against_source(8_472_000, &[source(SourceKind::Deb, 8_231_000)]),
            "8.1 MiB; the Debian package: 7.8 MiB"
        );
        assert_eq!(
            against_source(100, &[source(SourceKind::Wheel, 100)]),
            "100 B; the fat wheel: 100 B"
        );
        assert_eq!(
            against_source(1, &[deb, source(SourceKind::Tree, 1)]),
            "1 B; the fat packages: 9.8 MiB (99% less)"
        );
        // Unknown: no comparison, least of all with the split pieces.
        assert_eq!(against_source(2_202_009, &[]), "2.1 MiB");
    }

    #[test]
    fn fetched_says_what_came_from_the_cache() {
        let part = 2_202_009;
        assert_eq!(fetched(part, 0, true), "downloaded 2.1 MiB");
        assert_eq!(
            fetched(part, part, true),
            "nothing downloaded (all 2.1 MiB from the cache)"
        );
        assert_eq!(
            fetched(part, 1 << 20, true),
            "downloaded 1.1 MiB (1.0 MiB from the cache)"
        );
        assert_eq!(
            fetched(part, part, false),
            "would download nothing (all 2.1 MiB from the cache)"
        );
        assert_eq!(fetched(part, 0, false), "would download 2.1 MiB");
    }
}

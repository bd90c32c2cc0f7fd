//! `info`: a package's versions and artifacts, and which would be chosen
//! for this machine's GPUs.

use kpack_cli::ByteSize;
use kpack_gpu::Target;
use kpack_repo_index::schema::BuiltFrom;
use kpack_repo_index::{select_artifacts, RelativePath, Shard, VersionEntry};
use rocm_kpack_get::repo::{suggestions, Repo};
use serde::Serialize;

use super::{parse_request, Context, Exit, Failure};
use crate::printer::{ArtifactReport, Printer, SCHEMA};

/// A package version, its artifacts, and which this machine would get.
#[derive(Debug, Serialize)]
struct InfoReport<'a> {
    schema: u32,
    artifacts: Vec<InfoArtifact<'a>>,
    depends: Vec<String>,
    gpus: Vec<String>,
    name: &'a str,
    repo: &'a str,
    summary: String,
    system_requires: &'a [String],
    built_from: &'a [BuiltFrom],
    version: String,
    versions: Vec<String>,
    why: Vec<String>,
}

impl InfoReport<'_> {
    /// The package version, its versions and dependencies, and each
    /// artifact, marked when chosen; why, with -v.
    fn render_text(&self, printer: &Printer) {
        let heading = format!("{} {} ({})", self.name, self.version, self.repo);
        printer.line(match self.summary.as_str() {
            "" => heading,
            summary => format!("{heading}: {summary}"),
        });
        printer.line(format!("versions: {}", self.versions.join(", ")));
        if !self.depends.is_empty() {
            printer.line(format!("depends: {}", self.depends.join(", ")));
        }
        if !self.system_requires.is_empty() {
            printer.line(format!(
                "system requires (not installed by kpack-get): {}",
                self.system_requires.join(", ")
            ));
        }
        if !self.built_from.is_empty() {
            let files: Vec<String> = self
                .built_from
                .iter()
                .map(|b| format!("{} ({})", b.file, ByteSize(b.size)))
                .collect();
            printer.line(format!("built from: {}", files.join(", ")));
        }
        printer.line(format!(
            "artifacts (* = chosen for {}):",
            if self.gpus.is_empty() {
                "this machine: no GPU found, host parts only".to_owned()
            } else {
                self.gpus.join(", ")
            }
        ));
        for artifact in &self.artifacts {
            let mark = if artifact.chosen { "*" } else { " " };
            printer.line(format!("{mark} {}", artifact.artifact.line(true)));
        }
        for explanation in &self.why {
            printer.detail(format!("  why: {explanation}"));
        }
    }
}

/// An artifact, and whether it is chosen for this machine.
#[derive(Debug, Serialize)]
struct InfoArtifact<'a> {
    chosen: bool,
    #[serde(flatten)]
    artifact: ArtifactReport<'a>,
}

pub fn info(context: &Context, package: &str) -> Result<(), Failure> {
    let request = parse_request(package)?;
    let client = context.client()?;
    let repos = context.repos(&client)?;
    let gpus = context.gpus()?.targets;
    for repo in &repos {
        let Some(shard) = repo.shard(&client, &context.cache, &request.name)? else {
            continue;
        };
        let newest = shard
            .versions
            .iter()
            .filter(|v| request.requirement.matches(&v.version))
            .max_by(|a, b| a.version.cmp(&b.version));
        if let Some(entry) = newest {
            show(context, repo, &shard, entry, &gpus);
            return Ok(());
        }
    }
    Err(Failure::new(
        Exit::NothingFits,
        anyhow::anyhow!("no package {package} in the configured repositories"),
    )
    .hint("`kpack-get search TEXT` lists what is available")
    .did_you_mean(&suggestions(&repos, &request.name)))
}

/// A version of a package: its versions, dependencies, and each artifact,
/// marked when this machine's GPUs would get it, with why.
fn show(context: &Context, repo: &Repo, shard: &Shard, entry: &VersionEntry, gpus: &[Target]) {
    let summary = repo
        .root
        .packages
        .get(&shard.name)
        .map(|p| p.summary.clone())
        .unwrap_or_default();
    // By semver, so 5.10.0 comes after 5.9.0.
    let mut versions: Vec<&semver::Version> = shard.versions.iter().map(|v| &v.version).collect();
    versions.sort();
    let versions: Vec<String> = versions.iter().map(ToString::to_string).collect();
    let selection = select_artifacts(entry, gpus, &repo.families);
    let chosen = |path: &RelativePath| selection.artifacts.iter().any(|a| &a.path == path);
    let artifacts = entry.artifacts.iter().map(|a| InfoArtifact {
        chosen: chosen(&a.path),
        artifact: ArtifactReport::from(a),
    });
    let report = InfoReport {
        schema: SCHEMA,
        artifacts: artifacts.collect(),
        depends: entry.depends.iter().map(ToString::to_string).collect(),
        gpus: gpus.iter().map(ToString::to_string).collect(),
        name: shard.name.as_str(),
        repo: &repo.config.name,
        summary,
        system_requires: &entry.system_requires,
        built_from: &entry.built_from,
        version: entry.version.to_string(),
        versions,
        why: selection
            .explanations
            .iter()
            .map(ToString::to_string)
            .collect(),
    };
    report.render_text(&context.printer);
    context.printer.report(&report);
}

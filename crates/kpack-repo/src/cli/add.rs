//! `kpack-repo add`: a package version's artifacts added to a repository
//! (directories packed into trees first) and a new root published.

use std::path::PathBuf;

use clap::Args;
use kpack_cli::{JsonArg, Printer};
use kpack_repo::build::{write_tree, TreeCompression};
use kpack_repo::publish::{self, NewArtifact, NewVersion};
use kpack_repo_index::address::Address;
use kpack_repo_index::types::{Component, Dependency, Listed, PackageName};
use serde::Serialize;

use super::options::{repository, secret, StorageArgs, TransportArgs};
use super::report::{signing, VersionReport};

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("device").args(["targets", "owner"])))]
#[command(group(clap::ArgGroup::new("signing").args(["key", "unsigned"]).required(true)))]
pub(super) struct AddArgs {
    /// The repository: a directory or s3://bucket/prefix.
    #[arg(value_parser = repository)]
    repo: Address,
    package: PackageName,
    version: semver::Version,
    /// Artifacts: .kpack archives, .tar.zst trees, or directories (packed
    /// into <name>.tar.zst trees).
    #[arg(required = true)]
    artifacts: Vec<PathBuf>,
    /// A dependency, e.g. "rocm-core >=5.3, <6" (repeatable).
    #[arg(long = "depends")]
    depends: Vec<Dependency>,
    /// Marks the .tar.zst trees as device code for these targets.
    #[arg(long, value_delimiter = ',')]
    targets: Option<Vec<Listed>>,
    /// Marks the .tar.zst trees as device code every GPU of this
    /// sub-family or family needs (`gfx11`, `gfx12_0`): installed once
    /// when any of a machine's GPUs belongs to it.
    #[arg(long, value_name = "KEY", value_parser = group_owner)]
    owner: Option<kpack_gpu::Owner>,
    /// The component of device code the trees marked with --targets or
    /// --owner are, e.g. "tensile" for a kernel database payload (default
    /// "kernels", as for .kpack archives).
    #[arg(long, value_name = "NAME", requires = "device")]
    component: Option<Component>,
    #[arg(long)]
    summary: Option<String>,
    /// The fat package (a .deb, a wheel, a compressed tree) the artifacts
    /// were split from (repeatable): recorded with its size, so kpack-get
    /// can compare what it downloads with it.
    #[arg(long, value_name = "FILE")]
    built_from: Vec<PathBuf>,
    /// Secret key to sign the new root with (`kpack-repo keygen` makes
    /// one); a repository is published signed unless --unsigned says not.
    #[arg(long = "secret-key", alias = "key", value_name = "SECRET_KEY")]
    key: Option<PathBuf>,
    /// Publish without signing (a staging area, tests): kpack-get, which
    /// verifies every root, refuses such a repository.
    #[arg(long)]
    unsigned: bool,
    #[command(flatten)]
    transport: TransportArgs,
    #[command(flatten)]
    pub(super) json: JsonArg,
    #[command(flatten)]
    storage: StorageArgs,
}

/// `--owner`'s value: a sub-family or family; a target's trees are listed
/// with `--targets`.
fn group_owner(text: &str) -> Result<kpack_gpu::Owner, String> {
    let owner = kpack_gpu::Owner::parse(text).map_err(|e| e.to_string())?;
    if owner.level() == kpack_gpu::Level::Target {
        return Err(format!(
            "{text} is a target: --owner takes a sub-family or family (gfx12_0, gfx11); a target's trees take --targets"
        ));
    }
    Ok(owner)
}

#[derive(Debug, Serialize)]
struct AddReport {
    repo: String,
    package: VersionReport,
    repo_name: String,
    repo_version: u64,
    signed: bool,
}

pub(super) fn run(printer: &Printer, args: AddArgs) -> anyhow::Result<()> {
    let key = args.key.as_deref().map(secret).transpose()?;
    let packed = tempfile::tempdir()?;
    let mut artifacts = Vec::new();
    for artifact in &args.artifacts {
        let (file, unpacked_size) = if artifact.is_dir() {
            let name = fs_err::canonicalize(artifact)?
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "tree".into());
            let file = packed.path().join(format!("{name}.tar.zst"));
            let unpacked_size = write_tree(artifact, &file, TreeCompression::Host)?;
            (file, Some(unpacked_size))
        } else {
            // A tree given as a file is decoded to count its unpacked size.
            (artifact.clone(), None)
        };
        // --component is the trees'; an archive is of the default one.
        let archive = file.extension().is_some_and(|e| e == "kpack");
        artifacts.push(NewArtifact {
            owner: args.owner.clone(),
            component: args.component.clone().filter(|_| !archive),
            file,
            targets: args.targets.clone(),
            unpacked_size,
        });
    }
    let new = NewVersion {
        name: args.package.clone(),
        version: args.version.clone(),
        depends: args.depends.clone(),
        system_requires: Vec::new(),
        summary: args.summary.clone(),
        built_from: args
            .built_from
            .iter()
            .map(|path| publish::built_from(path, None))
            .collect::<Result<_, _>>()?,
    };
    let root = args
        .storage
        .open_with(&args.repo, args.transport.policy())?
        .add(&new, &artifacts, key.as_ref())?;
    let report = AddReport {
        repo: args.repo.to_string(),
        package: VersionReport {
            name: args.package.to_string(),
            version: args.version.to_string(),
        },
        repo_name: root.repo.name.to_string(),
        repo_version: root.repo.version,
        signed: key.is_some(),
    };
    printer.line(format!(
        "published {} {} in {} (repo {} version {}, {})",
        report.package.name,
        report.package.version,
        report.repo,
        report.repo_name,
        report.repo_version,
        signing(report.signed)
    ));
    printer.report(&report);
    Ok(())
}

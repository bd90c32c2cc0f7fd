//! One function per `kpack-repo` command: run it, build its typed report,
//! and have the printer say it as text or JSON (sizes in bytes in JSON,
//! for people in text).

use std::io::IsTerminal;

use anyhow::Context;
use kpack_cli::{counted, ByteSize, Printer};
use kpack_repo::build::{write_tree, TreeCompression};
use kpack_repo::manifest;
use kpack_repo::mirror::{mirror as mirror_repository, Scope};
use kpack_repo::publish::{self, NewArtifact, NewVersion};
use kpack_repo::store::Store;
use kpack_repo::tidy::collect_garbage;
use kpack_repo::unpacked::verify_unpacked_sizes;
use kpack_repo::verify::verify_repository_with;
use kpack_repo_index::types::Timestamp;
use kpack_sign::{keygen as make_keys, PublicKey};
use serde::Serialize;

use super::batch::{build_set, BatchOptions};
use super::{
    open_source, password, read_s3, secret, AddArgs, BuildArgs, GcArgs, IndexArgs, KeygenArgs,
    MirrorArgs, PruneArgs, SignArgs, VerifyArgs,
};

/// `signed` or `unsigned`.
fn signing(signed: bool) -> &'static str {
    if signed {
        "signed"
    } else {
        "unsigned"
    }
}

/// A package version in a report.
#[derive(Debug, Serialize)]
struct VersionReport {
    name: String,
    version: String,
}

#[derive(Debug, Serialize)]
struct KeygenReport {
    secret_key_file: String,
    public_key_file: String,
    public_key: String,
}

pub(super) fn keygen(printer: &Printer, args: KeygenArgs) -> anyhow::Result<()> {
    let password = if args.unencrypted {
        None
    } else {
        Some(password().context(
            "set KPACK_REPO_PASSWORD to the secret key's password, or pass --unencrypted",
        )?)
    };
    let key = &args.key;
    let (secret_path, public_path) = (key.with_extension("key"), key.with_extension("pub"));
    make_keys(&secret_path, &public_path, password)?;
    // What users configure kpack-get with: the file or this line.
    let public = PublicKey::load(&public_path.to_string_lossy())?;
    let report = KeygenReport {
        secret_key_file: secret_path.display().to_string(),
        public_key_file: public_path.display().to_string(),
        public_key: public.to_base64(),
    };
    printer.line(format!(
        "wrote {} and {}",
        report.secret_key_file, report.public_key_file
    ));
    printer.line(format!(
        "public key: {} (kpack-get --key, or `key` in its configuration)",
        report.public_key
    ));
    printer.report(&report);
    Ok(())
}

#[derive(Debug, Serialize)]
struct AddReport {
    repo: String,
    package: VersionReport,
    repo_name: String,
    repo_version: u64,
    signed: bool,
}

pub(super) fn add(printer: &Printer, args: AddArgs) -> anyhow::Result<()> {
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

#[derive(Debug, Serialize)]
struct BuildReport {
    repo: String,
    built: Vec<BuiltReport>,
    /// Versions the repository has already: left alone.
    left_alone: Vec<VersionReport>,
    /// The root published, if anything was built.
    repo_version: Option<u64>,
    signed: bool,
    /// Bytes of the artifacts built.
    size: u64,
}

#[derive(Debug, Serialize)]
struct BuiltReport {
    name: String,
    version: String,
    size: u64,
    seconds: f64,
}

pub(super) fn build(printer: &Printer, args: BuildArgs) -> anyhow::Result<()> {
    let key = args.key.as_deref().map(secret).transpose()?;
    let set = manifest::manifest_files(&args.manifests)?
        .iter()
        .map(|path| manifest::resolve(path, args.sources.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let options = BatchOptions {
        jobs: args.jobs.map_or(cores, usize::from),
        progress: !args.no_progress && printer.says() && std::io::stderr().is_terminal(),
    };
    let opened = args
        .storage
        .open_with(&args.repo, args.transport.policy())?;
    let say = |line: &str| printer.line(line);
    let repo = &args.repo;
    let batch = build_set(set, &opened, key.as_ref(), options, &say)
        .with_context(|| format!("nothing was published to {repo}"))?;
    let report = BuildReport {
        repo: repo.to_string(),
        built: (batch.built.iter())
            .map(|(staged, took)| BuiltReport {
                name: staged.new.name.to_string(),
                version: staged.new.version.to_string(),
                size: staged.bytes(),
                seconds: took.as_secs_f64(),
            })
            .collect(),
        left_alone: (batch.published.iter())
            .map(|r| VersionReport {
                name: r.new.name.to_string(),
                version: r.new.version.to_string(),
            })
            .collect(),
        repo_version: batch.root.as_ref().map(|root| root.repo.version),
        signed: key.is_some() && batch.root.is_some(),
        size: batch.built.iter().map(|(s, _)| s.bytes()).sum(),
    };
    build_text(printer, &report);
    printer.report(&report);
    Ok(())
}

/// What `build` did, as text.
fn build_text(printer: &Printer, report: &BuildReport) {
    let left_alone = published_list(&report.left_alone);
    let Some(version) = report.repo_version else {
        printer.line(format!(
            "nothing to publish: {left_alone} in {} already",
            report.repo
        ));
        return;
    };
    if !report.left_alone.is_empty() {
        printer.line(format!("left alone: {left_alone}"));
    }
    printer.line(format!(
        "published {} ({}) in {} as one root update (repo version {version}, {})",
        counted(report.built.len(), "package", "packages"),
        ByteSize(report.size),
        report.repo,
        signing(report.signed)
    ));
}

/// `rocm-blas 5.5.1+dfsg.deb.7, ... published`, or `no packages`.
fn published_list(published: &[VersionReport]) -> String {
    let names: Vec<String> = published
        .iter()
        .map(|r| format!("{} {}", r.name, r.version))
        .collect();
    if names.is_empty() {
        "no packages".into()
    } else {
        format!("{} published", names.join(", "))
    }
}

#[derive(Debug, Serialize)]
struct RootReport {
    repo: String,
    repo_version: u64,
    signed: bool,
}

pub(super) fn index(printer: &Printer, args: IndexArgs) -> anyhow::Result<()> {
    let key = args.key.as_deref().map(secret).transpose()?;
    let root = args.storage.open(&args.repo)?.reindex(key.as_ref())?;
    let report = RootReport {
        repo: args.repo.to_string(),
        repo_version: root.repo.version,
        signed: key.is_some(),
    };
    printer.line(format!(
        "reindexed {}: version {}",
        report.repo, report.repo_version
    ));
    printer.report(&report);
    Ok(())
}

#[derive(Debug, Serialize)]
struct PruneReport {
    repo: String,
    dropped: Vec<VersionReport>,
    /// The root published, if anything was dropped.
    repo_version: Option<u64>,
    signed: bool,
}

pub(super) fn prune(printer: &Printer, args: PruneArgs) -> anyhow::Result<()> {
    let key = args.key.as_deref().map(secret).transpose()?;
    let (repo, keep) = (&args.repo, args.keep);
    let pruned = args
        .storage
        .open(repo)?
        .prune(keep as usize, key.as_ref())?;
    let report = PruneReport {
        repo: repo.to_string(),
        dropped: (pruned.dropped.iter())
            .map(|(name, version)| VersionReport {
                name: name.to_string(),
                version: version.to_string(),
            })
            .collect(),
        repo_version: pruned.root.as_ref().map(|root| root.repo.version),
        signed: key.is_some() && pruned.root.is_some(),
    };
    match report.repo_version {
        None => printer.line(format!(
            "nothing to prune: no package in {repo} has more than {} to drop",
            counted(keep as usize, "version", "versions")
        )),
        Some(version) => {
            for dropped in &report.dropped {
                printer.line(format!("  dropped {} {}", dropped.name, dropped.version));
            }
            printer.line(format!(
                "pruned {} from {repo} (repo version {version}, {}); `kpack-repo gc` deletes their files",
                counted(report.dropped.len(), "version", "versions"),
                signing(report.signed)
            ));
        }
    }
    printer.report(&report);
    Ok(())
}

#[derive(Debug, Serialize)]
struct GcReport {
    repo: String,
    /// The root versions still readable, whose files are kept.
    roots: Vec<u64>,
    garbage: Vec<ObjectReport>,
    /// Whether the garbage was deleted (`--yes`) or only listed.
    deleted: bool,
    size: u64,
    /// Unpinned files kept because they are younger than the grace period.
    young: Vec<ObjectReport>,
}

#[derive(Debug, Serialize)]
struct ObjectReport {
    key: String,
    size: u64,
}

pub(super) fn gc(printer: &Printer, args: GcArgs) -> anyhow::Result<()> {
    let repo = &args.repo;
    // Deleting needs no publishing protocol: a plain store.
    let store = Store::open(repo, &args.storage.s3())?;
    let collected = collect_garbage(&store, args.grace, Timestamp::now(), args.yes)
        .with_context(|| format!("cannot collect the garbage of {repo}"))?;
    let objects = |objects: &[kpack_repo::store::StoredObject]| {
        (objects.iter())
            .map(|o| ObjectReport {
                key: o.key.clone(),
                size: o.size,
            })
            .collect()
    };
    let report = GcReport {
        repo: repo.to_string(),
        roots: collected.roots.clone(),
        garbage: objects(&collected.garbage),
        deleted: args.yes,
        size: collected.bytes(),
        young: objects(&collected.young),
    };
    gc_text(printer, &report);
    printer.report(&report);
    Ok(())
}

/// What `gc` deleted or would delete, as text.
fn gc_text(printer: &Printer, report: &GcReport) {
    let roots: Vec<String> = report.roots.iter().map(u64::to_string).collect();
    printer.line(format!("roots still readable: {}", roots.join(", ")));
    for object in &report.garbage {
        printer.line(format!("  {} ({})", object.key, ByteSize(object.size)));
    }
    let files = counted(report.garbage.len(), "file", "files");
    let (bytes, repo) = (ByteSize(report.size), &report.repo);
    if report.deleted {
        printer.line(format!("deleted {files} ({bytes}) from {repo}"));
    } else {
        printer.line(format!(
            "would delete {files} ({bytes}) from {repo}; --yes deletes them"
        ));
    }
    if !report.young.is_empty() {
        let young: u64 = report.young.iter().map(|o| o.size).sum();
        printer.line(format!(
            "kept {} ({}) younger than the grace period",
            counted(report.young.len(), "unpinned file", "unpinned files"),
            ByteSize(young)
        ));
    }
}

#[derive(Debug, Serialize)]
struct SignReport {
    signed: String,
}

pub(super) fn sign(printer: &Printer, args: SignArgs) -> anyhow::Result<()> {
    let opened = args.storage.open(&args.repo)?;
    opened.sign(&secret(&args.key)?)?;
    let report = SignReport {
        signed: opened.store().location("index.toml"),
    };
    printer.line(format!("signed {}", report.signed));
    printer.report(&report);
    Ok(())
}

#[derive(Debug, Serialize)]
struct VerifyReport {
    repo: String,
    repo_name: String,
    repo_version: u64,
    expires: String,
    packages: usize,
    versions: usize,
    artifacts: usize,
    /// Bytes of the artifacts checked.
    size: u64,
    /// Trees that unpack to the size they declare, and that size.
    trees: usize,
    unpacked_size: u64,
    /// Artifacts absent (a partial mirror).
    missing: usize,
}

pub(super) fn verify(printer: &Printer, args: VerifyArgs) -> anyhow::Result<()> {
    let repo = &args.repo;
    let source = open_source(repo, &read_s3(), &args.limits)?;
    let key = PublicKey::load(&args.pubkey)?;
    let (root, checked) =
        verify_repository_with(&source, &key, Timestamp::now(), None, args.partial)
            .with_context(|| format!("{repo} does not verify"))?;
    let unpacked =
        verify_unpacked_sizes(&source, &root).with_context(|| format!("{repo} does not verify"))?;
    let report = VerifyReport {
        repo: repo.clone(),
        repo_name: root.repo.name.to_string(),
        repo_version: root.repo.version,
        expires: root.repo.expires.to_string(),
        packages: checked.packages,
        versions: checked.versions,
        artifacts: checked.artifacts,
        size: checked.bytes,
        trees: unpacked.trees,
        unpacked_size: unpacked.bytes,
        missing: checked.missing,
    };
    verify_text(printer, &report);
    printer.report(&report);
    Ok(())
}

/// What `verify` checked, as text.
fn verify_text(printer: &Printer, report: &VerifyReport) {
    printer.line(format!(
        "{} version {} (expires {}): signature good; {}, {}, {} ({}) match their hashes",
        report.repo_name,
        report.repo_version,
        report.expires,
        counted(report.packages, "package", "packages"),
        counted(report.versions, "version", "versions"),
        counted(report.artifacts, "artifact", "artifacts"),
        ByteSize(report.size)
    ));
    if report.trees > 0 {
        printer.line(format!(
            "{} to the {} {}",
            counted(report.trees, "tree unpacks", "trees unpack"),
            ByteSize(report.unpacked_size),
            kpack_cli::plural(report.trees, "it declares", "they declare")
        ));
    }
    if report.missing > 0 {
        printer.line(format!(
            "{} not mirrored here",
            counted(report.missing, "artifact", "artifacts")
        ));
    }
}

#[derive(Debug, Serialize)]
struct MirrorReport {
    upstream: String,
    dest: String,
    shards: usize,
    artifacts: Vec<String>,
    /// Bytes of the artifacts copied.
    size: u64,
}

pub(super) fn mirror(printer: &Printer, args: MirrorArgs) -> anyhow::Result<()> {
    let scope = Scope {
        targets: args.targets.clone(),
        packages: args.packages.clone(),
    };
    let key = PublicKey::load(&args.pubkey)?;
    let s3 = args.storage.s3();
    let source = open_source(&args.upstream, &s3, &args.limits)?;
    // Copied verbatim, so no publishing protocol: a plain store.
    let store = Store::open(&args.dest, &s3)?;
    let copied = mirror_repository(&source, &key, Timestamp::now(), &store, &scope)
        .with_context(|| format!("cannot mirror {}", args.upstream))?;
    let report = MirrorReport {
        upstream: args.upstream.clone(),
        dest: args.dest.to_string(),
        shards: copied.shards,
        artifacts: copied.artifacts,
        size: copied.bytes,
    };
    for artifact in &report.artifacts {
        printer.line(format!("  {artifact}"));
    }
    printer.line(format!(
        "mirrored {} and {} ({}) into {}",
        counted(report.shards, "shard", "shards"),
        counted(report.artifacts.len(), "artifact", "artifacts"),
        ByteSize(report.size),
        report.dest
    ));
    printer.report(&report);
    Ok(())
}

//! Package manifests (`manifests/**/*.toml`, documented in
//! manifests/README.md): which `.deb` files make a package, where their
//! files go in the prefix, and how its device code is grouped. A manifest
//! states its version and dependencies, or takes them from the packages'
//! control data through its set's name table (`names.toml`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fs_err as fs;
use serde::Deserialize;

use kpack_repo_index::types::{Dependency, PackageName};

use crate::debian::{
    dpkg_deb, Control, ControlError, DpkgError, NameTable, RelationError, VersionError,
};
use crate::publish::{built_from, NewVersion};

/// What is wrong with a manifest, or with the packages it names; each
/// names the file at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// A file-system call failed; the error names the path.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{}: {}", path.display(), error.to_string().trim_end())]
    Toml {
        path: PathBuf,
        error: toml::de::Error,
    },
    #[error("{}: pack.level: {level} is not a zstd level (1-22)", path.display())]
    Level { path: PathBuf, level: i32 },
    #[error("{}: source.map: {part:?} must be a relative path without ..", path.display())]
    MapPath { path: PathBuf, part: String },
    #[error("{}: no manifests (*.toml) here", path.display())]
    NoManifests { path: PathBuf },
    #[error("{}: {} is {package}, which {NAME_TABLE} maps to {ours}, not {name}", path.display(), deb.display())]
    MappedElsewhere {
        path: PathBuf,
        deb: PathBuf,
        package: String,
        ours: PackageName,
        name: PackageName,
    },
    #[error("{}: {error}", deb.display())]
    Control { deb: PathBuf, error: ControlError },
    #[error("{}: control field Depends: {error}", deb.display())]
    Depends { deb: PathBuf, error: RelationError },
    #[error("{}: its package's version: {error}", path.display())]
    Version { path: PathBuf, error: VersionError },
    #[error("{}: no version: state one or name a .deb", path.display())]
    NoVersion { path: PathBuf },
    #[error("{}: source.debian: {pattern:?}: {error}", path.display())]
    Pattern {
        path: PathBuf,
        pattern: String,
        error: glob::PatternError,
    },
    #[error("{}: source.debian: no file in {} matches {pattern:?}", path.display(), sources.display())]
    NoMatch {
        path: PathBuf,
        sources: PathBuf,
        pattern: String,
    },
    #[error(transparent)]
    Dpkg(#[from] DpkgError),
}

/// The name table's file in a manifest set's directory.
pub const NAME_TABLE: &str = "names.toml";

/// A manifest.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub package: ManifestPackage,
    pub source: PackageSource,
    #[serde(default)]
    pub pack: PackOptions,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestPackage {
    pub name: PackageName,
    /// Default: the first package's Debian version, mapped to semver.
    #[serde(default)]
    pub version: Option<semver::Version>,
    #[serde(default)]
    pub summary: Option<String>,
    /// Default: the packages' Debian dependencies, mapped through the
    /// name table.
    #[serde(default)]
    pub depends: Option<Vec<Dependency>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageSource {
    /// Debian package files, by name or glob (`librocblas0_*_amd64.deb`),
    /// looked up in the sources directory.
    pub debian: Patterns,
    /// Package directory -> prefix directory.
    #[serde(default)]
    pub map: BTreeMap<String, String>,
}

/// One file name or glob, or several.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Patterns {
    One(String),
    Many(Vec<String>),
}

impl Patterns {
    fn all(&self) -> &[String] {
        match self {
            Patterns::One(one) => std::slice::from_ref(one),
            Patterns::Many(many) => many,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackOptions {
    #[serde(default = "default_group")]
    pub group: String,
    #[serde(rename = "group-by", default)]
    pub group_by: GroupBy,
    /// The zstd level of each code object in the archives: published once,
    /// downloaded by every user, so higher than the packer's default 3. On
    /// Debian 13's rocSOLVER (1.5 GB of code objects, two cores) level 9
    /// is 4.8% smaller in 2.4 times as long (10 s); level 12 is no smaller.
    #[serde(default = "default_level")]
    pub level: i32,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            group: default_group(),
            group_by: GroupBy::Processor,
            level: default_level(),
        }
    }
}

fn default_level() -> i32 {
    9
}

fn default_group() -> String {
    "rocm".into()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    #[default]
    Processor,
    Family,
}

/// A manifest set's name table file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NameTableFile {
    /// Debian package (or virtual package) -> repository package.
    debian: BTreeMap<String, PackageName>,
}

/// A manifest with its `.deb` files found and its version and
/// dependencies settled: what to build and what to publish.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub path: PathBuf,
    pub manifest: Manifest,
    /// The packages, in the manifest's order.
    pub debs: Vec<PathBuf>,
    pub new: NewVersion,
}

impl Manifest {
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let text = fs::read_to_string(path)?;
        let manifest: Manifest = toml::from_str(&text).map_err(|error| ManifestError::Toml {
            path: path.to_owned(),
            error,
        })?;
        if !(1..=22).contains(&manifest.pack.level) {
            return Err(ManifestError::Level {
                path: path.to_owned(),
                level: manifest.pack.level,
            });
        }
        for (from, to) in &manifest.source.map {
            for part in [from, to] {
                if part.split('/').any(|p| p == "..") || part.starts_with('/') {
                    return Err(ManifestError::MapPath {
                        path: path.to_owned(),
                        part: part.clone(),
                    });
                }
            }
        }
        Ok(manifest)
    }
}

/// The name table of the manifest set in `dir`, empty when it has none.
pub fn load_name_table(dir: &Path) -> Result<NameTable, ManifestError> {
    let path = dir.join(NAME_TABLE);
    if !path.exists() {
        return Ok(NameTable::default());
    }
    let text = fs::read_to_string(&path)?;
    let file: NameTableFile = toml::from_str(&text).map_err(|error| ManifestError::Toml {
        path: path.clone(),
        error,
    })?;
    Ok(NameTable(file.debian))
}

/// The manifests `paths` name: files as given, and every `*.toml` of a
/// directory but its name table, sorted.
pub fn manifest_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ManifestError> {
    let mut files = Vec::new();
    for path in paths {
        if !path.is_dir() {
            files.push(path.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = fs::read_dir(path)?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        found.retain(|p| {
            p.extension().is_some_and(|e| e == "toml")
                && p.file_name().is_some_and(|n| n != NAME_TABLE)
        });
        if found.is_empty() {
            return Err(ManifestError::NoManifests { path: path.clone() });
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Loads the manifest at `path` and settles it against the packages in
/// `sources` (the manifest's directory when `None`), with the name table
/// of the manifest's set.
pub fn resolve(path: &Path, sources: Option<&Path>) -> Result<Resolved, ManifestError> {
    let manifest = Manifest::load(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let table = load_name_table(dir)?;
    let sources = sources.unwrap_or(dir);
    let mut debs = Vec::new();
    for pattern in manifest.source.debian.all() {
        debs.extend(find_debs(path, sources, pattern)?);
    }
    let name = &manifest.package.name;
    let mut mapped = Vec::new();
    let mut system_requires: Vec<String> = Vec::new();
    let mut first_version = None;
    let mut built = Vec::new();
    for (deb, control) in &debs {
        let package = control.package().map_err(|e| control_error(deb, e))?;
        built.push(built_from(deb, Some(package.to_owned()))?);
        if let Some(ours) = table.0.get(package).filter(|ours| *ours != name) {
            return Err(ManifestError::MappedElsewhere {
                path: path.to_owned(),
                deb: deb.clone(),
                package: package.to_owned(),
                ours: ours.clone(),
                name: name.clone(),
            });
        }
        let version = control.version().map_err(|e| control_error(deb, e))?;
        first_version.get_or_insert(version);
        let depends = control.depends().map_err(|e| control_error(deb, e))?;
        let debian = table
            .map(&depends)
            .map_err(|error| ManifestError::Depends {
                deb: deb.clone(),
                error,
            })?;
        for dependency in debian.depends {
            // The packages of one manifest need not depend on each other.
            if &dependency.name != name && !mapped.contains(&dependency) {
                mapped.push(dependency);
            }
        }
        for requirement in debian.system {
            if !system_requires.contains(&requirement) {
                system_requires.push(requirement);
            }
        }
    }
    let version = match (&manifest.package.version, first_version) {
        (Some(version), _) => version.clone(),
        (None, Some(debian)) => debian.to_semver().map_err(|error| ManifestError::Version {
            path: path.to_owned(),
            error,
        })?,
        (None, None) => {
            return Err(ManifestError::NoVersion {
                path: path.to_owned(),
            })
        }
    };
    let new = NewVersion {
        depends: manifest.package.depends.clone().unwrap_or(mapped),
        system_requires,
        summary: manifest.package.summary.clone(),
        built_from: built,
        ..NewVersion::new(name, &version)
    };
    Ok(Resolved {
        path: path.to_owned(),
        debs: debs.into_iter().map(|(deb, _)| deb).collect(),
        manifest,
        new,
    })
}

fn control_error(deb: &Path, error: ControlError) -> ManifestError {
    ManifestError::Control {
        deb: deb.to_owned(),
        error,
    }
}

/// The `.deb` files in `sources` that `pattern` matches, with their
/// control data: of several versions of one package, the newest.
fn find_debs(
    manifest: &Path,
    sources: &Path,
    pattern: &str,
) -> Result<Vec<(PathBuf, Control)>, ManifestError> {
    let glob = glob::Pattern::new(pattern).map_err(|error| ManifestError::Pattern {
        path: manifest.to_owned(),
        pattern: pattern.to_owned(),
        error,
    })?;
    let mut names: Vec<String> = fs::read_dir(sources)?
        .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()?;
    names.retain(|name| glob.matches(name));
    names.sort();
    let mut newest: BTreeMap<String, (PathBuf, Control, semver::Version)> = BTreeMap::new();
    for name in names {
        let deb = sources.join(name);
        let control = read_control(&deb)?;
        let package = control.package().map_err(|e| control_error(&deb, e))?;
        let version = control
            .version()
            .and_then(|v| v.to_semver().map_err(ControlError::Version))
            .map_err(|e| control_error(&deb, e))?;
        let newer = newest.get(package).is_none_or(|(_, _, v)| version > *v);
        if newer {
            newest.insert(package.to_owned(), (deb, control, version));
        }
    }
    if newest.is_empty() {
        return Err(ManifestError::NoMatch {
            path: manifest.to_owned(),
            sources: sources.to_owned(),
            pattern: pattern.to_owned(),
        });
    }
    Ok(newest.into_values().map(|(deb, c, _)| (deb, c)).collect())
}

/// A `.deb`'s control data, as `dpkg-deb -f` prints it.
fn read_control(deb: &Path) -> Result<Control, ManifestError> {
    let stdout = dpkg_deb("-f", deb, None, "read its control data")?;
    Control::parse(&String::from_utf8_lossy(&stdout)).map_err(|e| control_error(deb, e))
}

//! What split binaries need at run time (`kpack-pack deps`): for each split
//! binary found, its marker's kernel name, its wrappers' bundle indices and
//! its archive patterns, as the marker has them and resolved against the
//! binary's directory as the runtime's loader resolves them, with the
//! archive files present. Application vendors who redistribute ROCm
//! libraries ship exactly these files.
//!
//! A split binary is an ELF file with a `.rocm_kpack_ref` marker or a PE
//! image with a `.kpackrf` one, whose wrappers are `HIPK`
//! ([`read_split_binary`]).
//! A directory is walked recursively in sorted order, `.kpack/`
//! directories and symbolic links skipped, and only its split binaries are
//! listed; a file named on its own must be one.
//!
//! For a pattern with `@GFXARCH@`, the files present are those whose paths
//! fit the pattern with any non-empty text in its place; for a fixed path,
//! the file if it exists. For each GPU target asked for (as a GPU reports
//! it: `gfx90a:sramecc+:xnack-`), each pattern's expansion is the runtime's
//! own, [`Loader::candidates`] with a default configuration (the
//! `ROCM_KPACK_*` variables are not read): one path per compatible target,
//! most specific first, each present or missing. A binary has an archive
//! for a target when one of its candidates is present. Generic targets
//! (`gfx11-generic`), which a HIP runtime passes as further targets, are
//! asked for as targets of their own.
//!
//! The result is one typed report, [`DepsReport`], with a schema version,
//! which the command line renders as text or JSON.

use std::path::{Path, PathBuf};

use rocm_kpack::loader::GFXARCH_PLACEHOLDER;
use rocm_kpack::{Loader, LoaderConfig, Marker, Target};
use serde::{Serialize, Serializer};

use crate::error::{Error, Result};
use kpack_binary::sniff::{read_split_binary, SplitBinary};
use kpack_binary::BinaryFormat;
use rocm_kpack::format::KPACK_DIR;

/// The version of [`DepsReport`]'s form; fields are added, never
/// repurposed.
pub const DEPS_SCHEMA: u32 = 1;

/// What `kpack-pack deps` reports: every split binary found, in the order
/// found.
#[derive(Debug, Clone, Serialize)]
pub struct DepsReport {
    /// [`DEPS_SCHEMA`].
    pub schema: u32,
    /// The GPU targets asked for, in the order given.
    pub targets: Vec<Target>,
    pub binaries: Vec<BinaryDeps>,
}

/// One split binary and the archives it needs.
#[derive(Debug, Clone, Serialize)]
pub struct BinaryDeps {
    #[serde(serialize_with = "lossy")]
    pub path: PathBuf,
    pub format: BinaryFormat,
    /// The marker's `kernel_name`: its code objects' TOC keys are
    /// `<kernel_name>#<bundle index>`.
    pub kernel_name: String,
    /// Each wrapper's bundle index, in section order.
    pub bundles: Vec<u32>,
    /// The marker's `kpack_search_paths`, in order.
    pub archives: Vec<ArchivePattern>,
    /// One per target asked for.
    pub targets: Vec<TargetArchive>,
}

/// One of a marker's archive paths.
#[derive(Debug, Clone, Serialize)]
pub struct ArchivePattern {
    /// As the marker has it.
    pub pattern: String,
    /// Joined to the binary's directory as the loader joins it (`..` kept).
    #[serde(serialize_with = "lossy")]
    pub resolved: PathBuf,
    /// Whether it holds `@GFXARCH@`, expanded per target.
    pub per_target: bool,
    /// The archive files present that it matches, sorted.
    pub present: Vec<PresentArchive>,
    /// One per target asked for: the paths the loader tries.
    pub expansions: Vec<Expansion>,
}

/// An archive file present that a pattern matches.
#[derive(Debug, Clone, Serialize)]
pub struct PresentArchive {
    #[serde(serialize_with = "lossy")]
    pub path: PathBuf,
    /// The text in place of `@GFXARCH@` (none for a fixed path).
    pub gfxarch: Option<String>,
}

/// A pattern expanded for one target, as the runtime's loader expands it.
#[derive(Debug, Clone, Serialize)]
pub struct Expansion {
    pub target: Target,
    /// In the order the loader tries them.
    pub candidates: Vec<Candidate>,
}

/// A path the loader tries, and whether a file is there.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    #[serde(serialize_with = "lossy")]
    pub path: PathBuf,
    pub present: bool,
}

/// Whether a binary has an archive present for one target.
#[derive(Debug, Clone, Serialize)]
pub struct TargetArchive {
    pub target: Target,
    /// Some candidate archive, over all patterns, is present.
    pub present: bool,
    /// The first present candidate in the loader's order: the archive it
    /// opens first.
    #[serde(serialize_with = "lossy_option")]
    pub archive: Option<PathBuf>,
}

impl DepsReport {
    /// Each binary and target asked for with no candidate archive present.
    pub fn missing(&self) -> impl Iterator<Item = (&BinaryDeps, &Target)> {
        self.binaries.iter().flat_map(|binary| {
            binary
                .targets
                .iter()
                .filter(|outcome| !outcome.present)
                .map(move |outcome| (binary, &outcome.target))
        })
    }
}

/// The report for the split binaries at `paths` (files, or directories to
/// walk) and the GPU `targets` (none: only the files present).
pub fn deps(paths: &[PathBuf], targets: &[Target]) -> Result<DepsReport> {
    let loader = Loader::new(LoaderConfig::default());
    let binaries = find_split_binaries(paths)?
        .into_iter()
        .map(|(path, split)| binary_deps(&loader, path, split, targets))
        .collect::<Result<Vec<_>>>()?;
    Ok(DepsReport {
        schema: DEPS_SCHEMA,
        targets: targets.to_vec(),
        binaries,
    })
}

/// The split binaries at `paths`, in order: a file must be one; a
/// directory is walked in sorted order, `.kpack/` directories and symbolic
/// links skipped, and its other files left out.
pub fn find_split_binaries(paths: &[PathBuf]) -> Result<Vec<(PathBuf, SplitBinary)>> {
    let mut found = Vec::new();
    for path in paths {
        let metadata = fs_err::metadata(path)?;
        if metadata.is_dir() {
            walk(path, &mut found)?;
        } else if metadata.is_file() {
            let split = read_split_binary(path)?
                .ok_or_else(|| kpack_binary::Error::NotSplit { path: path.clone() })?;
            found.push((path.clone(), split));
        } else {
            return Err(Error::NotAFile { path: path.clone() });
        }
    }
    Ok(found)
}

fn walk(dir: &Path, found: &mut Vec<(PathBuf, SplitBinary)>) -> Result<()> {
    let mut entries = fs_err::read_dir(dir)?.collect::<std::io::Result<Vec<_>>>()?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() && entry.file_name() != KPACK_DIR {
            walk(&path, found)?;
        } else if kind.is_file() {
            if let Some(split) = read_split_binary(&path)? {
                found.push((path, split));
            }
        }
    }
    Ok(())
}

/// One binary's entry of the report.
fn binary_deps(
    loader: &Loader,
    path: PathBuf,
    split: SplitBinary,
    targets: &[Target],
) -> Result<BinaryDeps> {
    let base = path.parent().unwrap_or(Path::new(""));
    let mut archives = Vec::new();
    for pattern in &split.marker.search_paths {
        let alone = Marker {
            search_paths: vec![pattern.clone()],
            kernel_name: split.marker.kernel_name.clone(),
        };
        let expansions = targets
            .iter()
            .map(|target| Expansion {
                target: target.clone(),
                candidates: candidates(loader, &alone, &path, target),
            })
            .collect();
        archives.push(ArchivePattern {
            pattern: pattern.clone(),
            resolved: base.join(pattern),
            per_target: pattern.contains(GFXARCH_PLACEHOLDER),
            present: present_archives(base, pattern)?,
            expansions,
        });
    }
    let targets = targets
        .iter()
        .map(|target| {
            let archive = candidates(loader, &split.marker, &path, target)
                .into_iter()
                .find(|candidate| candidate.present)
                .map(|candidate| candidate.path);
            TargetArchive {
                target: target.clone(),
                present: archive.is_some(),
                archive,
            }
        })
        .collect();
    Ok(BinaryDeps {
        path,
        format: split.format,
        kernel_name: split.marker.kernel_name,
        bundles: split.bundles,
        archives,
        targets,
    })
}

/// The paths the loader tries for `marker` of the binary at `binary` on a
/// GPU reporting `target`, each present or not.
fn candidates(loader: &Loader, marker: &Marker, binary: &Path, target: &Target) -> Vec<Candidate> {
    loader
        .candidates(marker, binary, std::slice::from_ref(target))
        .into_iter()
        .map(|path| Candidate {
            present: is_present(&path),
            path,
        })
        .collect()
}

/// Whether a regular file is at `path`, the only kind the loader opens.
fn is_present(path: &Path) -> bool {
    fs_err::metadata(path).is_ok_and(|metadata| metadata.is_file())
}

/// The files present that `pattern`, resolved against `base`, matches.
fn present_archives(base: &Path, pattern: &str) -> Result<Vec<PresentArchive>> {
    let Some((dir, component)) = placeholder_component(base, pattern) else {
        let path = base.join(pattern);
        return Ok(if is_present(&path) {
            vec![PresentArchive {
                path,
                gfxarch: None,
            }]
        } else {
            Vec::new()
        });
    };
    let listed = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        &dir
    };
    let entries = match fs_err::read_dir(listed) {
        Ok(entries) => entries,
        Err(error) if is_absent(&error) => return Ok(Vec::new()),
        Err(error) => return Err(error.into()),
    };
    let mut present = Vec::new();
    for entry in entries {
        let name = entry?.file_name();
        let Some(text) = name.to_str().and_then(|name| gfxarch_text(component, name)) else {
            continue;
        };
        let path = base.join(pattern.replace(GFXARCH_PLACEHOLDER, text));
        if is_present(&path) {
            present.push(PresentArchive {
                path,
                gfxarch: Some(text.to_owned()),
            });
        }
    }
    present.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(present)
}

/// Whether a directory could not be listed because it is not there.
fn is_absent(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// The directory (under `base`) holding the first component of `pattern`
/// with `@GFXARCH@`, and that component; `None` for a fixed path.
fn placeholder_component<'a>(base: &Path, pattern: &'a str) -> Option<(PathBuf, &'a str)> {
    let mut dir = base.to_path_buf();
    for (index, component) in pattern.split('/').enumerate() {
        if component.contains(GFXARCH_PLACEHOLDER) {
            return Some((dir, component));
        }
        if index == 0 && component.is_empty() {
            // A leading `/`: the pattern is absolute.
            dir = PathBuf::from("/");
        } else {
            dir.push(component);
        }
    }
    None
}

/// The non-empty text that, in place of every `@GFXARCH@` of `component`,
/// gives `name`, if any.
fn gfxarch_text<'a>(component: &str, name: &'a str) -> Option<&'a str> {
    let parts: Vec<&str> = component.split(GFXARCH_PLACEHOLDER).collect();
    let holes = parts.len().checked_sub(1).filter(|&holes| holes > 0)?;
    let fixed: usize = parts.iter().map(|part| part.len()).sum();
    let free = name.len().checked_sub(fixed)?;
    if free == 0 || free % holes != 0 {
        return None;
    }
    let start = parts.first()?.len();
    let text = name.get(start..start + free / holes)?;
    (component.replace(GFXARCH_PLACEHOLDER, text) == name).then_some(text)
}

fn lossy<S: Serializer>(path: &Path, serializer: S) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_str(&path.to_string_lossy())
}

fn lossy_option<S: Serializer>(
    path: &Option<PathBuf>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    match path {
        Some(path) => lossy(path, serializer),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_in_place_of_gfxarch_is_found_once_and_never_empty() {
        let text = |component, name| gfxarch_text(component, name);
        assert_eq!(
            text("rocm_@GFXARCH@.kpack", "rocm_gfx90a.kpack"),
            Some("gfx90a")
        );
        assert_eq!(
            text("rocm_@GFXARCH@.kpack", "rocm_gfx90a:xnack-.kpack"),
            Some("gfx90a:xnack-")
        );
        assert_eq!(text("rocm_@GFXARCH@.kpack", "rocm_.kpack"), None);
        assert_eq!(text("rocm_@GFXARCH@.kpack", "rocm.kpack"), None);
        assert_eq!(text("rocm_@GFXARCH@.kpack", "blas_gfx90a.kpack"), None);
        assert_eq!(text("@GFXARCH@", "gfx1100"), Some("gfx1100"));
        assert_eq!(text("@GFXARCH@-@GFXARCH@.kpack", "a-a.kpack"), Some("a"));
        assert_eq!(text("@GFXARCH@-@GFXARCH@.kpack", "a-b.kpack"), None);
        assert_eq!(text("fixed.kpack", "fixed.kpack"), None);
        // A name that is not cut at a character boundary is no match.
        assert_eq!(text("x@GFXARCH@y", "xéy"), Some("é"));
        assert_eq!(text("x@GFXARCH@@GFXARCH@y", "xéy"), None);
    }

    #[test]
    fn the_directory_listed_is_the_one_before_the_first_placeholder() {
        let base = Path::new("tree/lib");
        assert_eq!(
            placeholder_component(base, "../.kpack/rocm_@GFXARCH@.kpack"),
            Some((PathBuf::from("tree/lib/../.kpack"), "rocm_@GFXARCH@.kpack"))
        );
        assert_eq!(
            placeholder_component(base, "/opt/kpack/@GFXARCH@/rocm.kpack"),
            Some((PathBuf::from("/opt/kpack"), "@GFXARCH@"))
        );
        assert_eq!(
            placeholder_component(base, "rocm_@GFXARCH@.kpack"),
            Some((PathBuf::from("tree/lib"), "rocm_@GFXARCH@.kpack"))
        );
        assert_eq!(placeholder_component(base, "../rocm.kpack"), None);
    }

    #[test]
    fn every_match_of_a_placeholder_in_a_directory_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("lib");
        fs_err::create_dir(&base).unwrap();
        for arch in ["gfx90a", "gfx1100", "empty"] {
            fs_err::create_dir_all(dir.path().join("kpack").join(arch)).unwrap();
        }
        for arch in ["gfx90a", "gfx1100"] {
            fs_err::write(dir.path().join("kpack").join(arch).join("rocm.kpack"), b"").unwrap();
        }
        let present = present_archives(&base, "../kpack/@GFXARCH@/rocm.kpack").unwrap();
        let texts: Vec<_> = present.iter().map(|p| p.gfxarch.as_deref()).collect();
        assert_eq!(texts, [Some("gfx1100"), Some("gfx90a")]);
        assert!(present_archives(&base, "../nowhere/@GFXARCH@.kpack")
            .unwrap()
            .is_empty());
        // A binary named without a directory: its patterns are relative to
        // the current one (the package's, where cargo runs unit tests).
        let present = present_archives(Path::new(""), "Cargo.@GFXARCH@").unwrap();
        let texts: Vec<_> = present.iter().map(|p| p.gfxarch.as_deref()).collect();
        assert_eq!(texts, [Some("toml")]);
        assert_eq!(present[0].path, Path::new("Cargo.toml"));
    }
}

//! Checking a split tree: every split binary's wrappers resolve, through
//! the runtime's loader and the binary's own marker, to a code object for
//! every target the tree's archives hold binaries' code for (kernel
//! database files packed beside it are not a binary's code: their targets
//! are not asked for), and every split executable keeps the program header
//! rule RHEL 8's kernel needs to start it (`elf::check_program_headers`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rocm_kpack::{Archive, Loader, LoaderConfig, Marker, Target};

use crate::error::{Error, ProgramHeaderError, Result};
use kpack_binary::bundle::{Bundle, CodeObject};
use kpack_binary::elf::check_program_headers;
use kpack_binary::image::FatImage;
use rocm_kpack::format::KPACK_DIR;

/// One wrapper whose code for a target is not what it should be.
#[derive(Debug)]
pub struct Failure {
    pub binary: PathBuf,
    pub bundle: u32,
    pub target: Target,
    pub problem: Problem,
}

/// How a wrapper's code for a target falls short.
#[derive(Debug)]
pub enum Problem {
    /// The code object loaded for `chosen` differs from the original's.
    Modified { chosen: Target, bytes: usize },
    /// The original has a code object for the target that no archive
    /// serves.
    Missing,
    /// The loader found no code object for the target (no original says
    /// there should be one), or could not read it.
    Lookup(rocm_kpack::Error),
}

/// A split binary whose program headers old kernels would misread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutFailure {
    pub binary: PathBuf,
    pub error: ProgramHeaderError,
}

/// One wrapper that resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub binary: PathBuf,
    pub bundle: u32,
    /// The target asked for.
    pub requested: Target,
    /// The compatible target whose code was chosen.
    pub chosen: Target,
    pub archive: PathBuf,
    pub bytes: usize,
}

/// What `verify_tree` checked.
#[derive(Debug, Default)]
pub struct VerifyReport {
    pub binaries: usize,
    pub wrappers: usize,
    pub targets: Vec<Target>,
    pub resolved: Vec<Resolved>,
    pub failures: Vec<Failure>,
    /// Split binaries that break the program header rule.
    pub layout_failures: Vec<LayoutFailure>,
    /// Code objects found byte-equal to the original fat binary's (with
    /// [`verify_against`]).
    pub same_as_original: usize,
    /// Archives in `.kpack/` that hold no code object at all.
    pub empty_archives: Vec<PathBuf>,
    /// The archive paths the split binaries' markers name, each once.
    pub marker_paths: Vec<String>,
}

/// The marker and bundle indices of a split binary, if it is one.
fn split_binary_info(data: &[u8], path: &Path) -> Option<(Marker, Vec<u32>)> {
    let split = kpack_binary::sniff::split_binary(data, path).ok()??;
    Some((split.marker, split.bundles))
}

/// Whether a TOC key names a binary's code object (`lib/libx.so#0`) rather
/// than a named entry such as a kernel database file.
fn is_binary_key(key: &str) -> bool {
    key.rsplit_once('#')
        .is_some_and(|(_, index)| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
}

fn files(root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = fs_err::read_dir(root)?.collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let kind = entry.file_type()?;
        if kind.is_dir() {
            files(&path, out)?;
        } else if kind.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// Verifies the split tree (or single split binary) at `root`, for
/// `targets` (GPU targets as the runtime would be asked for them), or when
/// empty for every target the tree's archives hold binaries' code for.
pub fn verify_tree(root: &Path, targets: &[Target]) -> Result<VerifyReport> {
    check_tree(root, targets, Original::None)
}

/// As [`verify_tree`], and every code object the loader returns must be
/// byte-equal to the one the original fat binary's bundle holds for the
/// chosen target (a split binary's wrappers keep their bundles' numbers).
/// `original` is that binary, or a directory holding each split binary's
/// original at the same path relative to it as the split one has below
/// `root` (an unpacked wheel beside the installed split one; when `root`
/// is one split binary, its original is the file of the same name there),
/// read one at a time. A code object the original has and the archives do
/// not serve is [`Problem::Missing`]; one that differs,
/// [`Problem::Modified`].
pub fn verify_against(root: &Path, targets: &[Target], original: &Path) -> Result<VerifyReport> {
    if original.is_dir() {
        return check_tree(root, targets, Original::Dir(original));
    }
    let data = fs_err::read(original)?;
    let bundles = original_bundles(&data, original)?;
    check_tree(root, targets, Original::One(&bundles))
}

/// What split binaries are compared with.
#[derive(Clone, Copy)]
enum Original<'a, 'd> {
    None,
    /// The one original's bundles' code objects.
    One(&'a [Vec<CodeObject<'d>>]),
    /// A directory of originals at the split binaries' relative paths.
    Dir(&'a Path),
}

/// The code objects of each bundle of the fat binary `data`, read from
/// `path`.
fn original_bundles<'d>(data: &'d [u8], path: &Path) -> Result<Vec<Vec<CodeObject<'d>>>> {
    let fat = FatImage::parse(data)
        .map_err(|source| Error::Original {
            path: path.to_owned(),
            source,
        })?
        .ok_or_else(|| Error::NotFat {
            path: path.to_owned(),
        })?;
    fat.bundles()
        .iter()
        .map(Bundle::code_objects)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|source| Error::Original {
            path: path.to_owned(),
            source: source.into(),
        })
}

/// The code object `bundles[bundle]` holds for `target`.
fn original_code<'a>(
    bundles: &'a [Vec<CodeObject<'_>>],
    bundle: u32,
    target: &Target,
) -> Option<&'a [u8]> {
    bundles
        .get(bundle as usize)?
        .iter()
        .find(|code| &code.target == target)
        .map(|code| code.bytes.as_ref())
}

/// The checks of [`verify_tree`], comparing with `original`'s bundles
/// when given. Each split binary's archives are found as the loader finds
/// them, through its marker's paths relative to the binary: a tree's
/// `.kpack/` at its root, an installed wheel's at `<package>/.kpack/`.
fn check_tree(root: &Path, targets: &[Target], original: Original<'_, '_>) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    let mut archives = ArchiveDirs::default();
    let mut candidates = Vec::new();
    if fs_err::metadata(root)?.is_dir() {
        archives.served(&root.join(KPACK_DIR), &mut report)?;
        files(root, &mut candidates)?;
    } else {
        candidates.push(root.to_owned());
    }
    let binaries = split_binaries(&candidates, &mut archives, &mut report)?;
    let mut every_target: BTreeSet<Target> = binaries
        .iter()
        .flat_map(|(_, _, _, served)| served.values().flatten().cloned())
        .collect();
    let loader = Loader::new(LoaderConfig::default());
    let served_targets = every_target.clone();
    for (path, marker, bundles, served) in &binaries {
        report.binaries += 1;
        report.wrappers += bundles.len();
        let (data, parsed);
        let original = match original {
            Original::None => None,
            Original::One(bundles) => Some(bundles),
            Original::Dir(dir) => {
                let at = dir.join(relative_to(path, root));
                data = fs_err::read(&at)?;
                parsed = original_bundles(&data, &at)?;
                Some(&parsed[..])
            }
        };
        for &bundle in bundles {
            let key = rocm_kpack::BinaryKey::new(&marker.kernel_name, bundle).to_string();
            // Without targets asked for, each wrapper is checked for the
            // targets its archives hold its code for (binaries need not
            // share targets), or for all of them when they hold none.
            let asked = if targets.is_empty() {
                let held = served.get(&key).unwrap_or(&served_targets);
                let asked = held_targets(held, original, bundle);
                every_target.extend(asked.iter().cloned());
                asked
            } else {
                targets.iter().cloned().collect()
            };
            for target in &asked {
                let lookup = Lookup {
                    marker,
                    binary: path,
                    bundle,
                    target,
                };
                lookup.check(&loader, original, &mut report);
            }
        }
    }
    report.marker_paths.sort();
    report.marker_paths.dedup();
    report.targets = if targets.is_empty() {
        every_target.into_iter().collect()
    } else {
        targets.to_vec()
    };
    Ok(report)
}

/// A split binary found: its path, marker, bundle indices, and the targets
/// its archives hold each of its bundles' code for, by TOC key.
type SplitBinary<'p> = (
    &'p PathBuf,
    Marker,
    Vec<u32>,
    BTreeMap<String, BTreeSet<Target>>,
);

/// The split binaries among `candidates` (outside `.kpack/`), with the
/// archives their markers point to; notes those that break the program
/// header rule.
fn split_binaries<'p>(
    candidates: &'p [PathBuf],
    archives: &mut ArchiveDirs,
    report: &mut VerifyReport,
) -> Result<Vec<SplitBinary<'p>>> {
    let mut binaries = Vec::new();
    for path in candidates.iter().filter(|p| !in_kpack_dir(p)) {
        let data = fs_err::read(path)?;
        let Some((marker, bundles)) = split_binary_info(&data, path) else {
            continue;
        };
        if let Err(error) = check_program_headers(&data) {
            report.layout_failures.push(LayoutFailure {
                binary: path.clone(),
                error,
            });
        }
        report
            .marker_paths
            .extend(marker.search_paths.iter().cloned());
        let mut served = BTreeMap::new();
        for dir in archive_dirs(path, &marker) {
            for (key, held) in archives.served(&dir, report)? {
                served
                    .entry(key.clone())
                    .or_insert_with(BTreeSet::new)
                    .extend(held.iter().cloned());
            }
        }
        binaries.push((path, marker, bundles, served));
    }
    Ok(binaries)
}

/// The targets a wrapper is checked for when none are asked: those its
/// archives hold its code for (`held`: binaries need not share targets,
/// all of the tree's when they hold none of its code), and the original's
/// bundle's, whose code no archive serving it is missing.
fn held_targets(
    held: &BTreeSet<Target>,
    original: Option<&[Vec<CodeObject<'_>>]>,
    bundle: u32,
) -> BTreeSet<Target> {
    let mut asked = held.clone();
    let original = original.and_then(|o| o.get(bundle as usize));
    asked.extend(original.into_iter().flatten().map(|c| c.target.clone()));
    asked
}

/// `path` below `root`; a `root` that is the file itself gives its name.
fn relative_to<'p>(path: &'p Path, root: &Path) -> &'p Path {
    match path.strip_prefix(root) {
        Ok(relative) if !relative.as_os_str().is_empty() => relative,
        _ => path.file_name().map_or(path, Path::new),
    }
}

/// Whether `path` lies in a `.kpack/` directory (archives, not binaries).
fn in_kpack_dir(path: &Path) -> bool {
    path.components()
        .any(|c| c.as_os_str() == std::ffi::OsStr::new(KPACK_DIR))
}

/// The directories a split binary's marker points into: each search
/// path's directory, relative to the binary's own unless absolute.
fn archive_dirs(binary: &Path, marker: &Marker) -> Vec<PathBuf> {
    let base = binary.parent().unwrap_or(Path::new("."));
    let mut dirs: Vec<PathBuf> = marker
        .search_paths
        .iter()
        .filter_map(|pattern| Some(base.join(pattern).parent()?.to_owned()))
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// The archive directories read so far, by canonical path: each is read
/// (and its empty archives noted) once.
#[derive(Default)]
struct ArchiveDirs {
    read: BTreeMap<PathBuf, BTreeMap<String, BTreeSet<Target>>>,
}

impl ArchiveDirs {
    /// The targets the archives in `dir` hold each binary's code for;
    /// nothing for a directory that does not exist.
    fn served(
        &mut self,
        dir: &Path,
        report: &mut VerifyReport,
    ) -> Result<&BTreeMap<String, BTreeSet<Target>>> {
        let canonical = fs_err::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        if !self.read.contains_key(&canonical) {
            let served = check_archives(dir, report)?;
            self.read.insert(canonical.clone(), served);
        }
        Ok(&self.read[&canonical])
    }
}

/// Notes the archives in `kpack` that hold no code object; returns the
/// targets they hold each binary's code for, by TOC key.
fn check_archives(
    kpack: &Path,
    report: &mut VerifyReport,
) -> Result<BTreeMap<String, BTreeSet<Target>>> {
    let mut archives = Vec::new();
    if kpack.is_dir() {
        files(kpack, &mut archives)?;
    }
    let mut served: BTreeMap<String, BTreeSet<Target>> = BTreeMap::new();
    for path in archives
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "kpack"))
    {
        let archive = Archive::open(path)?;
        if archive.kernel_count() == 0 {
            report.empty_archives.push(path.clone());
        }
        for binary in archive.binaries().filter(|key| is_binary_key(key)) {
            served
                .entry(binary.to_owned())
                .or_default()
                .extend(archive.targets_of(binary).into_iter().flatten().cloned());
        }
    }
    Ok(served)
}

/// One wrapper of a split binary looked up for one target.
struct Lookup<'a> {
    marker: &'a Marker,
    binary: &'a Path,
    bundle: u32,
    target: &'a Target,
}

impl Lookup<'_> {
    /// Looks the code up through the loader, compares it with `original`'s
    /// bundles when given, and notes the outcome in `report`.
    fn check(
        &self,
        loader: &Loader,
        original: Option<&[Vec<CodeObject<'_>>]>,
        report: &mut VerifyReport,
    ) {
        let (bundle, target) = (self.bundle, self.target);
        let result = loader
            .locate(
                self.marker,
                self.binary,
                bundle,
                std::slice::from_ref(target),
            )
            .and_then(|located| {
                let kernel = located.kernel()?;
                let code = kernel.bytes()?;
                let same = original.map(|bundles| {
                    original_code(bundles, bundle, &located.target) == Some(&code[..])
                });
                let resolved = Resolved {
                    binary: self.binary.to_owned(),
                    bundle,
                    requested: target.clone(),
                    chosen: located.target.clone(),
                    archive: located.archive.path().to_owned(),
                    bytes: code.len(),
                };
                Ok((resolved, same))
            });
        match result {
            Ok((resolved, Some(false))) => report.failures.push(Failure {
                problem: Problem::Modified {
                    chosen: resolved.chosen,
                    bytes: resolved.bytes,
                },
                binary: resolved.binary,
                bundle,
                target: target.clone(),
            }),
            Ok((resolved, same)) => {
                report.same_as_original += usize::from(same == Some(true));
                report.resolved.push(resolved)
            }
            Err(error) => report.failures.push(Failure {
                binary: self.binary.to_owned(),
                bundle,
                target: target.clone(),
                problem: match original.and_then(|o| original_code(o, bundle, target)) {
                    Some(_) => Problem::Missing,
                    None => Problem::Lookup(error),
                },
            }),
        }
    }
}

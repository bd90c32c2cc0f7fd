//! The loader: from a split binary's marker and the GPU's targets to the
//! right code object, through a cache of opened archives.
//!
//! Candidates are opened lazily, in priority order, and the cache's global
//! lock is only held to find a path's slot, never while a file is opened, so
//! threads loading from different archives never wait on each other.

mod config;
mod marker;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

pub use config::{stderr_sink, LoaderConfig, LogSink};
pub use marker::{Marker, GFXARCH_PLACEHOLDER, MAX_MARKER_SIZE};

use crate::error::{Error, Result};
use crate::read::{Archive, Kernel};
use kpack_error::OneLine;
use kpack_gpu::target::{join_targets, Target};

/// The candidates of one request and what became of each: not tried yet,
/// could not be opened, or opened.
struct Search {
    paths: Vec<PathBuf>,
    opened: Vec<Option<Option<Arc<Archive>>>>,
}

impl Search {
    fn new(paths: Vec<PathBuf>) -> Search {
        Search {
            opened: vec![None; paths.len()],
            paths,
        }
    }

    fn extend(&mut self, paths: Vec<PathBuf>) {
        self.opened.extend(paths.iter().map(|_| None));
        self.paths.extend(paths);
    }
}

/// A path's cache slot: `None` until an open succeeds. Failed opens are not
/// remembered, so an archive installed while the process runs is found.
type Slot = Arc<Mutex<Option<Arc<Archive>>>>;

/// Finds and loads code objects for split binaries; the equivalent of the
/// C API's `kpack_cache_t`.
#[derive(Debug, Default)]
pub struct Loader {
    config: LoaderConfig,
    cache: Mutex<HashMap<PathBuf, Slot>>,
}

/// What a request resolved to: an archive and the exact entry in it.
#[derive(Debug, Clone)]
pub struct Located {
    pub archive: Arc<Archive>,
    /// `kernel_name#bundle_index`.
    pub binary: String,
    /// The compatible target whose code was chosen.
    pub target: Target,
}

impl Located {
    /// The chosen code object.
    pub fn kernel(&self) -> Result<Kernel<'_>> {
        self.archive.find(&self.binary, &self.target)
    }
}

impl Loader {
    /// A loader with an explicit configuration.
    pub fn new(config: LoaderConfig) -> Loader {
        Loader {
            config,
            cache: Mutex::default(),
        }
    }

    /// A loader configured from the process environment, read now.
    pub fn from_env() -> Loader {
        Loader::new(LoaderConfig::from_env())
    }

    /// The configuration in effect.
    pub fn config(&self) -> &LoaderConfig {
        &self.config
    }

    fn log(&self, message: impl FnOnce() -> String) {
        if let Some(log) = &self.config.log {
            log(&message());
        }
    }

    /// Loads the code object of bundle `bundle_index` of the binary at
    /// `binary_path` (whose marker is `marker`) for the first of `arches`
    /// (in priority order) that some archive has code for.
    pub fn load(
        &self,
        marker: &Marker,
        binary_path: &Path,
        bundle_index: u32,
        arches: &[Target],
    ) -> Result<Vec<u8>> {
        let located = self.locate(marker, binary_path, bundle_index, arches)?;
        let bytes = located.kernel()?.bytes()?.into_owned();
        Ok(bytes)
    }

    /// Resolves a request to an archive and entry without reading the code
    /// object, which the caller then reads into a buffer of its own.
    pub fn locate(
        &self,
        marker: &Marker,
        binary_path: &Path,
        bundle_index: u32,
        arches: &[Target],
    ) -> Result<Located> {
        if arches.is_empty() {
            return Err(Error::InvalidArgument("no architecture requested".into()));
        }
        if self.config.disabled {
            self.log(|| "disabled by ROCM_KPACK_DISABLE".into());
            return Err(Error::Disabled);
        }
        let binary = format!("{}#{bundle_index}", marker.kernel_name);
        self.log(|| {
            format!(
                "loading {binary} of {} for [{}]",
                binary_path.display(),
                join_targets(arches)
            )
        });
        let candidates = self.candidates(marker, binary_path, arches);
        self.log(|| {
            let list: Vec<_> = candidates.iter().map(|p| p.display().to_string()).collect();
            format!("candidate archives: [{}]", list.join(", "))
        });

        let mut search = Search::new(candidates);
        let mut misses = Vec::new();
        if let Some(found) = self.search(&mut search, arches, &binary, &mut misses)? {
            return Ok(found);
        }
        // None of the named archives serves these targets. Archives beside
        // them that match the same `@GFXARCH@` pattern (another GPU's, or a
        // family archive) are the package's device code too: search them
        // last, so a GPU the package was not built for is told so (arch not
        // found, with what there is) rather than that nothing is installed.
        let siblings = self.siblings(marker, binary_path, &search.paths);
        if !siblings.is_empty() {
            self.log(|| {
                let list: Vec<_> = siblings.iter().map(|p| p.display().to_string()).collect();
                format!("archives beside them: [{}]", list.join(", "))
            });
            search.extend(siblings);
            if let Some(found) = self.search(&mut search, arches, &binary, &mut misses)? {
                return Ok(found);
            }
        }

        let available: Vec<(PathBuf, Vec<Target>)> = search
            .paths
            .iter()
            .zip(&search.opened)
            .filter_map(|(path, archive)| {
                let archive = archive.as_ref()?.as_ref()?;
                Some((path.clone(), archive.architectures().to_vec()))
            })
            .collect();
        let error = if !misses.is_empty() {
            Error::KernelNotFoundAnywhere { binary, misses }
        } else if available.is_empty() {
            Error::ArchiveNotFound {
                tried: search.paths,
            }
        } else {
            Error::ArchNotFound {
                requested: arches.to_vec(),
                available,
            }
        };
        self.log(|| OneLine(&error).to_string());
        Err(error)
    }

    /// Tries, for each requested arch and each of its compatible targets in
    /// order (most specific first), every candidate that opens and lists that
    /// exact target. A candidate without the binary's key is a miss, recorded
    /// in `misses`, and the search goes on: overlay archives such as
    /// `torch_gfx90a:xnack+.kpack` hold only some kernels (or none) beside a
    /// full `torch_gfx90a.kpack`. Any other lookup error is returned as is.
    /// `Ok(None)` when no candidate holds the key.
    fn search(
        &self,
        search: &mut Search,
        arches: &[Target],
        binary: &str,
        misses: &mut Vec<(PathBuf, Target)>,
    ) -> Result<Option<Located>> {
        for arch in arches {
            for target in arch.compatible() {
                for (index, path) in search.paths.iter().enumerate() {
                    let archive =
                        search.opened[index].get_or_insert_with(|| self.open_cached(path));
                    let Some(archive) = archive else { continue };
                    let missed = misses.iter().any(|(p, t)| p == path && *t == target);
                    if !archive.serves(&target) || missed {
                        continue;
                    }
                    self.log(|| {
                        format!(
                            "{} serves {target} (requested {arch}); looking up {binary}",
                            path.display()
                        )
                    });
                    let located = Located {
                        archive: Arc::clone(archive),
                        binary: binary.to_owned(),
                        target: target.clone(),
                    };
                    match located.kernel() {
                        Ok(_) => return Ok(Some(located)),
                        Err(Error::KernelNotFound { .. }) => {
                            self.log(|| {
                                format!(
                                    "{}: no {binary} for {target}; trying the next candidate",
                                    path.display()
                                )
                            });
                            misses.push((path.clone(), target.clone()));
                        }
                        Err(error) => {
                            self.log(|| format!("lookup failed: {}", OneLine(&error)));
                            return Err(error);
                        }
                    }
                }
            }
        }
        Ok(None)
    }

    /// Files next to the marker's `@GFXARCH@` paths that match their
    /// pattern and are not candidates already, sorted.
    fn siblings(&self, marker: &Marker, binary_path: &Path, known: &[PathBuf]) -> Vec<PathBuf> {
        if self.config.path.is_some() {
            return Vec::new();
        }
        let base = binary_path.parent().unwrap_or(Path::new(""));
        let mut found = Vec::new();
        for entry in &marker.search_paths {
            let Some((before, after)) = entry.split_once(GFXARCH_PLACEHOLDER) else {
                continue;
            };
            let pattern = base.join(before);
            let (dir, prefix) = if before.is_empty() || before.ends_with(std::path::is_separator) {
                (pattern.as_path(), "")
            } else {
                (
                    pattern.parent().unwrap_or(Path::new("")),
                    pattern.file_name().and_then(|n| n.to_str()).unwrap_or(""),
                )
            };
            let Ok(entries) = fs_err::read_dir(if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            }) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if name.len() > prefix.len() + after.len()
                    && name.starts_with(prefix)
                    && name.ends_with(after)
                {
                    let path = dir.join(name);
                    if !known.contains(&path) && !found.contains(&path) {
                        found.push(path);
                    }
                }
            }
        }
        found.sort();
        found
    }

    /// The archive paths to try, in order, without duplicates.
    pub fn candidates(
        &self,
        marker: &Marker,
        binary_path: &Path,
        arches: &[Target],
    ) -> Vec<PathBuf> {
        if let Some(paths) = &self.config.path {
            return dedup(paths.clone());
        }
        let base = binary_path.parent().unwrap_or(Path::new(""));
        let mut candidates = self.config.path_prefix.clone();
        for entry in &marker.search_paths {
            if entry.contains(GFXARCH_PLACEHOLDER) {
                for arch in arches {
                    for target in arch.compatible() {
                        let expanded = entry.replace(GFXARCH_PLACEHOLDER, &target.to_string());
                        candidates.push(base.join(expanded));
                    }
                }
            } else {
                candidates.push(base.join(entry));
            }
        }
        dedup(candidates)
    }

    /// The archive at `path`, opened once and shared; `None` (and a log line)
    /// if it cannot be opened.
    fn open_cached(&self, path: &Path) -> Option<Arc<Archive>> {
        let slot = {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(cache.entry(path.to_owned()).or_default())
        };
        let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(archive) = &*slot {
            return Some(Arc::clone(archive));
        }
        match Archive::open(path) {
            Ok(archive) => {
                self.log(|| {
                    format!(
                        "opened {} (group {}, targets [{}])",
                        path.display(),
                        archive.group(),
                        join_targets(archive.architectures())
                    )
                });
                let archive = Arc::new(archive);
                *slot = Some(Arc::clone(&archive));
                Some(archive)
            }
            Err(error) => {
                self.log(|| match &error {
                    Error::Open(source) if source.kind() == std::io::ErrorKind::NotFound => {
                        format!("{}: not found", path.display())
                    }
                    _ => OneLine(&error).to_string(),
                });
                None
            }
        }
    }
}

fn dedup(paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut seen = std::collections::HashSet::new();
    paths
        .into_iter()
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

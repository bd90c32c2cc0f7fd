//! Where the dynamic loader would find a library's `libamdhip64.so*`.
//!
//! The order is glibc's (ld.so(8)): the library's `DT_RPATH` when it has no
//! `DT_RUNPATH`, `LD_LIBRARY_PATH`, its `DT_RUNPATH`, the loader's cache,
//! the default directories; with ROCm's own places, `$ROCM_PATH/lib` and
//! `/opt/rocm/lib`, before the cache (08-hip-runtimes.md: a ROCm install
//! there is the runtime its user means). Each place is an input
//! ([`SearchRoots`]), so tests need nothing of the machine. A candidate
//! that is not a readable x86-64 ELF file is skipped, as the loader skips
//! it, and said in the notes.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::ld_cache::LdCache;
use super::{classify, elf, FoundIn, HipRuntime, HipRuntimeError, RUNTIME_PREFIX};

/// The loader's default directories on x86-64 (Debian's multiarch ones,
/// then the others).
pub(crate) const DEFAULT_DIRECTORIES: [&str; 6] = [
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];
/// The loader's cache.
pub(crate) const DEFAULT_LD_CACHE: &str = "/etc/ld.so.cache";
/// Where AMD's ROCm packages install.
pub(crate) const DEFAULT_ROCM_PATH: &str = "/opt/rocm";

/// Every place the search looks, besides a library's own run paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRoots {
    /// `LD_LIBRARY_PATH`, as set.
    pub ld_library_path: Option<OsString>,
    /// `ROCM_PATH`, as set.
    pub rocm_path: Option<PathBuf>,
    /// Where ROCm is when `ROCM_PATH` does not say (`/opt/rocm`).
    pub rocm_default: PathBuf,
    /// The loader's cache (`/etc/ld.so.cache`); one that does not exist is
    /// an empty cache.
    pub ld_cache: PathBuf,
    /// The loader's default directories.
    pub default_dirs: Vec<PathBuf>,
}

impl SearchRoots {
    /// This machine's: `LD_LIBRARY_PATH` and `ROCM_PATH` from the
    /// environment, the standard cache and directories.
    pub fn system() -> SearchRoots {
        SearchRoots {
            ld_library_path: std::env::var_os(kpack_env::EnvVars::LD_LIBRARY_PATH),
            rocm_path: std::env::var_os(kpack_env::EnvVars::ROCM_PATH)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from),
            rocm_default: PathBuf::from(DEFAULT_ROCM_PATH),
            ld_cache: PathBuf::from(DEFAULT_LD_CACHE),
            default_dirs: DEFAULT_DIRECTORIES.iter().map(PathBuf::from).collect(),
        }
    }
}

/// The runtime found (or none), and what was skipped on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeSearch {
    pub runtime: Option<HipRuntime>,
    /// One line per place that could not be used (`skipped ...`).
    pub notes: Vec<String>,
}

/// What to look for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wanted {
    /// The name a library needs (`libamdhip64.so.5`).
    Name(String),
    /// Any `libamdhip64.so*`, the highest version in a place: for a
    /// library not yet installed.
    AnyVersion,
}

/// A library's own run paths, expanded.
#[derive(Debug, Default)]
struct RunPaths {
    rpath: Vec<PathBuf>,
    runpath: Vec<PathBuf>,
}

impl RunPaths {
    /// The run paths of `library` (whose dynamic entries are `info`), with
    /// `$ORIGIN` its directory.
    fn of(info: &elf::DynamicInfo, library: &Path) -> RunPaths {
        let origin = library.parent().unwrap_or(Path::new("/"));
        let expand = |list: &Option<String>| -> Vec<PathBuf> {
            list.iter()
                .flat_map(|list| list.split(':'))
                .filter_map(|entry| elf::expand_origin(entry, origin))
                .collect()
        };
        RunPaths {
            // The loader ignores DT_RPATH when DT_RUNPATH is present.
            rpath: if info.runpath.is_none() {
                expand(&info.rpath)
            } else {
                Vec::new()
            },
            runpath: expand(&info.runpath),
        }
    }
}

/// Searches with one reading of the loader's cache.
#[derive(Debug)]
pub struct Searcher<'a> {
    roots: &'a SearchRoots,
    cache: LdCache,
    /// Why the cache could not be used, when it could not.
    notes: Vec<String>,
}

impl<'a> Searcher<'a> {
    /// Reads the cache; one that cannot be read is a note, and the search
    /// goes on without it as the loader does.
    pub fn new(roots: &'a SearchRoots) -> Searcher<'a> {
        let mut notes = Vec::new();
        let cache = match LdCache::read(&roots.ld_cache) {
            Ok(cache) => cache,
            Err(super::ld_cache::LdCacheError::Read { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                LdCache::default()
            }
            Err(error) => {
                notes.push(format!("skipped: {}", kpack_error::one_line(&error)));
                LdCache::default()
            }
        };
        Searcher {
            roots,
            cache,
            notes,
        }
    }

    /// The runtime a library installed now with no run path of its own
    /// would load (`detect`, and an install's plan before its files exist).
    pub fn for_new_library(&self) -> RuntimeSearch {
        self.locate(&Wanted::AnyVersion, &RunPaths::default())
    }

    /// The runtime the loader would give `library`; `None` when it does not
    /// need one.
    pub fn for_library(&self, library: &Path) -> Result<Option<RuntimeSearch>, HipRuntimeError> {
        let info = elf::read_dynamic(library)?;
        let Some(name) = info.needed.iter().find(|n| n.starts_with(RUNTIME_PREFIX)) else {
            return Ok(None);
        };
        let paths = RunPaths::of(&info, library);
        Ok(Some(self.locate(&Wanted::Name(name.clone()), &paths)))
    }

    /// The runtime an installed library with device code would run under:
    /// the `libamdhip64.so*` it needs by name or, when it reaches the
    /// runtime only through other libraries (jax's `_linalg.so` needs
    /// `libhipblas.so.3`, which needs the runtime), any version; searched
    /// from the library's own run paths first either way, which is where a
    /// Python distribution finds its ROCm (TheRock's `_rocm_sdk_core/lib`).
    pub fn for_installed_library(&self, library: &Path) -> Result<RuntimeSearch, HipRuntimeError> {
        let info = elf::read_dynamic(library)?;
        let wanted = match info.needed.iter().find(|n| n.starts_with(RUNTIME_PREFIX)) {
            Some(name) => Wanted::Name(name.clone()),
            None => Wanted::AnyVersion,
        };
        Ok(self.locate(&wanted, &RunPaths::of(&info, library)))
    }

    fn locate(&self, wanted: &Wanted, paths: &RunPaths) -> RuntimeSearch {
        let mut notes = self.notes.clone();
        let roots = self.roots;
        let ld_library_path: Vec<PathBuf> = roots
            .ld_library_path
            .iter()
            .flat_map(std::env::split_paths)
            .filter(|dir| dir.is_absolute())
            .collect();
        let places = [
            (FoundIn::Rpath, paths.rpath.clone()),
            (FoundIn::LdLibraryPath, ld_library_path),
            (FoundIn::Runpath, paths.runpath.clone()),
            (
                FoundIn::RocmPath,
                roots.rocm_path.iter().map(|p| p.join("lib")).collect(),
            ),
            (FoundIn::RocmDefault, vec![roots.rocm_default.join("lib")]),
        ];
        for (found_in, dirs) in places {
            for dir in dirs {
                if let Some(runtime) = self.in_directory(&dir, wanted, found_in, &mut notes) {
                    return RuntimeSearch {
                        runtime: Some(runtime),
                        notes,
                    };
                }
            }
        }
        let cached = self
            .in_cache(wanted)
            .and_then(|(path, name)| inspect(path, name, FoundIn::LdCache, &mut notes));
        let runtime = cached.or_else(|| {
            roots.default_dirs.iter().find_map(|dir| {
                self.in_directory(dir, wanted, FoundIn::DefaultDirectory, &mut notes)
            })
        });
        RuntimeSearch { runtime, notes }
    }

    /// The runtime `wanted` names in `dir`, if there is one and it reads.
    fn in_directory(
        &self,
        dir: &Path,
        wanted: &Wanted,
        found_in: FoundIn,
        notes: &mut Vec<String>,
    ) -> Option<HipRuntime> {
        let name = match wanted {
            Wanted::Name(name) => name.clone(),
            Wanted::AnyVersion => highest_version(
                fs_err::read_dir(dir)
                    .ok()?
                    .filter_map(|entry| entry.ok()?.file_name().into_string().ok()),
            )?,
        };
        let path = dir.join(&name);
        if !fs_err::metadata(&path).is_ok_and(|m| m.is_file()) {
            return None;
        }
        inspect(path, name, found_in, notes)
    }

    /// The cache's entry for `wanted`: its path and name.
    fn in_cache(&self, wanted: &Wanted) -> Option<(PathBuf, String)> {
        let name = match wanted {
            Wanted::Name(name) => name.clone(),
            Wanted::AnyVersion => {
                highest_version(self.cache.entries().iter().map(|e| e.name.clone()))?
            }
        };
        let path = self.cache.lookup(&name)?.to_owned();
        Some((path, name))
    }
}

/// The runtime at `path`, or a note saying why it was skipped.
fn inspect(
    path: PathBuf,
    name: String,
    found_in: FoundIn,
    notes: &mut Vec<String>,
) -> Option<HipRuntime> {
    match classify(&path) {
        Ok(classified) => Some(HipRuntime {
            path,
            name,
            found_in,
            evidence: classified.evidence,
            compressed_bundles: classified.compressed_bundles,
        }),
        Err(error) => {
            notes.push(format!("skipped: {}", kpack_error::one_line(&error)));
            None
        }
    }
}

/// The `libamdhip64.so[.N[.M...]]` name with the highest major version
/// among `names` (`libamdhip64.so.6` over `.so.5`, any over the bare
/// `.so`), and of those the shortest: the soname a library links against
/// (`.so.6` over `.so.6.1.2`, the same file).
fn highest_version(names: impl Iterator<Item = String>) -> Option<String> {
    names
        .filter_map(|name| {
            let rest = name.strip_prefix(RUNTIME_PREFIX)?;
            let version = if rest.is_empty() {
                Vec::new()
            } else {
                rest.strip_prefix('.')?
                    .split('.')
                    .map(|part| part.parse::<u64>().ok())
                    .collect::<Option<Vec<u64>>>()?
            };
            let major = version.first().copied();
            Some(((major, std::cmp::Reverse(version.len())), name))
        })
        .max()
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_highest_version_of_the_runtime_is_chosen() {
        let names = [
            "libamdhip64.so",
            "libamdhip64.so.5",
            "libamdhip64.so.6.1.2",
            "libamdhip64.so.6",
            "libamdhip64.so.bak",
            "libamdhip64.sox",
            "libc.so.6",
        ];
        let best = highest_version(names.iter().map(|s| s.to_string()));
        assert_eq!(best.as_deref(), Some("libamdhip64.so.6"));
        assert_eq!(highest_version(["libc.so.6".to_string()].into_iter()), None);
    }
}

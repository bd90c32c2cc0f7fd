//! Which files of a tree or a wheel leave the host output, by one rule for
//! both (03-packer.md, "Trees and wheels are routed by one rule"):
//!
//! - kernel database files, by their path (`kpack_binary::databases`);
//! - AMDGPU code objects, by their content, wherever they lie, to their
//!   target's owner ("Code objects found by content");
//! - their companions: every file below a directory named exactly after
//!   one processor whose code objects are all that processor's
//!   (`hsa/gfx942/`), and a file sharing a code object's stem
//!   (`kernel.json` beside `kernel.hsaco`).
//!
//! Names alone never route: a directory or file named for a GPU holding no
//! code object for it stays in the host output. What a tree split sends to
//! a payload, a wheel split sends to a device wheel.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use kpack_binary::databases::{Recognisers, Role};
use kpack_gpu::gpus::{self, PROCESSORS};
use kpack_gpu::{Level, Owner, Target};

use crate::databases::payload::{DeviceFile, CODE_OBJECTS};

/// A file to route: its path relative to the root it installs under, and
/// the target of the code object it is, if it is one.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub path: &'a Path,
    pub code_object: Option<&'a Target>,
}

/// Where each candidate goes, in order: `None` for the host output, else
/// the device file it becomes (its `relative` the candidate's path).
pub fn route(candidates: &[Candidate<'_>], recognisers: &Recognisers) -> Vec<Option<DeviceFile>> {
    let mut routes: Vec<Option<DeviceFile>> = Vec::with_capacity(candidates.len());
    let mut claimed = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        let found = recognisers.recognise(candidate.path);
        claimed.push(found.is_some());
        routes.push(found.and_then(|found| {
            let (owner, target, name) = match found.role {
                Role::Device { target, name } => (Owner::of(&target), Some(target), name),
                Role::Group { owner, name } => (owner, None, name),
                Role::Shared => return None,
            };
            Some(DeviceFile {
                relative: candidate.path.to_owned(),
                library: found.library,
                component: found.component,
                owner,
                target,
                name,
            })
        }));
    }
    let loose: Vec<usize> = (0..candidates.len()).filter(|&i| !claimed[i]).collect();
    for &i in &loose {
        if let Some(target) = candidates[i].code_object {
            routes[i] = code_object_file(candidates[i].path, target);
        }
    }
    let dirs = processor_dirs(candidates, &loose);
    let stems = code_object_stems(candidates, &loose);
    for &i in &loose {
        if routes[i].is_some() || candidates[i].code_object.is_some() {
            continue;
        }
        let path = candidates[i].path;
        let by_dir = path
            .ancestors()
            .skip(1)
            .filter_map(|dir| dirs.get(dir))
            .last()
            .cloned();
        let by_stem = || stems.get(&stem_key(path)?).cloned().flatten();
        if let Some(target) = by_dir.or_else(by_stem) {
            routes[i] = code_object_file(path, &target);
        }
    }
    routes
}

/// A code object (or a companion) routed to the owner of `target`.
fn code_object_file(path: &Path, target: &Target) -> Option<DeviceFile> {
    let (owner, target) = if target.is_generic() {
        (owner_of_generic(target)?, None)
    } else {
        (Owner::of(target), Some(target.clone()))
    };
    Some(DeviceFile {
        relative: path.to_owned(),
        library: CODE_OBJECTS,
        component: CODE_OBJECTS,
        owner,
        target,
        name: path.to_string_lossy().replace('\\', "/"),
    })
}

/// The narrowest sub-family or family every member of a generic target
/// belongs to (`gfx11-generic`: `gfx11`); `None` when they share none, and
/// the code stays in the host output.
fn owner_of_generic(generic: &Target) -> Option<Owner> {
    let chains: Vec<Vec<Owner>> = PROCESSORS
        .iter()
        .filter(|p| p.generic == Some(generic.processor()))
        .filter_map(|p| Target::bare(p.name).ok())
        .map(|member| Owner::chain(&member))
        .collect();
    let (first, rest) = chains.split_first()?;
    first
        .iter()
        .filter(|owner| owner.level() != Level::Target)
        .find(|owner| rest.iter().all(|chain| chain.contains(owner)))
        .cloned()
}

/// The directories named exactly after one processor whose code objects
/// (among `loose`) are all that processor's, each with its bare target.
fn processor_dirs<'a>(candidates: &[Candidate<'a>], loose: &[usize]) -> HashMap<&'a Path, Target> {
    let mut seen: HashMap<&'a Path, BTreeSet<&'a str>> = HashMap::new();
    for &i in loose {
        let Some(target) = candidates[i].code_object else {
            continue;
        };
        for dir in candidates[i].path.ancestors().skip(1) {
            let name = dir.file_name().and_then(|n| n.to_str());
            if name.is_some_and(|n| gpus::processor(n).is_some()) {
                seen.entry(dir).or_default().insert(target.processor());
            }
        }
    }
    seen.into_iter()
        .filter_map(|(dir, processors)| {
            let name = dir.file_name()?.to_str()?;
            let only = processors.len() == 1 && processors.contains(name);
            only.then(|| Some((dir, Target::bare(name).ok()?)))
                .flatten()
        })
        .collect()
}

/// A file's directory and stem (its name without the last extension).
fn stem_key(path: &Path) -> Option<(&Path, &std::ffi::OsStr)> {
    Some((path.parent()?, path.file_stem()?))
}

/// The code objects among `loose` by directory and stem: the target their
/// companions go with, or `None` when code objects of one stem are for
/// different targets (their companions stay).
fn code_object_stems<'a>(
    candidates: &[Candidate<'a>],
    loose: &[usize],
) -> HashMap<(&'a Path, &'a std::ffi::OsStr), Option<Target>> {
    let mut stems: HashMap<_, Option<Target>> = HashMap::new();
    for &i in loose {
        let Some(target) = candidates[i].code_object else {
            continue;
        };
        let Some(key) = stem_key(candidates[i].path) else {
            continue;
        };
        stems
            .entry(key)
            .and_modify(|known| {
                if known.as_ref() != Some(target) {
                    *known = None;
                }
            })
            .or_insert_with(|| Some(target.clone()));
    }
    stems
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn routes(files: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        let paths: Vec<PathBuf> = files.iter().map(|(p, _)| PathBuf::from(p)).collect();
        let targets: Vec<Option<Target>> = files
            .iter()
            .map(|(_, t)| t.map(|t| Target::parse(t).unwrap()))
            .collect();
        let candidates: Vec<Candidate<'_>> = paths
            .iter()
            .zip(&targets)
            .map(|(path, target)| Candidate {
                path,
                code_object: target.as_ref(),
            })
            .collect();
        route(&candidates, &Recognisers::builtin())
            .into_iter()
            .zip(files)
            .map(|(route, (path, _))| {
                (
                    path.to_string(),
                    route.map(|f| format!("{}/{}", f.component, f.owner)),
                )
            })
            .collect()
    }

    fn owner(route: &(String, Option<String>)) -> Option<&str> {
        route.1.as_deref()
    }

    #[test]
    fn a_processor_directory_goes_whole_with_its_code_objects() {
        let found = routes(&[
            (
                "aiter_meta/hsa/gfx942/fmha_v3_fwd/MI300/fwd.co",
                Some("gfx942"),
            ),
            ("aiter_meta/hsa/gfx942/fmha_v3_fwd/fwd.csv", None),
            ("aiter_meta/hsa/gfx942/codegen.py", None),
            ("aiter_meta/hsa/gfx950/x.co", Some("gfx950:xnack-")),
            ("aiter_meta/hsa/gfx950/x.csv", None),
            ("aiter_meta/hsa/codegen.py", None),
        ]);
        let owners: Vec<Option<&str>> = found.iter().map(owner).collect();
        assert_eq!(
            owners,
            [
                Some("code-objects/gfx942"),
                Some("code-objects/gfx942"),
                Some("code-objects/gfx942"),
                Some("code-objects/gfx950"),
                Some("code-objects/gfx950"),
                None
            ]
        );
    }

    #[test]
    fn names_alone_never_route() {
        let found = routes(&[
            ("pkg/hip_gfx1100/kernel.hip", None),
            ("pkg/configs/gfx942_tuning.json", None),
            ("pkg/gfx942/readme.txt", None),
            ("pkg/gfx90a/x.co", Some("gfx942")),
            ("pkg/gfx90a/notes.txt", None),
        ]);
        let owners: Vec<Option<&str>> = found.iter().map(owner).collect();
        assert_eq!(
            owners,
            [None, None, None, Some("code-objects/gfx942"), None]
        );
    }

    #[test]
    fn a_file_sharing_a_code_object_s_stem_goes_with_it() {
        let dir = "aiter/ops/triton/configs/gemm/aot/gemm_a8w8_M=16-N=64-K=128";
        let found = routes(&[
            (&format!("{dir}/gemm_a8w8.hsaco"), Some("gfx950")),
            (&format!("{dir}/gemm_a8w8.json"), None),
            (&format!("{dir}/other.json"), None),
        ]);
        let owners: Vec<Option<&str>> = found.iter().map(owner).collect();
        assert_eq!(
            owners,
            [
                Some("code-objects/gfx950"),
                Some("code-objects/gfx950"),
                None
            ]
        );
    }

    #[test]
    fn databases_keep_their_recognisers_and_generic_code_goes_to_the_family() {
        let found = routes(&[
            ("torch/lib/aotriton.images/amd-gfx11xx/flash/k.aks2", None),
            ("lib/rocblas/2.47.0/library/TensileLibrary.dat", None),
            (
                "lib/rocblas/2.47.0/library/TensileLibrary_gfx90a.co",
                Some("gfx90a"),
            ),
            ("pkg/k11.co", Some("gfx11-generic")),
            ("pkg/k117.co", Some("gfx11-7-generic")),
        ]);
        let owners: Vec<Option<&str>> = found.iter().map(owner).collect();
        assert_eq!(
            owners,
            [
                Some("aotriton/gfx11"),
                None,
                Some("tensile/gfx90a"),
                Some("code-objects/gfx11"),
                None
            ]
        );
    }
}

//! Database payloads: a tree split copies each owner's database files of
//! one component into a directory of its own, at the files' original
//! relative paths, so that a payload extracted into the install prefix puts
//! every file where it was.
//!
//! Layout: `<payloads>/<component>/<owner>/<relative path>`, where
//! `<payloads>` defaults to `<output>.payloads` beside the host tree (so
//! the host tree holds no payload). The owner is a processor's package
//! (07-gpu-targets.md, "Packaging levels"): the `xnack+` and `xnack-` files
//! of `gfx90a` (and its files for no feature) go into the `gfx90a` payload
//! together, because xnack is a mode the same GPU runs in (`HSA_XNACK`),
//! and the library picks the file for the mode at run time; `gfx1250-strict`
//! files go with `gfx1250`'s. Files a sub-family or family owns
//! (AOTriton's `amd-gfx11xx`) make that group's payload (`aotriton/gfx11`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kpack_gpu::{Owner, Target};
use rayon::prelude::*;

use crate::error::{Error, Result};

/// The library and component of code objects routed by content and their
/// companions.
pub const CODE_OBJECTS: &str = "code-objects";

/// A database file a tree split routes by target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFile {
    /// Its path relative to the tree's root.
    pub relative: PathBuf,
    pub library: &'static str,
    pub component: &'static str,
    /// Whose payload it goes into: its target's package, or the group it
    /// is for.
    pub owner: Owner,
    /// The full target it is for (`gfx90a:xnack-`); `None` for a file a
    /// sub-family or family owns.
    pub target: Option<Target>,
    /// Its name within the library and target (see
    /// [`Role::Device`](super::Role::Device)).
    pub name: String,
}

impl DeviceFile {
    /// Whether `--pack-databases` may store it in a target's archive: a
    /// database file for one target, not a group's file nor a code object
    /// its library loads by path.
    pub fn packable(&self) -> bool {
        self.target.is_some() && self.library != CODE_OBJECTS
    }
}

/// One owner's database files of one component, ready to publish as a
/// tree artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabasePayload {
    /// The artifact component (`tensile` for rocBLAS and hipBLASLt, else
    /// the library's name).
    pub component: &'static str,
    /// The libraries whose files it holds (`rocblas`, `hipblaslt`).
    pub libraries: Vec<&'static str>,
    /// Who it serves: a processor's package (every GPU of that processor,
    /// in any mode), a sub-family or a family.
    pub owner: Owner,
    /// The full targets of its files, sorted (`gfx90a`, `gfx90a:xnack-`,
    /// `gfx90a:xnack+`); empty for a sub-family's or family's.
    pub targets: Vec<Target>,
    /// Its directory: the files at their paths relative to the input
    /// tree's root.
    pub dir: PathBuf,
    pub files: usize,
    pub bytes: u64,
}

/// The directory payloads go in unless told otherwise: `<output>.payloads`
/// beside the host tree `output`.
pub fn default_payload_dir(output: &Path) -> Result<PathBuf> {
    let name = output.file_name().ok_or_else(|| Error::NoPayloadDir {
        path: output.to_owned(),
    })?;
    let mut name = name.to_owned();
    name.push(".payloads");
    Ok(output.with_file_name(name))
}

/// A payload's directory below the payloads directory:
/// `<component>/<owner>`.
pub fn payload_subdir(component: &str, owner: &Owner) -> PathBuf {
    Path::new(component).join(owner.key())
}

/// Copies `files` from `input` into per-owner payloads under `root`,
/// in parallel and streamed by the kernel (`copy_file_range` where the
/// file system has it), each keeping its mode; a payload's directories
/// get the modes of the input's.
pub fn write_payloads(
    input: &Path,
    root: &Path,
    files: &[DeviceFile],
) -> Result<Vec<DatabasePayload>> {
    let copied = files
        .par_iter()
        .map(|file| {
            let to = root
                .join(payload_subdir(file.component, &file.owner))
                .join(&file.relative);
            if let Some(parent) = to.parent() {
                fs_err::create_dir_all(parent)?;
            }
            Ok(fs_err::copy(input.join(&file.relative), &to)?)
        })
        .collect::<Result<Vec<u64>>>()?;
    let mut payloads: BTreeMap<(&str, &Owner), Vec<(&DeviceFile, u64)>> = BTreeMap::new();
    for (file, bytes) in files.iter().zip(copied) {
        let key = (file.component, &file.owner);
        payloads.entry(key).or_default().push((file, bytes));
    }
    payloads
        .into_values()
        .map(|members| describe(input, root, &members))
        .collect()
}

/// A payload's description, once its files are in place; gives its
/// directories their modes in the input.
fn describe(input: &Path, root: &Path, members: &[(&DeviceFile, u64)]) -> Result<DatabasePayload> {
    let first = members[0].0;
    let dir = root.join(payload_subdir(first.component, &first.owner));
    let mut libraries = BTreeSet::new();
    let mut targets = BTreeSet::new();
    let mut dirs = BTreeSet::new();
    for (file, _) in members {
        libraries.insert(file.library);
        targets.extend(file.target.clone());
        dirs.extend(file.relative.ancestors().skip(1));
    }
    // Children first: a parent the input makes unsearchable would stop the
    // rest.
    for relative in dirs.iter().rev() {
        let permissions = fs_err::metadata(input.join(relative))?.permissions();
        fs_err::set_permissions(dir.join(relative), permissions)?;
    }
    Ok(DatabasePayload {
        component: first.component,
        libraries: libraries.into_iter().collect(),
        owner: first.owner.clone(),
        targets: targets.into_iter().collect(),
        dir,
        files: members.len(),
        bytes: members.iter().map(|(_, bytes)| bytes).sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_sit_beside_the_host_tree() {
        assert_eq!(
            default_payload_dir(Path::new("/tmp/out")).unwrap(),
            Path::new("/tmp/out.payloads")
        );
        assert_eq!(
            default_payload_dir(Path::new("split")).unwrap(),
            Path::new("split.payloads")
        );
        assert!(default_payload_dir(Path::new("/")).is_err());
    }

    #[test]
    fn a_payload_is_named_by_component_and_owner() {
        let owner = |target: &str| Owner::of(&Target::parse(target).unwrap());
        assert_eq!(
            payload_subdir("tensile", &owner("gfx90a:xnack-")),
            Path::new("tensile/gfx90a")
        );
        assert_eq!(
            payload_subdir("tensile", &owner("gfx1250-strict")),
            Path::new("tensile/gfx1250")
        );
        let group = Owner::parse("gfx12_0").unwrap();
        assert_eq!(
            payload_subdir("aotriton", &group),
            Path::new("aotriton/gfx12_0")
        );
    }
}

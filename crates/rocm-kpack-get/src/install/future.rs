//! The prefix as a change will leave it, judged before the commit point:
//! every file the change places finds directories (or nothing) on its way
//! and nothing it may not replace at its place, and every symbolic link of
//! every installed package resolves inside the prefix, following the links
//! of the tree as it will be (a link that looks inside by its text can
//! lead out through others, and a later package can make an earlier link
//! lead out). Nothing found here can make a committed change fail.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Component, Path};

use kpack_fs::confined::{ConfinedDir, ConfinedError, EntryKind};
use kpack_repo_index::{PackageName, RelativePath};

use super::record::{InstalledFile, InstalledRecord};
use super::InstallError;

/// Links followed in one resolution before it counts as a loop (the
/// kernel's own limit).
const MAX_LINKS: usize = 40;

/// Why a link is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkProblem {
    #[error("resolves outside the prefix")]
    Outside,
    #[error("resolves through more than {MAX_LINKS} links")]
    Loop,
}

/// A change about to be committed.
#[derive(Debug)]
pub(crate) struct Change<'a> {
    root: &'a ConfinedDir,
    /// Who installed each path before the change.
    owners: BTreeMap<&'a str, &'a PackageName>,
    /// Packages whose earlier files the change may replace.
    replaced: &'a BTreeSet<PackageName>,
    /// Every file or link the change places, with its package.
    placed: BTreeMap<&'a str, (&'a PackageName, &'a InstalledFile)>,
    /// Directories the placed files need.
    dirs: BTreeSet<&'a str>,
    /// Files of replaced versions that go.
    deletes: BTreeSet<&'a str>,
    /// Directories the replaced packages created.
    owned_dirs: BTreeSet<&'a str>,
    new: &'a InstalledRecord,
}

/// What a path is in the tree as the change leaves it.
enum Node {
    Dir,
    File,
    Link(String),
    Absent,
}

impl<'a> Change<'a> {
    /// The change that puts the files of `new`'s packages that `placer`
    /// names a package for (the one placing them) in place and removes
    /// `deletes` from the prefix at `root`.
    pub(crate) fn new(
        root: &'a ConfinedDir,
        old: &'a InstalledRecord,
        new: &'a InstalledRecord,
        placer: impl Fn(&RelativePath) -> Option<&'a PackageName>,
        deletes: &'a [RelativePath],
        replaced: &'a BTreeSet<PackageName>,
    ) -> Change<'a> {
        let owners = old
            .packages
            .iter()
            .flat_map(|(name, package)| package.files.iter().map(move |f| (f.path.as_str(), name)))
            .collect();
        let placed: BTreeMap<&str, (&PackageName, &InstalledFile)> = new
            .packages
            .iter()
            .flat_map(|(name, package)| package.files.iter().map(move |f| (name, f)))
            .filter(|(name, file)| placer(&file.path) == Some(*name))
            .map(|(name, file)| (file.path.as_str(), (name, file)))
            .collect();
        let owned_dirs = old
            .packages
            .iter()
            .filter(|(name, _)| replaced.contains(*name))
            .flat_map(|(_, package)| package.dirs.iter().map(RelativePath::as_str))
            .collect();
        let dirs = placed
            .keys()
            .flat_map(|path| path.match_indices('/').map(|(at, _)| &path[..at]))
            .collect();
        Change {
            root,
            owners,
            replaced,
            placed,
            dirs,
            deletes: deletes.iter().map(RelativePath::as_str).collect(),
            owned_dirs,
            new,
        }
    }

    /// Every conflict and every link leading out, as an error; else the
    /// directories the change turns into files or links (emptied by its
    /// deletes), deepest first, for the journal to remove before its moves.
    pub(crate) fn check(&self) -> Result<Vec<RelativePath>, InstallError> {
        let mut cleared = Vec::new();
        for (package, file) in self.placed.values() {
            cleared.extend(self.check_place(&file.path, package)?);
        }
        for (name, package) in &self.new.packages {
            for file in &package.files {
                if let Some(target) = &file.link {
                    self.check_link(name, &file.path, target)?;
                }
            }
        }
        cleared.sort_by_key(|dir| std::cmp::Reverse(dir.parents().len()));
        Ok(cleared)
    }

    /// The directories on the way to `path` and what is at it now; the
    /// directories to remove first when a directory is there.
    fn check_place(
        &self,
        path: &RelativePath,
        package: &PackageName,
    ) -> Result<Vec<RelativePath>, InstallError> {
        let conflict =
            |dir: RelativePath, owner: Option<&PackageName>| InstallError::NotADirectory {
                path: dir,
                needed_by: path.clone(),
                package: package.clone(),
                owner: owner.cloned(),
            };
        for dir in path.parents() {
            if let Some((owner, _)) = self.placed.get(dir.as_str()) {
                return Err(conflict(dir, Some(owner)));
            }
            match self.entry(dir.as_str())? {
                Some(EntryKind::Dir) => {}
                // Made by the change, and so is everything below it.
                None => return Ok(Vec::new()),
                Some(_) if self.deletes.contains(dir.as_str()) => return Ok(Vec::new()),
                Some(_) => {
                    let owner = self.owners.get(dir.as_str()).copied();
                    return Err(conflict(dir, owner));
                }
            }
        }
        match self.entry(path.as_str())? {
            None => Ok(Vec::new()),
            Some(EntryKind::Dir) => {
                self.emptied(path)?
                    .ok_or_else(|| InstallError::DirectoryInTheWay {
                        path: path.clone(),
                        package: package.clone(),
                    })
            }
            Some(_) => match self.owners.get(path.as_str()) {
                Some(owner) if *owner == package || self.replaced.contains(*owner) => {
                    Ok(Vec::new())
                }
                Some(owner) => Err(InstallError::OwnedByOther {
                    path: path.clone(),
                    owner: (*owner).clone(),
                    package: package.clone(),
                }),
                None => Err(InstallError::Unowned {
                    path: path.clone(),
                    prefix: self.root.path().to_owned(),
                    package: package.clone(),
                }),
            },
        }
    }

    /// The directory `dir` and those beneath it, when the replaced packages
    /// made them all and the change deletes every file and link in them:
    /// a directory a new version makes a link (`lib/` to `lib -> lib64`)
    /// or a file. `None` when anything else is there.
    fn emptied(&self, dir: &RelativePath) -> Result<Option<Vec<RelativePath>>, InstallError> {
        let mut found = Vec::new();
        let mut pending = vec![dir.clone()];
        while let Some(dir) = pending.pop() {
            if !self.owned_dirs.contains(dir.as_str()) {
                return Ok(None);
            }
            let names = self.root.open_dir(Path::new(dir.as_str()))?.names()?;
            for name in names {
                let Some(child) = name
                    .to_str()
                    .and_then(|n| format!("{dir}/{n}").parse::<RelativePath>().ok())
                else {
                    return Ok(None);
                };
                match self.entry(child.as_str())? {
                    Some(EntryKind::Dir) => pending.push(child),
                    _ if self.deletes.contains(child.as_str()) => {}
                    _ => return Ok(None),
                }
            }
            found.push(dir);
        }
        Ok(Some(found))
    }

    /// Resolves the link at `path` to `target` through the tree as it will
    /// be; refuses it if it leads out of the prefix or loops.
    fn check_link(
        &self,
        package: &PackageName,
        path: &RelativePath,
        target: &str,
    ) -> Result<(), InstallError> {
        let refused = |problem| InstallError::LinkRefused {
            package: package.clone(),
            path: path.clone(),
            target: target.to_owned(),
            problem,
        };
        let mut at: Vec<String> = path
            .parents()
            .last()
            .map(|dir| dir.as_str().split('/').map(str::to_owned).collect())
            .unwrap_or_default();
        let mut rest: VecDeque<String> = VecDeque::new();
        push_front(&mut rest, target).ok_or_else(|| refused(LinkProblem::Outside))?;
        let mut followed = 0;
        while let Some(part) = rest.pop_front() {
            if part == ".." {
                at.pop().ok_or_else(|| refused(LinkProblem::Outside))?;
                continue;
            }
            at.push(part);
            match self.node(&at.join("/"))? {
                Node::Dir => {}
                Node::Link(next) => {
                    at.pop();
                    followed += 1;
                    if followed > MAX_LINKS {
                        return Err(refused(LinkProblem::Loop));
                    }
                    push_front(&mut rest, &next).ok_or_else(|| refused(LinkProblem::Outside))?;
                }
                // Nothing can be beneath a file today; the rest is judged by
                // its text, as a later change will judge it again.
                Node::File | Node::Absent => {
                    lexical(&mut at, rest.drain(..))
                        .ok_or_else(|| refused(LinkProblem::Outside))?;
                }
            }
        }
        Ok(())
    }

    /// What `path` is after the change.
    fn node(&self, path: &str) -> Result<Node, InstallError> {
        if let Some((_, file)) = self.placed.get(path) {
            return Ok(match &file.link {
                Some(target) => Node::Link(target.clone()),
                None => Node::File,
            });
        }
        if self.dirs.contains(path) {
            return Ok(Node::Dir);
        }
        if self.deletes.contains(path) {
            return Ok(Node::Absent);
        }
        Ok(match self.entry(path) {
            Ok(Some(EntryKind::Dir)) => Node::Dir,
            Ok(Some(EntryKind::Symlink)) => {
                let target = self.root.read_link(Path::new(path))?;
                Node::Link(target.to_string_lossy().into_owned())
            }
            Ok(Some(_)) => Node::File,
            Ok(None) => Node::Absent,
            Err(InstallError::Confined(ConfinedError::NotBeneath { .. })) => Node::Absent,
            Err(error) => return Err(error),
        })
    }

    fn entry(&self, path: &str) -> Result<Option<EntryKind>, InstallError> {
        Ok(self.root.entry(Path::new(path))?)
    }
}

/// Puts the parts of a link's `target` before `rest`; `None` for an
/// absolute target.
fn push_front(rest: &mut VecDeque<String>, target: &str) -> Option<()> {
    let path = Path::new(target);
    if path.has_root() {
        return None;
    }
    let parts: Vec<String> = path
        .components()
        .filter_map(|part| match part {
            Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
            Component::ParentDir => Some("..".to_owned()),
            _ => None,
        })
        .collect();
    for part in parts.into_iter().rev() {
        rest.push_front(part);
    }
    Some(())
}

/// Applies the rest of a path to `at` by its text; `None` if it climbs
/// above the prefix.
fn lexical(at: &mut Vec<String>, rest: impl Iterator<Item = String>) -> Option<()> {
    for part in rest {
        if part == ".." {
            at.pop()?;
        } else {
            at.push(part);
        }
    }
    Some(())
}

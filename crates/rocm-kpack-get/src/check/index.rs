//! The repository index entries of a prefix's installed versions, read
//! offline from what `update` and `install` keep (the verified roots in
//! the state directory, the shards in the download cache), as `install
//! --dry-run --offline` reads them: a check never touches the network,
//! and a package whose entry is not kept is checked by its record alone.

use std::collections::BTreeMap;

use kpack_repo_index::fetch::{Cache, Client, ClientOptions};
use kpack_repo_index::{Families, PackageName, VersionEntry};

use crate::config::RepoConfig;
use crate::install::record::InstalledRecord;
use crate::repo::{RepoStore, Trust};

/// One installed version as its repository publishes it.
#[derive(Debug, Clone)]
pub struct Indexed {
    pub entry: VersionEntry,
    /// The repository's families, with its overrides.
    pub families: Families,
}

/// The index entries found, by package.
#[derive(Debug, Clone, Default)]
pub struct Published {
    versions: BTreeMap<PackageName, Indexed>,
}

/// Where the kept index is.
#[derive(Debug, Clone, Copy)]
pub struct KeptIndex<'a> {
    pub repos: &'a [RepoConfig],
    pub store: &'a RepoStore,
    pub cache: &'a Cache,
    pub trust: Trust,
}

impl Published {
    /// The entry of `name`'s installed version, if it was found.
    pub fn get(&self, name: &PackageName) -> Option<&Indexed> {
        self.versions.get(name)
    }

    /// The kept index entries of `record`'s installed versions, each from
    /// the repository that installed it; notes say what was not found.
    pub fn kept(kept: KeptIndex<'_>, record: &InstalledRecord) -> (Published, Vec<String>) {
        let mut published = Published::default();
        let mut notes = Vec::new();
        if record.packages.is_empty() {
            return (published, notes);
        }
        let options = ClientOptions {
            offline: true,
            ..ClientOptions::default()
        };
        let client = match Client::new(options) {
            Ok(client) => client,
            Err(error) => {
                notes.push(format!("the repository index is not read: {error}"));
                return (published, notes);
            }
        };
        for (name, package) in &record.packages {
            match find(kept, &client, name, &package.repo, &package.version) {
                Ok(indexed) => {
                    published.versions.insert(name.clone(), indexed);
                }
                Err(why) => notes.push(format!(
                    "{name} {} is checked without its repository's index ({why})",
                    package.version
                )),
            }
        }
        (published, notes)
    }
}

/// `name` at `version` in the kept index of the repository named `repo`;
/// why not, when it is not there.
fn find(
    kept: KeptIndex<'_>,
    client: &Client,
    name: &PackageName,
    repo: &str,
    version: &semver::Version,
) -> Result<Indexed, String> {
    let config = kept
        .repos
        .iter()
        .find(|config| config.name == repo)
        .ok_or_else(|| format!("no repository {repo} is configured"))?;
    let mut warnings = Vec::new();
    let loaded = kept
        .store
        .load(config, kept.trust, &mut warnings)
        .map_err(|error| error.to_string())?
        .ok_or_else(|| format!("{repo} was never fetched; `kpack-get update` fetches it"))?;
    let shard = loaded
        .shard(client, kept.cache, name)
        .map_err(|error| error.to_string())?
        .ok_or_else(|| format!("{repo} no longer lists it"))?;
    let entry = shard
        .versions
        .into_iter()
        .find(|entry| &entry.version == version)
        .ok_or_else(|| format!("{repo} no longer lists version {version}"))?;
    Ok(Indexed {
        entry,
        families: loaded.families,
    })
}

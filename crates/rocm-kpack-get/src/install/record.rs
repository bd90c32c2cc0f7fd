//! `.kpack/installed.toml`: every installed package, the artifacts it came
//! from and every file it put in the prefix with its hash, so `verify` can
//! check them and `remove` can take exactly them away.

use std::collections::BTreeMap;
use std::path::Path;

use kpack_gpu::Target;
use kpack_repo_index::{Artifact, Component, Listed, PackageName, RelativePath, Sha256};
use serde::{Deserialize, Serialize};

use super::InstallError;
use crate::layout::Layout;

/// The record's format version; a newer one is refused, not misread.
pub(crate) const RECORD_FORMAT: u32 = 1;

/// What is installed in a prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstalledRecord {
    pub format: u32,
    #[serde(default)]
    pub packages: BTreeMap<PackageName, InstalledPackage>,
}

/// One installed package version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstalledPackage {
    pub version: semver::Version,
    pub repo: String,
    /// The version of `repo`'s root it was installed from: roots older than
    /// what a prefix's packages came from are refused for that prefix,
    /// whatever the state directory remembers. None in records written
    /// before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_version: Option<u64>,
    /// The GPU targets its device code was chosen for.
    #[serde(default)]
    pub targets: Vec<Target>,
    /// How its device code is installed: split binaries and archives, or
    /// binaries made fat for `targets`.
    #[serde(default)]
    pub layout: Layout,
    #[serde(default)]
    pub artifacts: Vec<InstalledArtifact>,
    /// Directories the install created (removed again when empty).
    #[serde(default)]
    pub dirs: Vec<RelativePath>,
    #[serde(default)]
    pub files: Vec<InstalledFile>,
}

/// An artifact a package was installed from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstalledArtifact {
    pub path: RelativePath,
    /// The bytes installed from it (what a transport-encoded artifact
    /// decoded to; the bytes served otherwise).
    pub sha256: Sha256,
    pub size: u64,
    /// Where an archive was placed in the prefix; absent for a tree, and
    /// in records written before it was kept (the artifact's file name
    /// was the archive's then).
    #[serde(
        rename = "install-as",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub install_as: Option<RelativePath>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<Listed>>,
    /// The sub-family or family that owned it, for device code listed so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<kpack_gpu::Owner>,
    /// The component of device code it was (`kernels`, `tensile`); none
    /// for a host artifact, and in records written before components.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<Component>,
}

/// The record of an artifact installed: the shard's entry, with the
/// sha256 and size of the bytes installed (decoded, for a
/// transport-encoded one).
impl From<&Artifact> for InstalledArtifact {
    fn from(artifact: &Artifact) -> InstalledArtifact {
        let installed = artifact.installed();
        InstalledArtifact {
            path: artifact.path.clone(),
            sha256: installed.sha256,
            size: installed.size,
            install_as: artifact.install_as.clone(),
            targets: artifact.targets.clone(),
            owner: artifact.owner.clone(),
            component: artifact.component().cloned(),
        }
    }
}

/// A file or symbolic link in the prefix, by relative path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstalledFile {
    pub path: RelativePath,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<Sha256>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Set for symbolic links: where the link points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

impl InstalledRecord {
    /// The targets its packages were installed for, sorted, each once.
    pub fn targets(&self) -> Vec<Target> {
        let mut targets: Vec<Target> = self
            .packages
            .values()
            .flat_map(|p| p.targets.iter().cloned())
            .collect();
        targets.sort();
        targets.dedup();
        targets
    }

    /// The newest root version of repository `repo` that any installed
    /// package came from.
    pub fn repo_version(&self, repo: &str) -> Option<u64> {
        self.packages
            .values()
            .filter(|p| p.repo == repo)
            .filter_map(|p| p.repo_version)
            .max()
    }

    pub fn empty() -> InstalledRecord {
        InstalledRecord {
            format: RECORD_FORMAT,
            packages: BTreeMap::new(),
        }
    }

    /// Reads the record at `path`; a missing file is an empty record.
    pub fn load(path: &Path) -> Result<InstalledRecord, InstallError> {
        let text = match fs_err::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(InstalledRecord::empty())
            }
            Err(error) => return Err(InstallError::Io(error)),
        };
        InstalledRecord::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<InstalledRecord, InstallError> {
        let bad = |message: String| InstallError::BadRecord {
            path: path.to_owned(),
            message,
        };
        let record: InstalledRecord = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        if record.format != RECORD_FORMAT {
            return Err(bad(format!(
                "format {} is not the format {RECORD_FORMAT} this program writes",
                record.format
            )));
        }
        Ok(record)
    }

    pub fn to_toml(&self) -> Result<String, InstallError> {
        toml::to_string(self).map_err(|e| InstallError::BadRecord {
            path: "installed.toml".into(),
            message: e.to_string(),
        })
    }

    /// The package that installed `path`, if any.
    pub fn owner(&self, path: &RelativePath) -> Option<&PackageName> {
        self.packages
            .iter()
            .find(|(_, package)| package.files.iter().any(|f| &f.path == path))
            .map(|(name, _)| name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_a_newer_format() {
        let mut record = InstalledRecord::empty();
        let path = |text: &str| text.parse::<RelativePath>().unwrap();
        let name = "rocm-rand".parse::<PackageName>().unwrap();
        record.packages.insert(
            name.clone(),
            InstalledPackage {
                version: "5.3.3".parse().unwrap(),
                repo: "rocm".into(),
                repo_version: Some(7),
                targets: vec![Target::parse("gfx90a:sramecc+:xnack-").unwrap()],
                layout: Layout::Fat,
                artifacts: vec![],
                dirs: vec![path("lib")],
                files: vec![
                    InstalledFile {
                        path: path("lib/librocrand.so.1.1"),
                        sha256: Some(Sha256::of(b"x")),
                        size: Some(1),
                        link: None,
                    },
                    InstalledFile {
                        path: path("lib/librocrand.so.1"),
                        sha256: None,
                        size: None,
                        link: Some("librocrand.so.1.1".into()),
                    },
                ],
            },
        );
        let text = record.to_toml().unwrap();
        assert_eq!(
            InstalledRecord::parse(Path::new("r"), &text).unwrap(),
            record
        );
        assert!(
            text.contains(r#"targets = ["gfx90a:sramecc+:xnack-"]"#),
            "{text}"
        );
        assert_eq!(record.owner(&path("lib/librocrand.so.1")), Some(&name));
        let newer = text.replace("format = 1", "format = 2");
        let err = InstalledRecord::parse(Path::new("r"), &newer).unwrap_err();
        assert!(err.to_string().contains("format 2"), "{err}");
    }

    #[test]
    fn an_artifact_keeps_its_component_and_old_records_read_without_one() {
        let old = r#"
            format = 1
            [packages.rocm-blas]
            version = "5.5.1"
            repo = "rocm"
            [[packages.rocm-blas.artifacts]]
            path = "pool/rocm-blas/5.5.1/blas_gfx1100.kpack"
            sha256 = "0000000000000000000000000000000000000000000000000000000000000001"
            size = 10
            targets = ["gfx1100"]
        "#;
        let mut record = InstalledRecord::parse(Path::new("installed.toml"), old).unwrap();
        let name: PackageName = "rocm-blas".parse().unwrap();
        let package = record.packages.get_mut(&name).unwrap();
        assert_eq!(package.artifacts[0].component, None);
        let mut tensile = package.artifacts[0].clone();
        tensile.path = "pool/rocm-blas/5.5.1/tensile-gfx1100.tar.zst"
            .parse()
            .unwrap();
        tensile.component = Some("tensile".parse().unwrap());
        package.artifacts.push(tensile);
        let text = record.to_toml().unwrap();
        assert_eq!(text.matches("component = \"tensile\"").count(), 1, "{text}");
        assert_eq!(text.matches("component").count(), 1, "{text}");
        assert_eq!(
            InstalledRecord::parse(Path::new("installed.toml"), &text).unwrap(),
            record
        );
    }

    #[test]
    fn a_record_naming_a_file_outside_the_prefix_is_refused() {
        let text = r#"
            format = 1
            [packages.rocm-rand]
            version = "5.3.3"
            repo = "rocm"
            files = [{ path = "../../etc/passwd", size = 1 }]
        "#;
        let err = InstalledRecord::parse(Path::new("installed.toml"), text).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("installed.toml") && message.contains("../../etc/passwd"),
            "{message}"
        );
    }
}

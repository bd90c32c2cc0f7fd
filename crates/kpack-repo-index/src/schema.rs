//! The repository's documents (04-repo-index.md): the signed root index
//! and the per-package shards. Serde types only, plus parsing that names
//! the file and key on error and a stable serialisation (the same state
//! always writes the same bytes).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::types::{
    Component, Dependency, Encoding, Listed, PackageName, RelativePath, Sha256, Timestamp,
};

/// The index format this crate reads and writes.
pub const FORMAT: u32 = 1;

/// The version of this build's tools: a shard entry that states a newer
/// `requires-client` uses something this build does not understand.
pub const CLIENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The first client that understands artifacts owned by a sub-family or
/// family (`owner`); a version using them states it as `requires-client`.
pub const OWNER_CLIENT: semver::Version = semver::Version::new(0, 2, 0);

/// The first client that decodes transport-encoded artifacts
/// (`encoding`); a version using them states it as `requires-client`, so
/// that older clients, which would install the encoded bytes, refuse it.
pub const ENCODING_CLIENT: semver::Version = semver::Version::new(0, 3, 0);

/// How far into an unverified root its version is looked for: the
/// `[repo]` table comes right after `format` in every root written.
pub const PEEK_BYTES: usize = 4096;

/// `index.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootIndex {
    pub format: u32,
    pub repo: RepoInfo,
    /// Families this repository adds to or overrides in the built-in table.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub families: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub packages: BTreeMap<PackageName, PackageEntry>,
}

/// The `[repo]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoInfo {
    /// Identifies the repository; clients keep their state per name.
    pub name: PackageName,
    /// Strictly increases with every publish.
    pub version: u64,
    pub generated: Timestamp,
    pub expires: Timestamp,
}

/// One `[packages.<name>]` entry: where its shard is and its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageEntry {
    /// Where the shard is, when not at its usual place
    /// (`packages/<name>/<sha256>.toml`, see [`PackageEntry::shard_path`]);
    /// left out of the file then, which keeps the root of a large
    /// repository small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<RelativePath>,
    pub sha256: Sha256,
    /// The shard's size in bytes, so a client reads no more of it than
    /// this; absent in roots published before it was written, whose shards
    /// a client reads up to its index cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    pub latest: semver::Version,
    #[serde(default)]
    pub summary: String,
    /// The distribution packages its versions were built from
    /// (`librocrand1`), so a client can answer a user who types one of
    /// them; absent in roots written before it was recorded.
    #[serde(rename = "built-from", default, skip_serializing_if = "Vec::is_empty")]
    pub built_from: Vec<String>,
}

/// `packages/<name>/<sha256>.toml`: every version of one package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub name: PackageName,
    #[serde(default)]
    pub versions: Vec<VersionEntry>,
}

/// One `[[versions]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionEntry {
    pub version: semver::Version,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends: Vec<Dependency>,
    /// What the version needs from the system, outside the repository
    /// (`libc6 (>= 2.38)`, as its distribution states it): shown, never
    /// installed.
    #[serde(
        rename = "system-requires",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub system_requires: Vec<String>,
    /// The oldest client that can install this version (it uses a field
    /// older clients would misread, such as `owner`); absent when any can.
    #[serde(
        rename = "requires-client",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub requires_client: Option<semver::Version>,
    #[serde(default)]
    pub artifacts: Vec<Artifact>,
    /// The fat packages this version was built from, what a user would
    /// otherwise have downloaded; absent where unknown (04, "What a
    /// version was built from").
    #[serde(rename = "built-from", default, skip_serializing_if = "Vec::is_empty")]
    pub built_from: Vec<BuiltFrom>,
}

/// One fat package a version was built from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuiltFrom {
    pub kind: SourceKind,
    /// Its file name (`librocrand1_5.3.3-4_amd64.deb`), without a directory.
    pub file: String,
    /// Its size in bytes, as it is downloaded.
    pub size: u64,
    /// The distribution's name for it (`librocrand1`), where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
}

/// What kind of fat package a version was built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// A Debian package (`.deb`).
    Deb,
    /// A Python wheel holding every target's code.
    Wheel,
    /// A compressed fat install tree.
    Tree,
}

impl SourceKind {
    /// The kind a file's name says: `.deb`, `.whl`, else a tree.
    pub fn of_file(name: &str) -> SourceKind {
        if name.ends_with(".deb") {
            SourceKind::Deb
        } else if name.ends_with(".whl") {
            SourceKind::Wheel
        } else {
            SourceKind::Tree
        }
    }
}

/// What an artifact is and how it is installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArtifactKind {
    /// A zstd-compressed tar of relative paths, extracted into the prefix.
    Tree,
    /// A kpack archive, installed under `install-as`.
    Kpack,
}

/// One `[[versions.artifacts]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    pub kind: ArtifactKind,
    /// The component of device code this is (see [`Artifact::component`]);
    /// left out of the file for the default, `kernels`, so indexes written
    /// before components existed keep their bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<Component>,
    pub path: RelativePath,
    #[serde(
        rename = "install-as",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub install_as: Option<RelativePath>,
    /// Device code for these targets (targets, family names or generic
    /// targets); none means needed on every machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<Listed>>,
    /// Device code every GPU of this sub-family or family needs, in place
    /// of `targets` (07-gpu-targets.md, "Packaging levels"): installed once
    /// when any GPU is a member. A processor's payload lists targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<kpack_gpu::Owner>,
    pub sha256: Sha256,
    pub size: u64,
    /// How the file served is encoded for the download: then `sha256` and
    /// `size` pin the bytes served, and `decoded-sha256` and
    /// `decoded-size` what is installed (see [`Artifact::transport`]).
    /// Absent for a file served as it is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Encoding>,
    #[serde(
        rename = "decoded-sha256",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub decoded_sha256: Option<Sha256>,
    #[serde(
        rename = "decoded-size",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub decoded_size: Option<u64>,
    /// For a tree: the length of its decompressed tar stream, which bounds
    /// what extracting it writes (and, at 512 bytes a header at least, how
    /// many entries it has). For a kpack archive: what its code objects
    /// decode to, the sum of its TOC entries' `original_size` (entries
    /// sharing a stored code object counted each), which bounds what
    /// materializing takes from it. See [`Artifact::unpack_limit`]; absent
    /// from shards written before it existed.
    #[serde(
        rename = "unpacked-size",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub unpacked_size: Option<u64>,
}

/// A file as the index pins it: its sha256 and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pin {
    pub sha256: Sha256,
    pub size: u64,
}

/// How a transport-encoded artifact is decoded, and what it decodes to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Transport {
    pub encoding: Encoding,
    pub decoded: Pin,
}

/// How many times its compressed size a tree that does not declare its
/// unpacked size may unpack to. Real trees stay far below: kernel database
/// payloads, the most compressible, unpack about 33 times (Debian's rocBLAS
/// Tensile files, 1.7 GB in 51 MB with long-distance matching), host
/// trees of libraries a few times. A bomb reaches thousands (a 657 KiB tree
/// unpacking to 20 GiB is 32,000 times).
pub const DEFAULT_UNPACK_RATIO: u64 = 256;

/// The least a tree that does not declare its unpacked size may unpack to
/// whatever its compressed size: a small tree of tiny files is mostly tar
/// headers and padding, which compress beyond any ratio, and this much
/// disk is harmless.
pub const MIN_UNPACK_LIMIT: u64 = 64 << 20;

impl PackageEntry {
    /// The shard's path: as given, or `packages/<name>/<sha256>.toml`.
    pub fn shard_path(&self, name: &PackageName) -> RelativePath {
        match &self.shard {
            Some(path) => path.clone(),
            None => crate::types::usual_shard(name, &self.sha256),
        }
    }
}

impl VersionEntry {
    /// The targets and families its device artifacts list, sorted, each
    /// once: what the version offers GPUs, for messages.
    pub fn offered(&self) -> Vec<Listed> {
        let mut offered: Vec<Listed> = self
            .artifacts
            .iter()
            .filter_map(|a| a.targets.clone())
            .flatten()
            .collect();
        offered.sort();
        offered.dedup();
        offered
    }
}

impl Artifact {
    /// Whether this is device code (it names targets or an owner).
    pub fn is_device(&self) -> bool {
        self.owner.is_some() || self.targets.as_ref().is_some_and(|t| !t.is_empty())
    }

    /// The file served, as the index pins it.
    pub fn served(&self) -> Pin {
        Pin {
            sha256: self.sha256,
            size: self.size,
        }
    }

    /// The file installed (and cached): what a transport-encoded artifact
    /// decodes to, otherwise the file served.
    pub fn installed(&self) -> Pin {
        self.transport()
            .map_or_else(|| self.served(), |transport| transport.decoded)
    }

    /// How the file served is decoded, when it is transport-encoded.
    /// [`Shard::parse`] has checked that an encoding comes with both
    /// decoded pins.
    pub fn transport(&self) -> Option<Transport> {
        match (&self.encoding, self.decoded_sha256, self.decoded_size) {
            (Some(encoding), Some(sha256), Some(size)) => Some(Transport {
                encoding: encoding.clone(),
                decoded: Pin { sha256, size },
            }),
            _ => None,
        }
    }

    /// The most bytes extracting this tree may read from its decompressed
    /// tar stream, or this archive's code objects may decode to: its
    /// declared `unpacked-size`, or for a shard written before that
    /// existed, [`DEFAULT_UNPACK_RATIO`] times its compressed size and at
    /// least [`MIN_UNPACK_LIMIT`]. An installer stops and refuses a tree
    /// past it, and an archive whose TOC lists more, before a
    /// decompression bomb fills the disk.
    pub fn unpack_limit(&self) -> u64 {
        self.unpacked_size.unwrap_or_else(|| {
            self.size
                .saturating_mul(DEFAULT_UNPACK_RATIO)
                .max(MIN_UNPACK_LIMIT)
        })
    }

    /// The component of device code this artifact is: as the index names
    /// it, `kernels` when it names none; none for a host artifact.
    pub fn component(&self) -> Option<&Component> {
        self.is_device()
            .then(|| self.component.as_ref().unwrap_or(&Component::KERNELS))
    }
}

/// A document that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// toml's message names the key and the line.
    #[error("{file}: {}", source.to_string().trim_end())]
    Parse {
        file: String,
        #[source]
        source: toml::de::Error,
    },
    #[error(
        "{file}: format {found} is newer than this program understands (it reads format {FORMAT})"
    )]
    UnsupportedFormat { file: String, found: u32 },
    #[error("{file}: {key}: {problem}")]
    Invalid {
        file: String,
        key: String,
        #[source]
        problem: Invalid,
    },
    #[error("{file}: cannot be written as TOML")]
    Serialize {
        file: String,
        #[source]
        source: toml::ser::Error,
    },
}

/// What is wrong with a value a document holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Invalid {
    #[error("{shard} is not under {expected}")]
    ShardElsewhere {
        shard: RelativePath,
        expected: String,
    },
    #[error("expires before it was generated")]
    ExpiresBeforeGenerated,
    #[error("{0} is listed twice")]
    ListedTwice(semver::Version),
    #[error("encoding, decoded-sha256 and decoded-size come together")]
    PartialEncoding,
}

/// The canonical TOML text of an index document; an error, never an empty
/// document that would then be signed.
fn to_toml_text<T: Serialize>(file: &str, value: &T) -> Result<String, SchemaError> {
    toml::to_string(value).map_err(|source| SchemaError::Serialize {
        file: file.to_owned(),
        source,
    })
}

fn parse_toml<T: for<'de> Deserialize<'de>>(file: &str, text: &str) -> Result<T, SchemaError> {
    toml::from_str(text).map_err(|source| SchemaError::Parse {
        file: file.to_owned(),
        source,
    })
}

impl RootIndex {
    /// Parses `index.toml` (`file` names it in errors).
    pub fn parse(file: &str, text: &str) -> Result<RootIndex, SchemaError> {
        #[derive(Deserialize)]
        struct Format {
            format: u32,
        }
        let unsupported = |found: u32| SchemaError::UnsupportedFormat {
            file: file.to_owned(),
            found,
        };
        // One parse of the whole document (a large root takes tens of
        // milliseconds); only when it fails is `format` read alone, so a
        // newer format is reported as such rather than as a parse error.
        let mut root: RootIndex = match parse_toml(file, text) {
            Ok(root) => root,
            Err(error) => {
                let format: Format = parse_toml(file, text)?;
                if format.format != FORMAT {
                    return Err(unsupported(format.format));
                }
                return Err(error);
            }
        };
        if root.format != FORMAT {
            return Err(unsupported(root.format));
        }
        for (name, entry) in &mut root.packages {
            // A shard spelled out at its usual place is the same as none.
            if entry
                .shard
                .as_ref()
                .is_some_and(|shard| *shard == crate::types::usual_shard(name, &entry.sha256))
            {
                entry.shard = None;
            }
        }
        for (name, entry) in &root.packages {
            let expected = format!("packages/{name}/");
            if let Some(shard) = &entry.shard {
                if !shard.as_str().starts_with(&expected) {
                    return Err(SchemaError::Invalid {
                        file: file.to_owned(),
                        key: format!("packages.{name}.shard"),
                        problem: Invalid::ShardElsewhere {
                            shard: shard.clone(),
                            expected,
                        },
                    });
                }
            }
        }
        if root.repo.expires < root.repo.generated {
            return Err(SchemaError::Invalid {
                file: file.to_owned(),
                key: "repo.expires".into(),
                problem: Invalid::ExpiresBeforeGenerated,
            });
        }
        Ok(root)
    }

    /// The canonical text: the same index always writes the same bytes.
    pub fn to_toml(&self) -> Result<String, SchemaError> {
        to_toml_text("index.toml", self)
    }

    /// The `repo.version` an unverified root claims, only to find the
    /// signature that then verifies its bytes (or does not): read from
    /// `version = N` in the `[repo]` table within the first
    /// [`PEEK_BYTES`], never by parsing bytes nothing has verified yet (a
    /// parser can be made to hold gigabytes for a root within the cap).
    pub fn peek_version(bytes: &[u8]) -> Option<u64> {
        let head = bytes.get(..PEEK_BYTES).unwrap_or(bytes);
        // Whole lines only: a cut one could read `version = 12` as 1.
        let head = if head.len() < bytes.len() {
            &head[..head.iter().rposition(|b| *b == b'\n')?]
        } else {
            head
        };
        let mut lines = head.split(|b| *b == b'\n').map(<[u8]>::trim_ascii);
        lines.find(|line| *line == b"[repo]")?;
        lines
            .take_while(|line| !line.starts_with(b"["))
            .find_map(|line| {
                let at = line.iter().position(|b| *b == b'=')?;
                let (key, value) = (line[..at].trim_ascii(), line[at + 1..].trim_ascii());
                (key == b"version").then(|| std::str::from_utf8(value).ok()?.parse().ok())?
            })
    }

    /// Where the immutable copy of root version `version` is kept (its
    /// signature beside it, `.minisig` added).
    pub fn versioned_key(version: u64) -> String {
        format!("roots/{version}.toml")
    }
}

impl Shard {
    /// Parses a shard (`file` names it in errors).
    pub fn parse(file: &str, text: &str) -> Result<Shard, SchemaError> {
        let shard: Shard = parse_toml(file, text)?;
        let mut seen = std::collections::BTreeSet::new();
        for (index, version) in shard.versions.iter().enumerate() {
            if !seen.insert(&version.version) {
                return Err(SchemaError::Invalid {
                    file: file.to_owned(),
                    key: format!("versions[{index}].version"),
                    problem: Invalid::ListedTwice(version.version.clone()),
                });
            }
            for (at, artifact) in version.artifacts.iter().enumerate() {
                let stated = [
                    artifact.encoding.is_some(),
                    artifact.decoded_sha256.is_some(),
                    artifact.decoded_size.is_some(),
                ];
                if stated.contains(&true) && stated.contains(&false) {
                    return Err(SchemaError::Invalid {
                        file: file.to_owned(),
                        key: format!("versions[{index}].artifacts[{at}]"),
                        problem: Invalid::PartialEncoding,
                    });
                }
            }
        }
        Ok(shard)
    }

    /// The canonical text.
    pub fn to_toml(&self) -> Result<String, SchemaError> {
        to_toml_text(&format!("shard of {}", self.name), self)
    }

    /// Path of the shard with these bytes for `name`.
    pub fn path_for(name: &PackageName, bytes: &[u8]) -> String {
        format!("packages/{name}/{}.toml", Sha256::of(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_peeked_from_the_repo_table_within_its_bound() {
        let root = "format = 1\n\n[repo]\nname = \"rocm\"\nversion = 42\n[packages.a]\n";
        assert_eq!(RootIndex::peek_version(root.as_bytes()), Some(42));
        let other_table = "format = 1\n[x]\nversion = 7\n[repo]\nname = \"rocm\"\n";
        assert_eq!(RootIndex::peek_version(other_table.as_bytes()), None);
        // A line cut at the bound is not read as a shorter version.
        let pad = " ".repeat(PEEK_BYTES - "[repo]\nversion = 1".len());
        let cut = format!("{pad}[repo]\nversion = 12\n");
        assert_eq!(RootIndex::peek_version(cut.as_bytes()), None);
        let far = format!("{pad}\n\n[repo]\nversion = 5\n");
        assert_eq!(RootIndex::peek_version(far.as_bytes()), None);
    }

    fn tree(size: u64, unpacked_size: Option<u64>) -> Artifact {
        let sha256 = Sha256::of(b"");
        Artifact {
            kind: ArtifactKind::Tree,
            component: None,
            path: "pool/x/1.0.0/x.tar.zst".parse().unwrap(),
            install_as: None,
            targets: None,
            owner: None,
            sha256,
            size,
            encoding: None,
            decoded_sha256: None,
            decoded_size: None,
            unpacked_size,
        }
    }

    const ENCODED: &str = r#"
name = "x"

[[versions]]
version = "1.0.0"

[[versions.artifacts]]
kind = "kpack"
path = "pool/x/1.0.0/x_gfx1100.kpack.zst"
install-as = ".kpack/x_gfx1100.kpack"
targets = ["gfx1100"]
sha256 = "1111111111111111111111111111111111111111111111111111111111111111"
size = 100
encoding = "zstd"
decoded-sha256 = "2222222222222222222222222222222222222222222222222222222222222222"
decoded-size = 300
"#;

    #[test]
    fn an_encoded_artifact_pins_what_is_served_and_what_is_installed() {
        let shard = Shard::parse("x", ENCODED).unwrap();
        let artifact = &shard.versions[0].artifacts[0];
        assert_eq!(artifact.served().size, 100);
        assert_eq!(artifact.installed().size, 300);
        let transport = artifact.transport().unwrap();
        assert_eq!(transport.encoding, Encoding::Zstd);
        assert_eq!(transport.decoded, artifact.installed());
        assert_eq!(Shard::parse("x", &shard.to_toml().unwrap()).unwrap(), shard);
        let plain = tree(10, None);
        assert_eq!(
            (plain.transport(), plain.installed()),
            (None, plain.served())
        );
    }

    #[test]
    fn an_encoding_without_its_decoded_pins_is_refused_by_key() {
        for key in ["decoded-size", "decoded-sha256", "encoding"] {
            let text: String = ENCODED
                .lines()
                .filter(|line| !line.starts_with(&format!("{key} =")))
                .map(|line| format!("{line}\n"))
                .collect();
            let error = Shard::parse("x.toml", &text).unwrap_err();
            assert_eq!(
                error.to_string(),
                "x.toml: versions[0].artifacts[0]: encoding, decoded-sha256 and decoded-size come together",
                "{key}"
            );
        }
    }

    #[test]
    fn a_declared_unpacked_size_is_the_limit_however_small() {
        assert_eq!(tree(1 << 30, Some(4096)).unpack_limit(), 4096);
        assert_eq!(tree(10, Some(1 << 40)).unpack_limit(), 1 << 40);
    }

    #[test]
    fn an_undeclared_tree_may_unpack_to_256_times_its_size_and_at_least_64_mib() {
        assert_eq!(tree(1 << 30, None).unpack_limit(), 256 << 30);
        assert_eq!(tree(51_000_000, None).unpack_limit(), 13_056_000_000);
        assert_eq!(tree(1000, None).unpack_limit(), 64 << 20);
        assert_eq!(tree(u64::MAX / 2, None).unpack_limit(), u64::MAX);
        // The bomb that was found: 657 KiB unpacking to 20 GiB.
        assert!(tree(657 << 10, None).unpack_limit() < 200 << 20);
    }

    #[test]
    fn system_requirements_are_written_only_when_present_and_read_back() {
        let mut shard = Shard {
            name: "rocm-solver".parse().unwrap(),
            versions: vec![VersionEntry {
                version: "5.5.1+deb.7".parse().unwrap(),
                depends: vec!["rocm-blas >=5.5.1".parse().unwrap()],
                system_requires: Vec::new(),
                requires_client: None,
                artifacts: vec![tree(3, Some(2048))],
                built_from: Vec::new(),
            }],
        };
        let text = shard.to_toml().unwrap();
        assert!(!text.contains("system-requires"), "{text}");
        shard.versions[0].system_requires =
            vec!["libc6 (>= 2.38)".into(), "libfmt10 (>= 10.1.1+ds1)".into()];
        let text = shard.to_toml().unwrap();
        assert!(
            text.contains(r#"system-requires = ["libc6 (>= 2.38)", "libfmt10 (>= 10.1.1+ds1)"]"#),
            "{text}"
        );
        assert_eq!(Shard::parse("shard", &text).unwrap(), shard);
    }

    #[test]
    fn unpacked_size_is_written_only_when_known_and_read_back() {
        let declared = tree(3, Some(2048));
        let shard = Shard {
            name: "x".parse().unwrap(),
            versions: vec![VersionEntry {
                version: semver::Version::new(1, 0, 0),
                depends: Vec::new(),
                system_requires: Vec::new(),
                requires_client: None,
                artifacts: vec![declared.clone(), tree(3, None)],
                built_from: Vec::new(),
            }],
        };
        let text = shard.to_toml().unwrap();
        assert_eq!(text.matches("unpacked-size = 2048\n").count(), 1, "{text}");
        assert_eq!(text.matches("unpacked-size").count(), 1, "{text}");
        let read = Shard::parse("shard", &text).unwrap();
        assert_eq!(read, shard);
    }

    #[test]
    fn an_owned_tree_and_the_client_it_requires_are_written_and_read_back() {
        let mut owned = tree(3, Some(2048));
        owned.owner = Some(kpack_gpu::Owner::parse("gfx12-0").unwrap());
        owned.component = Some("aotriton".parse().unwrap());
        let shard = Shard {
            name: "torch".parse().unwrap(),
            versions: vec![VersionEntry {
                version: semver::Version::new(2, 9, 0),
                depends: Vec::new(),
                system_requires: Vec::new(),
                requires_client: Some(OWNER_CLIENT),
                artifacts: vec![owned],
                built_from: Vec::new(),
            }],
        };
        let text = shard.to_toml().unwrap();
        assert!(text.contains("owner = \"gfx12_0\""), "{text}");
        assert!(text.contains("requires-client = \"0.2.0\""), "{text}");
        let read = Shard::parse("shard", &text).unwrap();
        assert_eq!(read, shard);
        assert!(read.versions[0].artifacts[0].is_device());
        let bad = text.replace("gfx12_0", "gfx12_9");
        assert!(Shard::parse("shard", &bad).is_err());
    }
}

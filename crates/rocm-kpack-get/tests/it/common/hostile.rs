//! What a hostile publisher (one holding the repository's key) can serve:
//! tar trees made header by header, so names and links the tar crate
//! refuses to build can be made, and shards written by hand with any
//! `install-as`, kind or size, signed into a new root.

use std::path::Path;
use std::process::Command;

use kpack_repo_index::sign::sign_root;
use kpack_sign::SecretKey;
use sha2::Digest;

pub use kpack_test_support::zero_bomb;

use super::RocrandRepo;

/// One entry of a hand-made tar.
#[derive(Debug, Clone)]
pub struct Entry {
    pub kind: tar::EntryType,
    pub name: String,
    pub link: Option<String>,
    pub data: Vec<u8>,
    pub mode: u32,
}

impl Entry {
    pub fn dir(name: &str) -> Entry {
        Entry::new(tar::EntryType::Directory, name, None, b"", 0o755)
    }

    pub fn file(name: &str, data: &[u8]) -> Entry {
        Entry::new(tar::EntryType::Regular, name, None, data, 0o644)
    }

    pub fn link(name: &str, target: &str) -> Entry {
        Entry::new(tar::EntryType::Symlink, name, Some(target), b"", 0o777)
    }

    pub fn new(
        kind: tar::EntryType,
        name: &str,
        link: Option<&str>,
        data: &[u8],
        mode: u32,
    ) -> Entry {
        Entry {
            kind,
            name: name.to_owned(),
            link: link.map(str::to_owned),
            data: data.to_vec(),
            mode,
        }
    }

    pub fn with_mode(mut self, mode: u32) -> Entry {
        self.mode = mode;
        self
    }
}

/// Appends `entry` with its header written field by field; a name or link
/// longer than a header holds goes first in a GNU long-name entry, as GNU
/// tar writes it.
pub fn raw_entry(tar: &mut tar::Builder<Vec<u8>>, entry: &Entry) {
    let mut name = entry.name.as_bytes();
    let mut link = entry.link.as_deref().unwrap_or("").as_bytes();
    if name.len() >= 100 {
        long_name(tar, tar::EntryType::GNULongName, name);
        name = &name[..99];
    }
    if link.len() >= 100 {
        long_name(tar, tar::EntryType::GNULongLink, link);
        link = &link[..99];
    }
    let mut header = tar::Header::new_gnu();
    {
        let old = header.as_old_mut();
        old.name[..name.len()].copy_from_slice(name);
        old.linkname[..link.len()].copy_from_slice(link);
    }
    header.set_entry_type(entry.kind);
    header.set_mode(entry.mode);
    header.set_size(entry.data.len() as u64);
    header.set_mtime(0);
    header.set_cksum();
    tar.append(&header, &entry.data[..]).unwrap();
}

/// A GNU `././@LongLink` entry carrying the next entry's long name or link.
fn long_name(tar: &mut tar::Builder<Vec<u8>>, kind: tar::EntryType, text: &[u8]) {
    let mut header = tar::Header::new_gnu();
    let marker = b"././@LongLink";
    header.as_old_mut().name[..marker.len()].copy_from_slice(marker);
    header.set_entry_type(kind);
    header.set_mode(0o644);
    let mut data = text.to_vec();
    data.push(0);
    header.set_size(data.len() as u64);
    header.set_mtime(0);
    header.set_cksum();
    tar.append(&header, &data[..]).unwrap();
}

/// A path `levels` deep: directories named `d`, one in the other, each
/// an entry, and a file at the bottom (`d/`, `d/d/`, ... `d/.../d/leaf`).
pub fn deep(levels: usize) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut path = String::new();
    for _ in 1..levels {
        path.push_str("d/");
        entries.push(Entry::dir(&path));
    }
    entries.push(Entry::file(&format!("{path}leaf"), b"at the bottom\n"));
    entries
}

/// A zstd-compressed tar tree of `entries`, in order.
pub fn tree(entries: &[Entry]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for entry in entries {
        raw_entry(&mut tar, entry);
    }
    zstd::encode_all(&tar.into_inner().unwrap()[..], 3).unwrap()
}

/// Publishes `name` `version` with one host tree, with the real
/// `kpack-repo add`; returns the artifact's pool path.
pub fn publish_tree(
    repo: &RocrandRepo,
    work: &Path,
    name: &str,
    version: &str,
    bytes: &[u8],
) -> String {
    let file_name = format!("{name}-{version}-host.tar.zst");
    let file = work.join(&file_name);
    fs_err::write(&file, bytes).unwrap();
    kpack_test_support::run(
        Command::new(super::kpack_repo_exe())
            .arg("add")
            .arg(&repo.dir)
            .args([name, version])
            .arg(&file)
            .arg("--key")
            .arg(&repo.secret_key),
    );
    format!("pool/{name}/{version}/{file_name}")
}

/// An artifact of a forged shard: its pool file's bytes and the shard
/// lines besides `path`, `sha256` and `size` (`kind`, `install-as`, ...).
#[derive(Debug, Clone)]
pub struct Forged {
    pub file_name: String,
    pub bytes: Vec<u8>,
    pub fields: String,
}

impl Forged {
    pub fn tree(file_name: &str, bytes: Vec<u8>) -> Forged {
        Forged {
            file_name: file_name.to_owned(),
            bytes,
            fields: "kind = \"tree\"\n".to_owned(),
        }
    }

    /// With one more shard line, such as `unpacked-size = 4096`.
    pub fn with_field(mut self, line: &str) -> Forged {
        self.fields.push_str(line);
        self.fields.push('\n');
        self
    }

    /// A `kpack` artifact for gfx90a placed at `install_as`.
    pub fn kpack(file_name: &str, bytes: Vec<u8>, install_as: &str) -> Forged {
        Forged {
            file_name: file_name.to_owned(),
            bytes,
            fields: format!(
                "kind = \"kpack\"\ninstall-as = {install_as:?}\ntargets = [\"gfx90a\"]\n"
            ),
        }
    }
}

/// Publishes `name` `version` with a shard written by hand holding
/// `artifacts` (replacing any earlier shard of `name`), and signs a new
/// root with the repository's key: what a publisher holding the key can
/// make kpack-get read.
pub fn publish_forged(repo: &RocrandRepo, name: &str, version: &str, artifacts: &[Forged]) {
    let mut shard = format!("name = {name:?}\n\n[[versions]]\nversion = {version:?}\n");
    for artifact in artifacts {
        let path = format!("pool/{name}/{version}/{}", artifact.file_name);
        let file = repo.dir.join(&path);
        fs_err::create_dir_all(file.parent().unwrap()).unwrap();
        fs_err::write(&file, &artifact.bytes).unwrap();
        shard.push_str(&format!(
            "\n[[versions.artifacts]]\n{}path = {path:?}\nsha256 = \"{:x}\"\nsize = {}\n",
            artifact.fields,
            sha2::Sha256::digest(&artifact.bytes),
            artifact.bytes.len()
        ));
    }
    publish_shards(repo, &[(name, version, shard)]);
}

/// Writes each `(name, latest version, shard text)` into the repository's
/// `packages/` and signs one new root listing them all (beside what it
/// listed before): a publisher's whole update at once.
pub fn publish_shards(repo: &RocrandRepo, shards: &[(&str, &str, String)]) {
    let index = repo.dir.join("index.toml");
    let mut root: toml::Table = fs_err::read_to_string(&index).unwrap().parse().unwrap();
    let info = root["repo"].as_table_mut().unwrap();
    let next = info["version"].as_integer().unwrap() + 1;
    info.insert("version".into(), toml::Value::Integer(next));
    let packages = root
        .entry("packages")
        .or_insert_with(|| toml::Table::new().into())
        .as_table_mut()
        .unwrap();
    for (name, version, shard) in shards {
        let shard_sha = format!("{:x}", sha2::Sha256::digest(shard.as_bytes()));
        let shard_path = repo.dir.join(format!("packages/{name}/{shard_sha}.toml"));
        fs_err::create_dir_all(shard_path.parent().unwrap()).unwrap();
        fs_err::write(&shard_path, shard).unwrap();
        let mut entry = toml::Table::new();
        entry.insert("sha256".into(), shard_sha.into());
        entry.insert("latest".into(), (*version).into());
        entry.insert("summary".into(), "".into());
        packages.insert((*name).into(), entry.into());
    }
    let text = root.to_string();
    let key = SecretKey::load(&repo.secret_key, None).unwrap();
    let signature = sign_root(&key, text.as_bytes()).unwrap();
    fs_err::write(index.with_extension("toml.minisig"), signature).unwrap();
    fs_err::write(&index, text).unwrap();
}

/// Rewrites the shard `kpack-repo` published for `name` (one version)
/// with `edit` applied to each of its artifacts, and signs a new root:
/// what a publisher holding the key can change after publishing.
pub fn edit_published(repo: &RocrandRepo, name: &str, edit: impl Fn(&mut toml::Table)) {
    let index = repo.dir.join("index.toml");
    let root: toml::Table = fs_err::read_to_string(&index).unwrap().parse().unwrap();
    let sha = root["packages"][name]["sha256"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = repo.dir.join(format!("packages/{name}/{sha}.toml"));
    let mut shard: toml::Table = fs_err::read_to_string(path).unwrap().parse().unwrap();
    let versions = shard["versions"].as_array_mut().unwrap();
    assert_eq!(versions.len(), 1, "{name}: one version");
    let version = versions[0]["version"].as_str().unwrap().to_owned();
    for artifact in versions[0]["artifacts"].as_array_mut().unwrap() {
        edit(artifact.as_table_mut().unwrap());
    }
    publish_shards(repo, &[(name, &version, shard.to_string())]);
}

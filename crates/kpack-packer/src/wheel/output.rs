//! Writing the split wheels: the host wheel (and, on request, each variant
//! wheel: the host's content plus one processor's archive) and the device
//! wheels, each uncommitted until every one is written.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use kpack_fs::AtomicFile;
use kpack_gpu::{Owner, Target};
use kpack_wheel::{DistName, Metadata, WheelFilename};
use zip::extra_fields::ExtraField;
use zip::{CompressionMethod, DateTime};

use super::binaries::SplitHost;
use super::devices::DeviceContent;
use super::error::WheelError;
use super::metadata::{device_distribution, device_metadata, device_wheel_file};
use super::reader::{Checked, InputWheel};
use super::writer::WheelWriter;
use crate::archive::WrittenArchive;
use rocm_kpack::format::KPACK_DIR;

/// What the wheel being written holds besides the input's members.
#[derive(Debug, Default)]
pub struct Additions<'a> {
    /// Its METADATA (the input's, edited or not).
    pub metadata: Vec<u8>,
    /// An archive (with its signature when there is one) put in
    /// `<top>/.kpack/` before the `.dist-info`.
    pub archive: Option<(&'a WrittenArchive, &'a str)>,
    /// Files added to the `.dist-info` (`variant.json`).
    pub dist_info: Vec<(String, Vec<u8>)>,
    /// Routed members put back (a variant wheel's own), by number.
    pub members: Vec<usize>,
}

/// The input wheel's content, split: what every host-like wheel is
/// written from.
#[derive(Debug)]
pub struct HostContent<'a> {
    pub checked: &'a [Checked],
    pub split: &'a [SplitHost],
    /// The members routed to device wheels (`Some`), by number: left out.
    pub routed: &'a [Option<Owner>],
    pub time: DateTime,
    /// Store archives as they are (they are compressed already).
    pub stored: bool,
    /// Members deflated of at least this many bytes are deflated on every
    /// core.
    pub parallel_deflate: u64,
}

impl HostContent<'_> {
    /// Writes a wheel at `path` with the input's members in order, split
    /// binaries replaced by their host-only files, `additions` added, the
    /// `.dist-info` last and RECORD made anew; uncommitted.
    pub fn write(
        &self,
        wheel: &mut InputWheel,
        path: &Path,
        additions: &Additions<'_>,
    ) -> Result<AtomicFile, WheelError> {
        let mut writer = WheelWriter::create(path, self.time, self.parallel_deflate)?;
        let record_path = wheel.dist_info_file("RECORD");
        let metadata_path = wheel.dist_info_file("METADATA");
        let dist_info_prefix = format!("{}/", wheel.dist_info);
        let hosts: BTreeMap<usize, &SplitHost> = self.split.iter().map(|s| (s.number, s)).collect();
        let (dist_info, rest): (Vec<_>, Vec<_>) = self
            .checked
            .iter()
            .enumerate()
            .partition(|(_, c)| c.member.name.starts_with(&dist_info_prefix));
        for (number, checked) in rest {
            let member = &checked.member;
            if self.routed[number].is_some() && !additions.members.contains(&number) {
                continue;
            }
            match hosts.get(&number) {
                Some(host) => {
                    write_file(&mut writer, &member.name, &host.path, member.mode, false)?
                }
                None => copy_member(&mut writer, wheel, checked)?,
            }
        }
        if let Some((archive, top)) = additions.archive {
            add_archive(&mut writer, archive, top, self.stored)?;
        }
        for (_, checked) in dist_info {
            let member = &checked.member;
            if member.name == record_path {
                continue;
            }
            if member.name == metadata_path {
                writer.write_bytes(&member.name, &additions.metadata, member.mode)?;
            } else {
                copy_member(&mut writer, wheel, checked)?;
            }
        }
        for (file, bytes) in &additions.dist_info {
            writer.write_bytes(&wheel.dist_info_file(file), bytes, 0o644)?;
        }
        writer.finish(&record_path)
    }
}

/// Writes `name` from the file at `path`, stored or deflated.
fn write_file(
    writer: &mut WheelWriter,
    name: &str,
    path: &Path,
    mode: u32,
    stored: bool,
) -> Result<(), WheelError> {
    let method = if stored {
        CompressionMethod::Stored
    } else {
        CompressionMethod::Deflated
    };
    let size = fs_err::metadata(path)?.len();
    let file = fs_err::File::open(path)?;
    writer.write_from(name, file, mode, method, size)
}

/// Adds `archive` as `<top>/.kpack/<archive name>`, with its signature
/// (`.minisig`) when it was signed.
fn add_archive(
    writer: &mut WheelWriter,
    archive: &WrittenArchive,
    top: &str,
    stored: bool,
) -> Result<(), WheelError> {
    let name = archive
        .path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy();
    let member = format!("{top}/{KPACK_DIR}/{name}");
    write_file(writer, &member, &archive.path, 0o644, stored)?;
    let mut signature = archive.path.as_os_str().to_owned();
    signature.push(".minisig");
    let signature = PathBuf::from(signature);
    if signature.exists() {
        write_file(
            writer,
            &format!("{member}.minisig"),
            &signature,
            0o644,
            false,
        )?;
    }
    Ok(())
}

/// Copies a member unchanged: as stored when it can be (deflated or
/// stored, no extra fields but zip64 sizes, which the writer makes
/// itself), decompressed and deflated again otherwise (extra timestamps
/// would otherwise survive).
fn copy_member(
    writer: &mut WheelWriter,
    wheel: &mut InputWheel,
    checked: &Checked,
) -> Result<(), WheelError> {
    let member = &checked.member;
    let raw = wheel.raw(member)?;
    let plain = matches!(
        raw.compression(),
        CompressionMethod::Stored | CompressionMethod::Deflated
    ) && raw
        .extra_data_fields()
        .all(|field| matches!(field, ExtraField::Zip64ExtendedInformation(_)));
    if plain {
        let (digest, size) = (&checked.digest, checked.size);
        return writer.copy_raw(raw, &member.name, member.mode, digest, size);
    }
    drop(raw);
    // Read again: bounded by the size checked the first time.
    let file = wheel.open_member(member)?.take(checked.size);
    let method = CompressionMethod::Deflated;
    writer.write_from(&member.name, file, member.mode, method, checked.size)
}

/// A device wheel written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceWheel {
    /// The key its name carries: a processor (`gfx942`) or a group
    /// (`gfx11`, `gfx12_0`).
    pub processor: String,
    /// Its distribution name (`<name>-device-<key>`).
    pub distribution: DistName,
    pub path: PathBuf,
    /// The targets its archive and routed code objects are for.
    pub targets: Vec<Target>,
    pub code_objects: usize,
    /// Members routed into it (code objects, their companions, kernel
    /// database files), at their paths in the input wheel.
    pub files: usize,
    pub bytes: u64,
}

/// One device wheel to write.
#[derive(Debug)]
pub struct DeviceSpec<'a> {
    pub host: &'a Metadata,
    /// The key its name carries.
    pub key: &'a str,
    pub content: &'a DeviceContent<'a>,
    pub checked: &'a [Checked],
    pub top: &'a str,
    pub time: DateTime,
    /// Store the archive as is (it is compressed already).
    pub stored: bool,
    /// Members deflated of at least this many bytes are deflated on every
    /// core.
    pub parallel_deflate: u64,
}

impl DeviceSpec<'_> {
    /// Writes `<name>_device_<key>-<version>-<tags>.whl` into `dir`,
    /// uncommitted: the archive, then the routed members as they were.
    pub fn write(
        &self,
        wheel: &mut InputWheel,
        dir: &Path,
    ) -> Result<(AtomicFile, DeviceWheel), WheelError> {
        let distribution = device_distribution(&self.host.name, self.key)?;
        let file_name = WheelFilename {
            dist: distribution.clone(),
            label: None,
            ..wheel.file_name.clone()
        };
        let path = dir.join(file_name.to_string());
        let mut writer = WheelWriter::create(&path, self.time, self.parallel_deflate)?;
        if let Some(archive) = self.content.archive {
            add_archive(&mut writer, archive, self.top, self.stored)?;
        }
        for &number in &self.content.members {
            copy_member(&mut writer, wheel, &self.checked[number])?;
        }
        let version = &self.host.version;
        let dist_info = format!("{}-{version}.dist-info", distribution.wheel_name());
        let metadata = device_metadata(self.host, &distribution, self.key);
        writer.write_bytes(&format!("{dist_info}/METADATA"), metadata.as_bytes(), 0o644)?;
        let wheel_file = device_wheel_file(&wheel.wheel);
        writer.write_bytes(&format!("{dist_info}/WHEEL"), wheel_file.as_bytes(), 0o644)?;
        let file = writer.finish(&format!("{dist_info}/RECORD"))?;
        let written = DeviceWheel {
            processor: self.key.to_owned(),
            distribution,
            path,
            targets: self.content.targets.iter().cloned().collect(),
            code_objects: self.content.code_objects,
            files: self.content.members.len(),
            bytes: 0,
        };
        Ok((file, written))
    }
}

//! Splitting a wheel (`kpack-pack wheel split`): the host wheel, under the
//! same file name, with every fat binary split and markers pointing at
//! `<top-level package>/.kpack/<group>_@GFXARCH@.kpack`, its METADATA
//! offering a `device-<processor>` extra per processor (and `device-all`);
//! and one device wheel per processor, `<name>-device-<processor>`, holding
//! that processor's archive and requiring the host at the same version.
//!
//! Wheels are read and written as streams: members are checked against
//! RECORD as they are read, ELF files spooled to a temporary directory to
//! be split, unchanged members copied as stored. The output is
//! deterministic (fixed zip timestamps, from `SOURCE_DATE_EPOCH` when
//! given) and appears only when every wheel is written: a refused input
//! leaves nothing behind.

pub mod binaries;
pub mod error;
pub mod metadata;
pub mod reader;
pub mod record;
pub mod writer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_fs::AtomicFile;
use rocm_kpack::{Compression, Target};
use zip::extra_fields::ExtraField;
use zip::{CompressionMethod, DateTime};

use crate::archive::{ArchiveSet, Grouping, WrittenArchive};
use crate::sign::Signer;
use crate::tree::KPACK_DIR;
use binaries::{find_fat, top_level_package, SplitHost, Splitter};
use kpack_wheel::{DistName, Metadata, WheelFilename};
use metadata::{device_distribution, device_metadata, device_wheel_file};
use reader::{Checked, InputWheel};
use writer::{zip_time, WheelWriter};

pub use error::WheelError;

/// How a wheel is split.
#[derive(Debug)]
pub struct WheelOptions {
    /// Archive group (`<group>_<processor>.kpack`).
    pub group: String,
    pub compression: Compression,
    /// Zip timestamps (`SOURCE_DATE_EPOCH`); `None`: 1980-01-01.
    pub source_date_epoch: Option<i64>,
    /// Signs every archive (`<archive>.minisig` beside it in its wheel).
    pub signer: Option<Signer>,
}

impl WheelOptions {
    /// Archives of group `group`, zstd level 3, 1980 timestamps, unsigned.
    pub fn new(group: &str) -> WheelOptions {
        WheelOptions {
            group: group.to_owned(),
            compression: Compression::DEFAULT,
            source_date_epoch: None,
            signer: None,
        }
    }
}

/// A device wheel written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceWheel {
    pub processor: String,
    /// Its distribution name (`<name>-device-<processor>`).
    pub distribution: DistName,
    pub path: PathBuf,
    /// The targets its archive holds code for.
    pub targets: Vec<Target>,
    pub code_objects: usize,
    pub bytes: u64,
}

/// What a wheel split did.
#[derive(Debug, Clone, Default)]
pub struct WheelReport {
    /// Files in the input wheel.
    pub members: usize,
    /// Of those, fat binaries split.
    pub binaries: usize,
    /// The host wheel; `None` when there was nothing to split (and nothing
    /// was written).
    pub host: Option<PathBuf>,
    pub bytes_in: u64,
    pub host_bytes: u64,
    pub devices: Vec<DeviceWheel>,
}

/// Splits the wheel at `input` into `output_dir` (created if needed).
pub fn split_wheel(
    input: &Path,
    output_dir: &Path,
    options: &WheelOptions,
) -> Result<WheelReport, WheelError> {
    let mut wheel = InputWheel::open(input)?;
    let host_name = metadata::parse(&wheel.metadata)?;
    let spool = tempfile::Builder::new().prefix("kpack-wheel-").tempdir()?;
    let checked = wheel.check_and_spool(spool.path())?;
    let mut report = WheelReport {
        members: wheel.members.len(),
        bytes_in: fs_err::metadata(input)?.len(),
        ..WheelReport::default()
    };
    let fat = find_fat(&checked)?;
    if fat.is_empty() {
        return Ok(report);
    }
    let top = top_level_package(&wheel.members, &fat)?;
    report.binaries = fat.len();
    let splitter = Splitter {
        members: &wheel.members,
        checked: &checked,
        top: &top,
        group: &options.group,
        spool: spool.path(),
    };
    let mut set = ArchiveSet::new(
        &spool.path().join(KPACK_DIR),
        &options.group,
        Grouping::Processor,
        options.compression,
    );
    let split = splitter.split_all(&fat, &mut set)?;
    let archives = finish_archives(set, options)?;

    let host_path = output_dir.join(input.file_name().unwrap_or_default());
    if same_file(input, &host_path) {
        return Err(WheelError::OverwritesInput { path: host_path });
    }
    let time = zip_time(options.source_date_epoch);
    let processors: Vec<String> = archives.keys().cloned().collect();
    let mut pending = vec![write_host(
        &mut wheel,
        &host_path,
        time,
        &checked,
        &split,
        &processors,
    )?];
    let mut devices = Vec::new();
    for (processor, archive) in &archives {
        let device = DeviceSpec {
            host: &host_name,
            processor,
            archive,
            top: &top,
            time,
            stored: options.compression != Compression::None,
        };
        let (file, written) = device.write(&wheel, output_dir)?;
        pending.push(file);
        devices.push(written);
    }
    for file in pending {
        file.commit().map_err(std::io::Error::from)?;
    }
    report.host_bytes = fs_err::metadata(&host_path)?.len();
    for device in &mut devices {
        device.bytes = fs_err::metadata(&device.path)?.len();
    }
    report.host = Some(host_path);
    report.devices = devices;
    Ok(report)
}

/// Finishes the per-processor archives, signed when asked; keyed by
/// processor.
fn finish_archives(
    set: ArchiveSet,
    options: &WheelOptions,
) -> Result<BTreeMap<String, WrittenArchive>, WheelError> {
    let written = set.finish().map_err(|e| WheelError::Packer(Box::new(e)))?;
    let mut archives = BTreeMap::new();
    for archive in written {
        if let Some(signer) = &options.signer {
            signer
                .sign_file(&archive.path)
                .map_err(|e| WheelError::Packer(Box::new(e)))?;
        }
        let processor = archive
            .targets
            .first()
            .map(|t| t.processor().to_owned())
            .unwrap_or_default();
        archives.insert(processor, archive);
    }
    Ok(archives)
}

/// Writes the host wheel: members in the input's order, split binaries
/// replaced by their host-only files, the `.dist-info` last with METADATA
/// offering the device extras and RECORD made anew.
fn write_host(
    wheel: &mut InputWheel,
    path: &Path,
    time: DateTime,
    checked: &[Checked],
    split: &[SplitHost],
    processors: &[String],
) -> Result<AtomicFile, WheelError> {
    let mut writer = WheelWriter::create(path, time)?;
    let record_path = wheel.dist_info_file("RECORD");
    let metadata_path = wheel.dist_info_file("METADATA");
    let dist_info_prefix = format!("{}/", wheel.dist_info);
    let hosts: BTreeMap<usize, &SplitHost> = split.iter().map(|s| (s.number, s)).collect();
    let members = wheel.members.clone();
    let (dist_info, rest): (Vec<_>, Vec<_>) = members
        .iter()
        .enumerate()
        .partition(|(_, m)| m.name.starts_with(&dist_info_prefix));
    for (number, member) in rest.into_iter().chain(dist_info) {
        if member.name == record_path {
            continue;
        }
        if member.name == metadata_path {
            let edited = metadata::with_device_extras(&wheel.metadata, processors)?;
            writer.write_bytes(&member.name, &edited, member.mode)?;
        } else if let Some(host) = hosts.get(&number) {
            let file = fs_err::File::open(&host.path)?;
            writer.write_from(
                &member.name,
                file,
                member.mode,
                CompressionMethod::Deflated,
                host.size,
            )?;
        } else {
            copy_member(&mut writer, wheel, member, &checked[number])?;
        }
    }
    writer.finish(&record_path)
}

/// Copies a member unchanged: as stored when it can be (deflated or
/// stored, no extra fields such as timestamps), decompressed and deflated
/// again otherwise.
fn copy_member(
    writer: &mut WheelWriter,
    wheel: &mut InputWheel,
    member: &reader::Member,
    checked: &Checked,
) -> Result<(), WheelError> {
    let raw = wheel.raw(member)?;
    let plain = matches!(
        raw.compression(),
        CompressionMethod::Stored | CompressionMethod::Deflated
    ) && raw
        .extra_data_fields()
        .all(|field| matches!(field, ExtraField::Zip64ExtendedInformation(_)));
    if plain {
        return writer.copy_raw(
            raw,
            &member.name,
            member.mode,
            &checked.digest,
            checked.size,
        );
    }
    drop(raw);
    let file = wheel.open_member(member)?;
    writer.write_from(
        &member.name,
        file,
        member.mode,
        CompressionMethod::Deflated,
        checked.size,
    )
}

/// One device wheel to write.
struct DeviceSpec<'a> {
    host: &'a Metadata,
    processor: &'a str,
    archive: &'a WrittenArchive,
    top: &'a str,
    time: DateTime,
    /// Store the archive as is (it is compressed already).
    stored: bool,
}

impl DeviceSpec<'_> {
    /// Writes `<name>_device_<processor>-<version>-<tags>.whl` into `dir`,
    /// uncommitted.
    fn write(
        &self,
        wheel: &InputWheel,
        dir: &Path,
    ) -> Result<(AtomicFile, DeviceWheel), WheelError> {
        let distribution = device_distribution(&self.host.name, self.processor)?;
        let file_name = WheelFilename {
            dist: distribution.clone(),
            label: None,
            ..wheel.file_name.clone()
        };
        let path = dir.join(file_name.to_string());
        let mut writer = WheelWriter::create(&path, self.time)?;
        let archive_name = self.archive.path.file_name().unwrap_or_default();
        let member = format!(
            "{}/{KPACK_DIR}/{}",
            self.top,
            archive_name.to_string_lossy()
        );
        let method = if self.stored {
            CompressionMethod::Stored
        } else {
            CompressionMethod::Deflated
        };
        let size = fs_err::metadata(&self.archive.path)?.len();
        let file = fs_err::File::open(&self.archive.path)?;
        writer.write_from(&member, file, 0o644, method, size)?;
        let mut signature = self.archive.path.as_os_str().to_owned();
        signature.push(".minisig");
        let signature = PathBuf::from(signature);
        if signature.exists() {
            let bytes = fs_err::read(&signature)?;
            writer.write_bytes(&format!("{member}.minisig"), &bytes, 0o644)?;
        }
        let dist_info = format!(
            "{}-{}.dist-info",
            distribution.wheel_name(),
            self.host.version
        );
        let metadata = device_metadata(self.host, &distribution, self.processor);
        writer.write_bytes(&format!("{dist_info}/METADATA"), metadata.as_bytes(), 0o644)?;
        let wheel_file = device_wheel_file(&wheel.wheel);
        writer.write_bytes(&format!("{dist_info}/WHEEL"), wheel_file.as_bytes(), 0o644)?;
        let file = writer.finish(&format!("{dist_info}/RECORD"))?;
        Ok((
            file,
            DeviceWheel {
                processor: self.processor.to_owned(),
                distribution,
                path,
                targets: self.archive.targets.clone(),
                code_objects: self.archive.code_objects,
                bytes: 0,
            },
        ))
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs_err::canonicalize(a), fs_err::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

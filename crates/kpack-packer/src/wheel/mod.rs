//! Splitting a wheel (`kpack-pack wheel split`): the host wheel, under the
//! same file name, with every fat binary split and markers pointing at
//! `<top-level package>/.kpack/<group>_@GFXARCH@.kpack`, its METADATA
//! offering a `device-<processor>` extra per processor (and `device-all`);
//! and one device wheel per processor, `<name>-device-<processor>`, holding
//! that processor's archive and requiring the host at the same version.
//! On request, PEP 825 variant wheels too ([`variants`]).
//!
//! Wheels are read and written as streams: members are checked against
//! RECORD as they are read (a stale, hashless or incomplete RECORD, which
//! pip accepts, is noted; every wheel written gets a RECORD of its own), ELF files spooled to a temporary directory and
//! split a batch at a time, unchanged members copied as stored, large
//! members (the host-only files) deflated in blocks on every core
//! ([`deflate`]). The output is deterministic (fixed zip timestamps, from
//! `SOURCE_DATE_EPOCH` when given; the same bytes whatever the thread
//! count) and appears only when every wheel is written: a refused input
//! leaves nothing behind.

pub mod binaries;
pub mod deflate;
pub mod devices;
pub mod error;
pub mod local_headers;
pub mod metadata;
pub mod output;
pub mod reader;
pub mod record;
pub mod variants;
pub mod writer;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kpack_fs::AtomicFile;
use kpack_wheel::Metadata;
use rocm_kpack::Compression;

use crate::archive::{ArchiveSet, Grouping, WrittenArchive};
use crate::pipeline::MemoryBudget;
use binaries::{find_fat, top_level_package, DeviceCode, Splitter};
use devices::{device_contents, DeviceContent};
use kpack_binary::code_object::Embedded;
use kpack_binary::databases::Recognisers;
use kpack_gpu::{Level, Target};
use kpack_sign::SecretKey;
use output::{Additions, DeviceSpec, HostContent};
use reader::InputWheel;
use rocm_kpack::format::KPACK_DIR;
use writer::zip_time;

pub use error::RecordProblem;
pub use error::WheelError;
pub use output::DeviceWheel;
pub use reader::RecordNote;

/// How a wheel is split.
#[derive(Debug)]
pub struct WheelOptions {
    /// Archive group (`<group>_<processor>.kpack`).
    pub group: String,
    pub compression: Compression,
    /// Zip timestamps (`SOURCE_DATE_EPOCH`); `None`: 1980-01-01.
    pub source_date_epoch: Option<i64>,
    /// Signs every archive (`<archive>.minisig` beside it in its wheel).
    pub signer: Option<SecretKey>,
    /// Also write a PEP 825 variant wheel per processor and the release's
    /// `{name}-{version}-variants.json`.
    pub variants: bool,
    /// The memory the code objects in flight may use.
    pub budget: MemoryBudget,
    /// Members deflated of at least this many bytes (the split binaries'
    /// host-only files, mostly) are deflated in blocks on every core;
    /// `u64::MAX` deflates each member as one stream on one core.
    pub parallel_deflate: u64,
    /// Refuse a wheel whose RECORD is missing a member's row, hashless or
    /// stale (pip installs such wheels; by default each is noted).
    pub strict_record: bool,
}

impl WheelOptions {
    /// Archives of group `group`, zstd level 3, 1980 timestamps, unsigned,
    /// no variant wheels, members from [`deflate::PARALLEL_THRESHOLD`]
    /// bytes deflated on every core.
    pub fn new(group: &str) -> WheelOptions {
        WheelOptions {
            group: group.to_owned(),
            compression: Compression::DEFAULT,
            source_date_epoch: None,
            signer: None,
            variants: false,
            budget: MemoryBudget::DEFAULT,
            parallel_deflate: deflate::PARALLEL_THRESHOLD,
            strict_record: false,
        }
    }
}

/// What a wheel split did.
#[derive(Debug, Clone, Default)]
pub struct WheelReport {
    /// Files in the input wheel.
    pub members: usize,
    /// Of those, fat binaries split.
    pub binaries: usize,
    /// Of those, members routed whole to device wheels (code objects and
    /// their companions, kernel database files).
    pub routed: usize,
    /// The host wheel; `None` when there was nothing to split (and nothing
    /// was written).
    pub host: Option<PathBuf>,
    pub bytes_in: u64,
    pub host_bytes: u64,
    /// Members whose Authenticode signature the split removed (it no
    /// longer held).
    pub unsigned: Vec<String>,
    pub devices: Vec<DeviceWheel>,
    /// The variant wheels, with `--variants`.
    pub variants: Vec<PathBuf>,
    /// `{name}-{version}-variants.json`, with `--variants`.
    pub variants_index: Option<PathBuf>,
    /// Members whose RECORD row was missing, hashless or stale.
    pub record_notes: Vec<RecordNote>,
    /// Members embedding code objects outside offload bundles, which they
    /// load by their own means: left in the host wheel as they are.
    pub embedded: Vec<(String, Vec<Embedded>)>,
}

/// Splits the wheel at `input` into `output_dir` (created if needed, and
/// removed again when nothing was written into it).
///
/// Members being split are spooled into a private directory inside
/// `output_dir` (where the output's disk space is, never a memory-backed
/// `/tmp`), removed at the end.
pub fn split_wheel(
    input: &Path,
    output_dir: &Path,
    options: &WheelOptions,
) -> Result<WheelReport, WheelError> {
    let mut wheel = InputWheel::open(input)?;
    let created = !output_dir.exists();
    fs_err::create_dir_all(output_dir)?;
    let result = split_open_wheel(&mut wheel, input, output_dir, options);
    let wrote = result.as_ref().is_ok_and(|report| report.host.is_some());
    if created && !wrote {
        // Only an empty directory goes: a refused or empty split wrote
        // nothing.
        let _ = fs_err::remove_dir(output_dir);
    }
    result
}

fn split_open_wheel(
    wheel: &mut InputWheel,
    input: &Path,
    output_dir: &Path,
    options: &WheelOptions,
) -> Result<WheelReport, WheelError> {
    let host_metadata = metadata::parse(&wheel.metadata)?;
    let spool = tempfile::Builder::new()
        .prefix(".kpack-wheel-")
        .tempdir_in(output_dir)?;
    let (checked, record_notes) = wheel.check_and_spool(spool.path(), options.strict_record)?;
    let mut report = WheelReport {
        members: wheel.members.len(),
        record_notes,
        bytes_in: fs_err::metadata(input)?.len(),
        ..WheelReport::default()
    };
    let routes = devices::route_members(&checked, &wheel.dist_info, &Recognisers::builtin());
    report.routed = routes.iter().filter(|r| r.is_some()).count();
    let DeviceCode { fat, embedded } = find_fat(&checked)?;
    report.embedded = embedded
        .into_iter()
        .map(|(number, sections)| (checked[number].member.name.clone(), sections))
        .collect();
    if fat.is_empty() && report.routed == 0 {
        return Ok(report);
    }
    let top = top_level_package(&checked, &fat)?;
    report.binaries = fat.len();
    let splitter = Splitter {
        checked: &checked,
        top: &top,
        group: &options.group,
        spool: spool.path(),
    };
    let mut set = ArchiveSet::scratch(
        &spool.path().join(KPACK_DIR),
        &options.group,
        Grouping::Processor,
        options.compression,
    )
    .with_budget(options.budget);
    let split = splitter.split_all(&fat, &mut set)?;
    report.unsigned = split
        .iter()
        .filter(|host| host.removed_signature)
        .map(|host| checked[host.number].member.name.clone())
        .collect();
    let archives = finish_archives(set, options)?;
    let devices = device_contents(&archives, &routes, &checked);
    let content = HostContent {
        checked: &checked,
        split: &split,
        routed: &routes,
        time: zip_time(options.source_date_epoch),
        stored: options.compression != Compression::None,
        parallel_deflate: options.parallel_deflate,
    };
    let outputs = Outputs {
        dir: output_dir,
        host: &host_metadata,
        devices: &devices,
        top: &top,
        content: &content,
    };
    let mut pending = Vec::new();
    let host = outputs.host(wheel, input, &mut pending)?;
    report.devices = outputs.devices(wheel, &mut pending)?;
    if options.variants {
        report.variants = outputs.variants(wheel, &mut pending)?;
        report.variants_index = Some(outputs.variants_index(wheel, &mut pending)?);
    }
    for file in pending {
        file.commit().map_err(std::io::Error::from)?;
    }
    report.host_bytes = fs_err::metadata(&host)?.len();
    for device in &mut report.devices {
        device.bytes = fs_err::metadata(&device.path)?.len();
    }
    report.host = Some(host);
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
            crate::sign::sign_archive(signer, &archive.path)
                .map_err(|e| WheelError::Packer(Box::new(e.into())))?;
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

/// Everything the output wheels are made from.
struct Outputs<'a> {
    dir: &'a Path,
    host: &'a Metadata,
    /// By the key their names carry.
    devices: &'a BTreeMap<String, DeviceContent<'a>>,
    top: &'a str,
    content: &'a HostContent<'a>,
}

impl Outputs<'_> {
    /// The host wheel, under the input's name, METADATA offering the
    /// device extras.
    fn host(
        &self,
        wheel: &mut InputWheel,
        input: &Path,
        pending: &mut Vec<AtomicFile>,
    ) -> Result<PathBuf, WheelError> {
        let path = self.dir.join(input.file_name().unwrap_or_default());
        if same_file(input, &path) {
            return Err(WheelError::OverwritesInput { path });
        }
        let additions = Additions {
            metadata: metadata::with_device_extras(
                &wheel.metadata,
                &devices::extras(self.devices),
            )?,
            ..Additions::default()
        };
        pending.push(self.content.write(wheel, &path, &additions)?);
        Ok(path)
    }

    /// One device wheel per processor and per group that owns routed
    /// members.
    fn devices(
        &self,
        wheel: &mut InputWheel,
        pending: &mut Vec<AtomicFile>,
    ) -> Result<Vec<DeviceWheel>, WheelError> {
        let mut devices = Vec::new();
        for (key, content) in self.devices {
            let device = DeviceSpec {
                host: self.host,
                key,
                content,
                checked: self.content.checked,
                top: self.top,
                time: self.content.time,
                stored: self.content.stored,
                parallel_deflate: self.content.parallel_deflate,
            };
            let (file, written) = device.write(wheel, self.dir)?;
            pending.push(file);
            devices.push(written);
        }
        Ok(devices)
    }

    /// The processors' device wheels, with the routed members each needs
    /// (its own and its groups'), in member order.
    fn processors(&self) -> Vec<(&str, &DeviceContent<'_>, Vec<usize>)> {
        self.devices
            .iter()
            .filter(|(_, content)| content.owner.level() == Level::Target)
            .map(|(key, content)| {
                let mut members: Vec<usize> = self
                    .devices
                    .values()
                    .filter(|other| {
                        other.owner == content.owner
                            || content.targets.iter().any(|t| other.owner.contains(t))
                    })
                    .flat_map(|other| other.members.iter().copied())
                    .collect();
                members.sort_unstable();
                members.dedup();
                (key.as_str(), content, members)
            })
            .collect()
    }

    /// One variant wheel per processor: the host's content with the
    /// original METADATA (no device extras: its code is inside), the
    /// processor's archive and routed members, and a `variant.json`.
    fn variants(
        &self,
        wheel: &mut InputWheel,
        pending: &mut Vec<AtomicFile>,
    ) -> Result<Vec<PathBuf>, WheelError> {
        let mut paths = Vec::new();
        for (processor, content, members) in self.processors() {
            let targets: Vec<Target> = content.targets.iter().cloned().collect();
            let label = variants::label(processor)?;
            let json = variants::document(&[(label.clone(), &targets)])?;
            let path = self.dir.join(variants::file_name(&wheel.file_name, label));
            let additions = Additions {
                metadata: wheel.metadata.clone(),
                archive: content.archive.map(|archive| (archive, self.top)),
                dist_info: vec![("variant.json".to_owned(), json.into_bytes())],
                members,
            };
            pending.push(self.content.write(wheel, &path, &additions)?);
            paths.push(path);
        }
        Ok(paths)
    }

    /// `{name}-{version}-variants.json`, listing every variant wheel.
    fn variants_index(
        &self,
        wheel: &InputWheel,
        pending: &mut Vec<AtomicFile>,
    ) -> Result<PathBuf, WheelError> {
        let processors = self.processors();
        let targets: Vec<Vec<Target>> = processors
            .iter()
            .map(|(_, content, _)| content.targets.iter().cloned().collect())
            .collect();
        let mut listed = Vec::new();
        for ((processor, _, _), targets) in processors.iter().zip(&targets) {
            listed.push((variants::label(processor)?, &targets[..]));
        }
        let json = variants::document(&listed)?;
        let name = variants::index_name(&wheel.file_name.dist, &wheel.file_name.version);
        let path = self.dir.join(name);
        let mut file = AtomicFile::create(&path).map_err(std::io::Error::from)?;
        std::io::Write::write_all(&mut file, json.as_bytes())?;
        pending.push(file);
        Ok(path)
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs_err::canonicalize(a), fs_err::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

//! Splitting one file: the host-only binary, written as a stream from the
//! input, plus the code objects that go into archives, read one bundle at
//! a time.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use memmap2::MmapMut;
use rocm_kpack::{BinaryKey, Marker, Target};

use crate::archive::{Entry, Unit};
use crate::error::{Error, ImageError, Result};
use kpack_binary::bundle::BundleKind;
use kpack_binary::image::{split_image, FatImage, SplitLayout, SplitPlan};

/// A fat binary ready to split: parsed from its headers (a compressed
/// bundle only as far as the headers it holds), its marker chosen.
#[derive(Debug)]
pub struct FatBinary<'a> {
    pub fat: FatImage<'a>,
    /// Its path relative to the install root: its TOC key without `#N`.
    pub key_path: String,
    /// Every target it has code for, in the order first seen.
    pub targets: Vec<Target>,
    /// The marker its wrappers will point at.
    pub marker: Vec<u8>,
}

impl<'a> FatBinary<'a> {
    /// Parses `data` if it is a fat binary (`Ok(None)` otherwise).
    /// `key_path` is the binary's path relative to the install root;
    /// `search_paths` chooses the marker's paths, relative to its
    /// directory, from the targets it has code for (family archives are
    /// named per target).
    pub fn parse(
        data: &'a [u8],
        key_path: &str,
        search_paths: impl FnOnce(&[Target]) -> Vec<String>,
    ) -> Result<Option<FatBinary<'a>>, ImageError> {
        let Some(fat) = FatImage::parse(data)? else {
            return Ok(None);
        };
        let mut targets: Vec<Target> = Vec::new();
        for info in fat.bundles().iter().flat_map(|b| &b.entries) {
            if !targets.contains(&info.target) {
                targets.push(info.target.clone());
            }
        }
        let key_path = key_path.replace('\\', "/");
        let marker = Marker {
            search_paths: search_paths(&targets),
            kernel_name: key_path.clone(),
        };
        Ok(Some(FatBinary {
            fat,
            key_path,
            targets,
            marker: marker.to_bytes(),
        }))
    }

    /// Its code objects.
    pub fn code_objects(&self) -> usize {
        self.fat.bundles().iter().map(|b| b.entries.len()).sum()
    }

    /// Its code objects as units of work for the archives, bundle by
    /// bundle: each code object of an uncompressed bundle on its own (read
    /// in place), a compressed bundle whole (decoded once, as a stream).
    pub fn units(&self) -> Vec<Unit<'a>> {
        let mut units = Vec::new();
        for (index, bundle) in self.fat.bundles().iter().enumerate() {
            let binary = BinaryKey::new(&self.key_path, index as u32);
            match bundle.kind {
                BundleKind::Uncompressed => {
                    for info in &bundle.entries {
                        let bytes = bundle.slice(info).unwrap_or_default();
                        units.push(Unit::Whole(Entry {
                            binary: binary.clone(),
                            target: info.target.clone(),
                            bytes: bytes.into(),
                            metadata: None,
                        }));
                    }
                }
                BundleKind::Compressed { .. } => units.push(Unit::Compressed {
                    binary,
                    bundle: bundle.clone(),
                }),
            }
        }
        units
    }

    /// Writes the host-only file into `output` (at `output_path`, an empty
    /// file open for reading and writing), streamed from `input`, the file
    /// `data` (what this was parsed from) maps: the kernel copies the
    /// bytes that stay, and only the records that change are written
    /// through a mapping. Returns the layout and the file's length.
    pub fn write_host(
        &self,
        data: &[u8],
        input: &File,
        output: &File,
        output_path: &Path,
    ) -> Result<(SplitLayout, u64)> {
        let split_error = |source| Error::Split {
            path: output_path.to_owned(),
            source,
        };
        let plan = SplitPlan::new(data, &self.fat, &self.marker).map_err(split_error)?;
        let written = |source: std::io::Error| {
            Error::Io(std::io::Error::new(
                source.kind(),
                format!("cannot write {}: {source}", output_path.display()),
            ))
        };
        let (mut reader, mut writer) = (input, output);
        reader.seek(SeekFrom::Start(0))?;
        plan.write_body(&mut reader, &mut writer).map_err(written)?;
        writer.flush().map_err(written)?;
        output.set_len(plan.output_len()).map_err(written)?;
        // SAFETY: the output is a file this call was given to write,
        // private to it until committed; nothing else truncates it while
        // it is mapped.
        let mut out =
            unsafe { MmapMut::map_mut(output) }.map_err(|source| kpack_binary::Error::Map {
                path: output_path.to_owned(),
                source,
            })?;
        let layout = plan.patch(&self.fat, &mut out).map_err(split_error)?;
        out.flush().map_err(written)?;
        Ok((layout, plan.output_len()))
    }

    /// Writes the host-only file to `path` atomically, with the mode of
    /// `like` (the input it is made from) under the umask, as `cp` would.
    /// Returns the layout and the file's length.
    pub fn write_host_like(
        &self,
        data: &[u8],
        input: &File,
        path: &Path,
        like: &Path,
    ) -> Result<(SplitLayout, u64)> {
        let mode = fs_err::metadata(like)?.permissions().mode();
        let out = kpack_fs::AtomicFile::with_mode(path, mode & 0o7777)?;
        let written = self.write_host(data, input, out.file(), path)?;
        out.commit()?;
        Ok(written)
    }
}

/// A fat binary split in memory: for small inputs, tests and tools.
#[derive(Debug)]
pub struct SplitBinary<'a> {
    /// The host-only file.
    pub host: Vec<u8>,
    /// Its code objects, bundle by bundle, in entry order.
    pub entries: Vec<Entry<'a>>,
    pub layout: SplitLayout,
}

/// Splits `data` in memory if it is a fat binary (`Ok(None)`
/// otherwise). `key_path` is the binary's path relative to the install
/// root (its TOC key without `#N`); `search_paths` go into its marker,
/// relative to its directory.
pub fn split_binary<'a>(
    data: &'a [u8],
    key_path: &str,
    search_paths: Vec<String>,
) -> Result<Option<SplitBinary<'a>>, ImageError> {
    let Some(binary) = FatBinary::parse(data, key_path, |_| search_paths)? else {
        return Ok(None);
    };
    let (host, layout) = split_image(data, &binary.fat, &binary.marker)?;
    let mut entries = Vec::new();
    for (index, bundle) in binary.fat.bundles().iter().enumerate() {
        let key = BinaryKey::new(&binary.key_path, index as u32);
        for code_object in bundle.code_objects()? {
            entries.push(Entry {
                binary: key.clone(),
                target: code_object.target,
                bytes: code_object.bytes,
                metadata: None,
            });
        }
    }
    Ok(Some(SplitBinary {
        host,
        entries,
        layout,
    }))
}

/// Writes `bytes` to `path` atomically, with the mode of `like` (the input
/// it was made from) under the umask, as `cp` would.
pub fn write_like(path: &Path, bytes: &[u8], like: &Path) -> Result<()> {
    let mode = fs_err::metadata(like)?.permissions().mode();
    kpack_fs::write_atomic_with_mode(path, bytes, mode)?;
    Ok(())
}

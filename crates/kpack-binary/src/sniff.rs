//! What kind of binary a file is, from its first bytes
//! ([`BinaryFormat`]) and then its headers ([`sniff`]): not a binary, a plain one, a fat one,
//! or a split one with its marker. The one reading of a split binary's
//! needs ([`split_binary`]), for the packer's `deps`, `verify` and trees
//! and kpack-get's `check` and layouts.

use std::path::Path;

use memmap2::Mmap;
use rocm_kpack::Marker;

use crate::error::{Error, Result};
use crate::format::BinaryFormat;
use crate::image::{FatImage, SplitImage};

/// What a binary is, read from its headers.
#[derive(Debug)]
pub enum Sniffed<'a> {
    /// Not a binary of a format with device code.
    NotBinary,
    /// A binary without device code.
    Plain,
    /// A fat binary: its bundles and wrappers.
    Fat(FatImage<'a>),
    /// A split binary: its marker and bundle indices.
    Split(SplitBinary),
}

/// What the binary `data` (read from `path`, which errors name) is. A
/// split binary is told apart first: a marker makes it split whatever
/// else it holds.
pub fn sniff<'a>(data: &'a [u8], path: &Path) -> Result<Sniffed<'a>> {
    if BinaryFormat::of_prefix(data).is_none() {
        return Ok(Sniffed::NotBinary);
    }
    if let Some(split) = split_binary(data, path)? {
        return Ok(Sniffed::Split(split));
    }
    match FatImage::parse(data) {
        Ok(Some(fat)) => Ok(Sniffed::Fat(fat)),
        Ok(None) => Ok(Sniffed::Plain),
        Err(source) => Err(Error::ReadFat {
            path: path.to_owned(),
            source,
        }),
    }
}

/// What a split binary says about its device code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitBinary {
    pub format: BinaryFormat,
    pub marker: Marker,
    /// Each wrapper's bundle index, in section order.
    pub bundles: Vec<u32>,
}

/// The marker and bundle indices of the binary `data` (read from `path`,
/// which errors name); `None` when it has no marker.
pub fn split_binary(data: &[u8], path: &Path) -> Result<Option<SplitBinary>> {
    let split = SplitImage::parse(data).map_err(|source| Error::ReadSplit {
        path: path.to_owned(),
        source,
    })?;
    let Some(split) = split else {
        return Ok(None);
    };
    let marker = Marker::parse(split.marker_bytes()).map_err(|source| Error::Marker {
        path: path.to_owned(),
        source: Box::new(source),
    })?;
    Ok(Some(SplitBinary {
        format: split.format(),
        marker,
        bundles: split.wrapper_bundles(),
    }))
}

/// The marker and bundle indices of the split binary at `path`; `None`
/// when it is not one (not a binary, or one without a marker). A file with
/// a marker that cannot be read is an error.
pub fn read_split_binary(path: &Path) -> Result<Option<SplitBinary>> {
    let file = fs_err::File::open(path)?;
    if BinaryFormat::of_file(file.file())?.is_none() {
        return Ok(None);
    }
    // SAFETY: read-only and private to this call; like every reader of
    // mapped files we rely on the file not being truncated meanwhile.
    let map = unsafe { Mmap::map(file.file()) }.map_err(|source| Error::Map {
        path: path.to_owned(),
        source,
    })?;
    split_binary(&map, path)
}

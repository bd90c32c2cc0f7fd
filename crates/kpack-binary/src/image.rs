//! Fat and split binaries of either container format, ELF or PE/COFF,
//! behind one face: their bundles, which bundle each wrapper registers,
//! the plan that splits them and the plan that makes them fat again. Callers that split, verify or inspect go through it
//! and never ask which format a binary is in.

use std::collections::BTreeMap;
use std::io::{self, Read, Seek, Write};

use crate::bundle::Bundle;
use crate::elf::{self, FatElf, Machine, SplitElf};
use crate::error::ImageError;
use crate::format::BinaryFormat;
use crate::pe::{self, FatPe, SplitPe};

/// A parsed fat binary.
#[derive(Debug)]
pub enum FatImage<'a> {
    Elf(FatElf<'a>),
    Pe(FatPe<'a>),
}

impl<'a> FatImage<'a> {
    /// Parses `data`: `Ok(None)` when it is not a binary with device code
    /// (nothing to split), an error when it is one that cannot be split.
    pub fn parse(data: &'a [u8]) -> Result<Option<FatImage<'a>>, ImageError> {
        Ok(match BinaryFormat::of_prefix(data) {
            Some(BinaryFormat::Elf) => FatElf::parse(data)?.map(FatImage::Elf),
            Some(BinaryFormat::Pe) => FatPe::parse(data)?.map(FatImage::Pe),
            None => None,
        })
    }

    pub fn format(&self) -> BinaryFormat {
        match self {
            FatImage::Elf(_) => BinaryFormat::Elf,
            FatImage::Pe(_) => BinaryFormat::Pe,
        }
    }

    /// Its offload bundles, in section order.
    pub fn bundles(&self) -> &[Bundle<'a>] {
        match self {
            FatImage::Elf(fat) => &fat.bundles,
            FatImage::Pe(fat) => &fat.bundles,
        }
    }

    /// The bundle each wrapper registers, in section order.
    pub fn wrapper_bundles(&self) -> Vec<usize> {
        match self {
            FatImage::Elf(fat) => fat.wrappers.iter().map(|w| w.bundle).collect(),
            FatImage::Pe(fat) => fat.wrappers.iter().map(|w| w.bundle).collect(),
        }
    }
}

/// What a split did, in either format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitLayout {
    Elf(elf::SplitLayout),
    Pe(pe::SplitLayout),
}

impl SplitLayout {
    /// File bytes removed with the device code.
    pub fn removed(&self) -> u64 {
        match self {
            SplitLayout::Elf(layout) => layout.removed,
            SplitLayout::Pe(layout) => layout.removed,
        }
    }

    /// Whether a signature that the split made invalid was removed.
    pub fn removed_signature(&self) -> bool {
        match self {
            SplitLayout::Elf(_) => false,
            SplitLayout::Pe(layout) => layout.removed_signature,
        }
    }
}

/// The split of a fat binary, planned from its headers, written as a
/// stream: [`write_body`](Self::write_body) copies the input without its
/// device code, the output is extended with zeros to
/// [`output_len`](Self::output_len), and [`patch`](Self::patch) writes the
/// records that change through a mapping of the output.
#[derive(Debug)]
pub enum SplitPlan {
    Elf(elf::SplitPlan),
    Pe(pe::SplitPlan),
}

impl SplitPlan {
    /// Plans the split of `data` (parsed as `fat`) with wrappers pointing
    /// at `marker`.
    pub fn new(data: &[u8], fat: &FatImage<'_>, marker: &[u8]) -> Result<SplitPlan, ImageError> {
        Ok(match fat {
            FatImage::Elf(fat) => SplitPlan::Elf(elf::SplitPlan::new(data, fat, marker)?),
            FatImage::Pe(fat) => SplitPlan::Pe(pe::SplitPlan::new(data, fat, marker)?),
        })
    }

    /// The host-only file's length.
    pub fn output_len(&self) -> u64 {
        match self {
            SplitPlan::Elf(plan) => plan.output_len(),
            SplitPlan::Pe(plan) => plan.output_len(),
        }
    }

    /// Writes the file's body from `input` (at its start).
    pub fn write_body<R: Read + Seek, W: Write>(
        &self,
        input: &mut R,
        out: &mut W,
    ) -> io::Result<()> {
        match self {
            SplitPlan::Elf(plan) => plan.write_body(input, out),
            SplitPlan::Pe(plan) => plan.write_body(input, out),
        }
    }

    /// Writes what changes into `out`: the body as
    /// [`write_body`](Self::write_body) left it, extended with zeros to
    /// [`output_len`](Self::output_len). `fat` must be what the plan was
    /// made from.
    pub fn patch(&self, fat: &FatImage<'_>, out: &mut [u8]) -> Result<SplitLayout, ImageError> {
        match (self, fat) {
            (SplitPlan::Elf(plan), FatImage::Elf(fat)) => {
                Ok(SplitLayout::Elf(plan.patch(fat, out)?))
            }
            (SplitPlan::Pe(plan), FatImage::Pe(fat)) => Ok(SplitLayout::Pe(plan.patch(fat, out)?)),
            _ => Err(ImageError::FormatMismatch),
        }
    }
}

/// Splits `data` (parsed as `fat`) in memory into a host-only file whose
/// wrappers point at `marker`.
pub fn split_image(
    data: &[u8],
    fat: &FatImage<'_>,
    marker: &[u8],
) -> Result<(Vec<u8>, SplitLayout), ImageError> {
    let plan = SplitPlan::new(data, fat, marker)?;
    let mut out = Vec::with_capacity(plan.output_len() as usize);
    plan.write_body(&mut io::Cursor::new(data), &mut out)
        .map_err(|e| ImageError::Truncated(e.to_string()))?;
    out.resize(plan.output_len() as usize, 0);
    let layout = plan.patch(fat, &mut out)?;
    Ok((out, layout))
}

/// A parsed split binary.
#[derive(Debug)]
pub enum SplitImage<'a> {
    Elf(SplitElf<'a>),
    Pe(SplitPe<'a>),
}

impl<'a> SplitImage<'a> {
    /// Parses `data`: `Ok(None)` when it is not a binary with a kpack
    /// marker, an error when it has one but its wrappers cannot be read.
    pub fn parse(data: &'a [u8]) -> Result<Option<SplitImage<'a>>, ImageError> {
        Ok(match BinaryFormat::of_prefix(data) {
            Some(BinaryFormat::Elf) => SplitElf::parse(data)?.map(SplitImage::Elf),
            Some(BinaryFormat::Pe) => SplitPe::parse(data)?.map(SplitImage::Pe),
            None => None,
        })
    }

    pub fn format(&self) -> BinaryFormat {
        match self {
            SplitImage::Elf(_) => BinaryFormat::Elf,
            SplitImage::Pe(_) => BinaryFormat::Pe,
        }
    }

    /// The marker's bytes.
    pub fn marker_bytes(&self) -> &'a [u8] {
        match self {
            SplitImage::Elf(split) => split.marker_bytes,
            SplitImage::Pe(split) => split.marker_bytes,
        }
    }

    /// The bundle index each wrapper stores, in section order.
    pub fn wrapper_bundles(&self) -> Vec<u32> {
        match self {
            SplitImage::Elf(split) => split.wrappers.iter().map(|w| w.bundle).collect(),
            SplitImage::Pe(split) => split.wrappers.iter().map(|w| w.bundle).collect(),
        }
    }

    /// The triple of a materialized bundle's host entry, as the toolchain
    /// that builds such binaries writes it (AMD's HIP SDK for Windows
    /// writes a Linux one, `host-x86_64-unknown-linux-gnu-`).
    pub fn host_triple(&self) -> &'static str {
        match self {
            SplitImage::Elf(split) => match split.machine {
                Machine::X86_64 => "host-x86_64-unknown-linux",
                Machine::Aarch64 => "host-aarch64-unknown-linux",
            },
            SplitImage::Pe(_) => "host-x86_64-unknown-linux-gnu-",
        }
    }
}

/// How a split binary becomes fat again, planned from its bundles'
/// lengths: written as a stream ([`write`](Self::write)), then patched in
/// place ([`patch`](Self::patch)).
#[derive(Debug)]
pub enum MaterializePlan {
    Elf(elf::MaterializePlan),
    Pe(pe::MaterializePlan),
}

impl MaterializePlan {
    /// Plans `data` (parsed as `split`) with bundle index N's bundle
    /// `bundle_lens[N]` bytes long.
    pub fn new(
        data: &[u8],
        split: &SplitImage<'_>,
        bundle_lens: &BTreeMap<u32, u64>,
    ) -> Result<MaterializePlan, ImageError> {
        Ok(match split {
            SplitImage::Elf(split) => {
                MaterializePlan::Elf(elf::MaterializePlan::new(data, split, bundle_lens)?)
            }
            SplitImage::Pe(split) => {
                MaterializePlan::Pe(pe::MaterializePlan::new(data, split, bundle_lens)?)
            }
        })
    }

    /// The fat file's length, for an input of `input_len` bytes.
    pub fn output_len(&self, input_len: u64) -> u64 {
        match self {
            MaterializePlan::Elf(plan) => plan.output_len(input_len),
            MaterializePlan::Pe(plan) => plan.output_len(),
        }
    }

    /// Writes the fat file, unpatched, from `input` (at its start), each
    /// bundle written by `bundle` (by index), exactly as long as planned.
    pub fn write<R: Read + Seek, W: Write, E: From<io::Error>>(
        &self,
        input: &mut R,
        out: &mut W,
        bundle: impl FnMut(u32, &mut dyn Write) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            MaterializePlan::Elf(plan) => plan.write(input, out, bundle),
            MaterializePlan::Pe(plan) => plan.write(input, out, bundle),
        }
    }

    /// Makes the written file (`out`, whole) fat. `split` must be what the
    /// plan was made from.
    pub fn patch(&self, out: &mut [u8], split: &SplitImage<'_>) -> Result<(), ImageError> {
        match (self, split) {
            (MaterializePlan::Elf(plan), SplitImage::Elf(split)) => Ok(plan.patch(out, split)?),
            (MaterializePlan::Pe(plan), SplitImage::Pe(split)) => Ok(plan.patch(out, split)?),
            _ => Err(ImageError::FormatMismatch),
        }
    }
}

//! Reads a fat PE image (its `.hip_fat` bundles and which wrapper of
//! `.hipFatB` owns which, found through each wrapper's relocated pointer)
//! and a split one (its `.kpackrf` marker and `HIPK` wrappers).

use object::pe::ImageSectionHeader;
use object::pod;

use super::image::{file_range, name, virtual_len, Headers, LE};
use super::relocs::BaseRelocations;
use super::{FATBIN_SECTION, MARKER_SECTION, WRAPPER_SECTION};
use crate::bundle::{bundle_starting_at, describe_starts, parse_fatbin, Bundle};
use crate::error::PeError;
use crate::wrapper::{HipWrapper, HIPF_MAGIC, HIPK_MAGIC, POINTER_OFFSET, WRAPPER_SIZE};

/// Where a section of an image is, in memory and in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeSection {
    /// Its index in the section table.
    pub index: usize,
    pub rva: u32,
    /// The bytes it occupies in memory.
    pub virtual_size: u32,
    /// Its file data: offset and size (both zero when it has none).
    pub offset: u64,
    pub size: u64,
}

impl PeSection {
    fn of(index: usize, header: &ImageSectionHeader) -> PeSection {
        let (offset, size) = file_range(header);
        PeSection {
            index,
            rva: header.virtual_address.get(LE),
            virtual_size: virtual_len(header),
            offset,
            size,
        }
    }

    /// Its contents in `data`: the file data up to its size in memory.
    fn bytes<'a>(&self, data: &'a [u8]) -> &'a [u8] {
        let len = self.size.min(u64::from(self.virtual_size));
        // Headers::read checked the file data lies inside the file.
        &data[self.offset as usize..(self.offset + len) as usize]
    }
}

/// One 24-byte wrapper in `.hipFatB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeWrapper {
    pub rva: u32,
    pub file_offset: u64,
    /// The RVA its pointer holds.
    pub target_rva: u32,
    /// Index of the bundle it points at, in section order.
    pub bundle: usize,
}

/// A parsed fat PE image.
#[derive(Debug)]
pub struct FatPe<'a> {
    pub(super) headers: Box<Headers>,
    pub fatbin: PeSection,
    pub wrapper_section: PeSection,
    pub bundles: Vec<Bundle<'a>>,
    /// Wrappers in section order.
    pub wrappers: Vec<PeWrapper>,
}

impl<'a> FatPe<'a> {
    /// Parses `data`: `Ok(None)` when it is not a PE image with a
    /// `.hip_fat` section (nothing to split), an error when it is one but
    /// cannot be split.
    pub fn parse(data: &'a [u8]) -> Result<Option<FatPe<'a>>, PeError> {
        let Some(headers) = Headers::read(data)? else {
            return Ok(None);
        };
        let Some(fatbin) = section(&headers, FATBIN_SECTION) else {
            return Ok(None);
        };
        if headers.section_named(MARKER_SECTION).is_some() {
            return Err(PeError::AlreadySplit);
        }
        if fatbin.size == 0 {
            return Err(PeError::Malformed(format!(
                "{FATBIN_SECTION} has no file data"
            )));
        }
        let bundles = parse_fatbin(fatbin.bytes(data))?;
        let (wrapper_section, records) = wrappers_of(data, &headers, FATBIN_SECTION)?;
        let relocations = BaseRelocations::read(data, &headers)?;
        let wrappers = records
            .iter()
            .enumerate()
            .map(|(index, record)| {
                let rva = wrapper_section.rva + (index as u64 * WRAPPER_SIZE) as u32;
                let bad = |message: String| PeError::BadWrapper {
                    index,
                    rva,
                    message,
                };
                match record.magic.get(LE) {
                    HIPF_MAGIC => {}
                    HIPK_MAGIC => return Err(PeError::AlreadySplit),
                    magic => return Err(bad(format!("magic {magic:#010x} is not HIPF"))),
                }
                if !relocations.covers(rva + POINTER_OFFSET as u32) {
                    return Err(bad("its pointer has no DIR64 base relocation".into()));
                }
                let target_rva = target_rva(&headers, record).map_err(bad)?;
                Ok(PeWrapper {
                    rva,
                    file_offset: wrapper_section.offset + index as u64 * WRAPPER_SIZE,
                    target_rva,
                    bundle: bundle_at(&headers, &fatbin, &bundles, target_rva).map_err(bad)?,
                })
            })
            .collect::<Result<Vec<_>, PeError>>()?;
        Ok(Some(FatPe {
            headers: Box::new(headers),
            fatbin,
            wrapper_section,
            bundles,
            wrappers,
        }))
    }

    /// The image's preferred base address.
    pub fn image_base(&self) -> u64 {
        self.headers.image_base()
    }
}

/// One wrapper of a split image: where it is and the bundle index it
/// stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitPeWrapper {
    pub rva: u32,
    pub file_offset: u64,
    pub bundle: u32,
}

/// A host-only image as a split leaves it: `HIPK` wrappers pointing at
/// the `.kpackrf` marker, a `.hip_fat` section without file data.
#[derive(Debug)]
pub struct SplitPe<'a> {
    pub(super) headers: Box<Headers>,
    pub fatbin: PeSection,
    pub marker: PeSection,
    pub marker_bytes: &'a [u8],
    pub wrapper_section: PeSection,
    /// Wrappers in section order.
    pub wrappers: Vec<SplitPeWrapper>,
}

impl<'a> SplitPe<'a> {
    /// Parses `data`: `Ok(None)` when it is not a PE image with a kpack
    /// marker (not a split image), an error when it has one but its
    /// wrappers cannot be read.
    pub fn parse(data: &'a [u8]) -> Result<Option<SplitPe<'a>>, PeError> {
        let Some(headers) = Headers::read(data)? else {
            return Ok(None);
        };
        let Some(marker) = section(&headers, MARKER_SECTION) else {
            return Ok(None);
        };
        let fatbin = section(&headers, FATBIN_SECTION).ok_or_else(|| {
            PeError::Malformed(format!("{MARKER_SECTION} without {FATBIN_SECTION}"))
        })?;
        let (wrapper_section, records) = wrappers_of(data, &headers, MARKER_SECTION)?;
        let wrappers = records
            .iter()
            .enumerate()
            .map(|(index, record)| {
                let rva = wrapper_section.rva + (index as u64 * WRAPPER_SIZE) as u32;
                if record.magic.get(LE) != HIPK_MAGIC {
                    return Err(PeError::BadWrapper {
                        index,
                        rva,
                        message: format!("magic {:#010x} is not HIPK", record.magic.get(LE)),
                    });
                }
                Ok(SplitPeWrapper {
                    rva,
                    file_offset: wrapper_section.offset + index as u64 * WRAPPER_SIZE,
                    bundle: record.bundle_index(),
                })
            })
            .collect::<Result<Vec<_>, PeError>>()?;
        // A split leaves every wrapper it found; without one there is
        // nothing to make fat again.
        if wrappers.is_empty() {
            return Err(PeError::Malformed(format!(
                "{WRAPPER_SECTION} holds no wrapper in the file"
            )));
        }
        Ok(Some(SplitPe {
            headers: Box::new(headers),
            fatbin,
            marker,
            marker_bytes: marker.bytes(data),
            wrapper_section,
            wrappers,
        }))
    }
}

/// The section called `name`, if the image has one.
fn section(headers: &Headers, name: &str) -> Option<PeSection> {
    let index = headers.section_named(name)?;
    Some(PeSection::of(index, &headers.sections[index]))
}

/// The `.hipFatB` section, which an image with `owner` (a section's name)
/// must have, and its wrapper records.
fn wrappers_of<'a>(
    data: &'a [u8],
    headers: &Headers,
    owner: &str,
) -> Result<(PeSection, &'a [HipWrapper]), PeError> {
    let section = section(headers, WRAPPER_SECTION)
        .ok_or_else(|| PeError::Malformed(format!("{owner} without {WRAPPER_SECTION}")))?;
    let bytes = section.bytes(data);
    let records = pod::slice_from_all_bytes(bytes).map_err(|()| {
        PeError::Malformed(format!(
            "{WRAPPER_SECTION} holds {} bytes, not a multiple of {WRAPPER_SIZE}",
            bytes.len()
        ))
    })?;
    Ok((section, records))
}

/// The RVA a `HIPF` wrapper's pointer holds: its value less the image
/// base, inside some section.
fn target_rva(headers: &Headers, record: &HipWrapper) -> Result<u32, String> {
    let value = record.pointer.get(LE);
    let rva = value
        .checked_sub(headers.image_base())
        .and_then(|rva| u32::try_from(rva).ok())
        .ok_or_else(|| {
            format!(
                "points at {value:#x}, outside the image (base {:#x})",
                headers.image_base()
            )
        })?;
    if headers.section_containing(rva).is_none() {
        return Err(format!("points at RVA {rva:#x}, outside every section"));
    }
    Ok(rva)
}

/// Index of the bundle starting at `rva`, by binary search.
fn bundle_at(
    headers: &Headers,
    fatbin: &PeSection,
    bundles: &[Bundle<'_>],
    rva: u32,
) -> Result<usize, String> {
    rva.checked_sub(fatbin.rva)
        .and_then(|offset| bundle_starting_at(bundles, u64::from(offset)))
        .ok_or_else(|| {
            let section = headers.section_containing(rva).map(name).unwrap_or_default();
            format!(
                "points at RVA {rva:#x} (in {section}), which is not the start of a bundle in {FATBIN_SECTION} (bundles start at {})",
                describe_starts(bundles, u64::from(fatbin.rva))
            )
        })
}

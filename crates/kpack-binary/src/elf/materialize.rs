//! Turns a host-only file back into a fat one (08-hip-runtimes.md, "A
//! materialized binary"), so that a HIP runtime without kpack support
//! registers it:
//!
//! - the new offload bundles go into the load segment that holds the
//!   marker, which the split placed past every other one in memory and
//!   last among the loaded bytes of the file: it grows by them, 4096-byte
//!   aligned in memory, and only the unloaded bytes after it (the section
//!   name table, the section headers) move down;
//! - `.hip_fatbin` becomes a loaded section again, over the new bundles;
//! - every wrapper becomes `HIPF`, points at its bundle (its relocation
//!   keeping its kind, only its addend changes) and has `reserved` 0.
//!
//! The marker's bytes stay where they are loaded, its section unnamed: a
//! kpack-aware runtime reads `HIPF` wrappers as any runtime does, and the
//! file reads as a fat one, not a split one, to every tool.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use kpack_hash::CountingWriter;
use object::elf::{PT_LOAD, SHF_ALLOC, SHT_PROGBITS};
use object::pod;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};

use super::parse::SplitElf;
use super::pointer::{write_wrapper, WrapperSite, WrapperValue};
use super::program_headers::check_program_headers;
use super::records::{has_file_data, record_mut, Ehdr, Phdr, SegmentEnds, Shdr, Tables, LE};
use crate::error::ElfError;
use crate::stream::write_zeros;
use crate::wrapper::HIPF_MAGIC;

/// Alignment of `.hip_fatbin` and of every bundle in it, as clang's HIP
/// toolchain lays them out.
pub const BUNDLE_ALIGN: u64 = 4096;

fn round_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align) * align
}

/// How a host-only file becomes fat: where the new bundles go and the
/// header tables as they will be. Planned from the bundles' lengths, so
/// the file can be written as a stream ([`MaterializePlan::write`]) and
/// then patched in place ([`MaterializePlan::patch`]).
#[derive(Debug)]
pub struct MaterializePlan {
    /// Where the marker's segment ends in the file: bytes before it are
    /// copied, bytes after it move down by `shift`.
    file_end: u64,
    shift: u64,
    fatbin: FatbinLayout,
    phoff: u64,
    shoff: u64,
    phdrs: Vec<Phdr>,
    shdrs: Vec<Shdr>,
}

impl MaterializePlan {
    /// Plans `data` (parsed as `split`) with bundle index N's bundle
    /// `bundle_lens[N]` bytes long.
    pub fn new(
        data: &[u8],
        split: &SplitElf<'_>,
        bundle_lens: &BTreeMap<u32, u64>,
    ) -> Result<MaterializePlan, ElfError> {
        let Tables {
            phoff,
            mut phdrs,
            mut shdrs,
            ..
        } = Tables::read(data)?;
        let header = Ehdr::parse(data).map_err(super::records::malformed)?;
        let shoff = header.e_shoff(LE);
        let segment = marker_segment(&phdrs, split)?;
        let (file_end, memory_end) = (phdrs[segment].file_end(), phdrs[segment].memory_end());
        if file_end > data.len() as u64 {
            return Err(ElfError::Malformed(
                "the marker's segment runs past the file".into(),
            ));
        }
        let fatbin = FatbinLayout::plan(memory_end, file_end, bundle_lens);
        // Everything unloaded after the segment moves down by whole pages, so
        // every alignment it had still holds.
        let shift = round_up(fatbin.end_offset() - file_end, BUNDLE_ALIGN);
        let grown = fatbin.end_offset() - file_end;
        let load = &mut phdrs[segment];
        load.p_filesz.set(LE, load.p_filesz(LE) + grown);
        load.p_memsz.set(LE, load.p_memsz(LE) + grown);
        move_tail(&mut shdrs, file_end, shift)?;
        fatbin.describe(&mut shdrs, split.fatbin_index)?;
        unname(&mut shdrs, split.marker.index)?;
        let moved = |offset: u64| {
            if offset >= file_end {
                offset + shift
            } else {
                offset
            }
        };
        Ok(MaterializePlan {
            file_end,
            shift,
            phoff: moved(phoff),
            shoff: moved(shoff),
            fatbin,
            phdrs,
            shdrs,
        })
    }

    /// The fat file's length, for an input of `input_len` bytes.
    pub fn output_len(&self, input_len: u64) -> u64 {
        input_len + self.shift
    }

    /// Writes the fat file, unpatched: the input's bytes up to the marker
    /// segment's end (copied from `input`, read from its start), each
    /// bundle written by `bundle` (by index) at its place, then the rest
    /// of the input moved down. Every bundle must be as long as planned.
    pub fn write<E: From<std::io::Error>>(
        &self,
        input: &mut impl Read,
        out: &mut impl Write,
        mut bundle: impl FnMut(u32, &mut dyn Write) -> Result<(), E>,
    ) -> Result<(), E> {
        let copied = std::io::copy(&mut input.take(self.file_end), out)?;
        if copied != self.file_end {
            return Err(short_input().into());
        }
        let mut at = self.file_end;
        for (&index, &(offset, len)) in &self.fatbin.bundles {
            let start = self.fatbin.offset + offset;
            write_zeros(out, start - at)?;
            // A bundle stops at its planned length.
            let mut counted = CountingWriter::with_limit(&mut *out, len);
            bundle(index, &mut counted)?;
            if counted.count() != len {
                let message = format!("bundle {index} has {} bytes, not {len}", counted.count());
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, message).into());
            }
            at = start + len;
        }
        write_zeros(out, self.file_end + self.shift - at)?;
        std::io::copy(input, out)?;
        Ok(())
    }

    /// Makes the written file (`out`, whole) fat: its header and tables,
    /// and every wrapper `HIPF` pointing at its bundle. An executable must
    /// still keep the program header rule.
    pub fn patch(&self, out: &mut [u8], split: &SplitElf<'_>) -> Result<(), ElfError> {
        {
            let header = record_mut::<Ehdr>(out, 0)?;
            header.e_phoff.set(LE, self.phoff);
            header.e_shoff.set(LE, self.shoff);
        }
        write_table(out, self.phoff, pod::bytes_of_slice(&self.phdrs))?;
        write_table(out, self.shoff, pod::bytes_of_slice(&self.shdrs))?;
        point_wrappers_at_bundles(out, split, &self.shdrs, &self.fatbin)?;
        check_program_headers(out)?;
        Ok(())
    }
}

fn short_input() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        "the input ended before the marker's segment",
    )
}

/// The load segment holding the marker, which must be the last in memory
/// and hold the last loaded bytes of the file, as the split leaves it.
fn marker_segment(phdrs: &[Phdr], split: &SplitElf<'_>) -> Result<usize, ElfError> {
    let loads = || {
        phdrs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.p_type(LE) == PT_LOAD)
    };
    let address = split.marker.address;
    let (index, segment) = loads()
        .find(|(_, p)| p.p_vaddr(LE) <= address && address < p.memory_end())
        .ok_or_else(|| ElfError::Malformed("no load segment holds the marker".into()))?;
    let last_in_memory = loads().all(|(_, p)| p.memory_end() <= segment.memory_end());
    let last_in_file = loads().all(|(_, p)| p.file_end() <= segment.file_end());
    if !last_in_memory || !last_in_file || segment.p_filesz(LE) != segment.p_memsz(LE) {
        return Err(ElfError::Unsupported(
            "the marker's load segment is not the last one, as kpack-pack split places it".into(),
        ));
    }
    Ok(index)
}

/// Where the new `.hip_fatbin` and each bundle in it go.
#[derive(Debug)]
struct FatbinLayout {
    address: u64,
    offset: u64,
    len: u64,
    /// Each bundle's offset in the section and length, by bundle index.
    bundles: BTreeMap<u32, (u64, u64)>,
}

impl FatbinLayout {
    /// Places the section past the segment ending at `memory_end` (file
    /// offset `file_end`), each bundle at a 4096-byte boundary.
    fn plan(memory_end: u64, file_end: u64, lens: &BTreeMap<u32, u64>) -> FatbinLayout {
        let address = round_up(memory_end, BUNDLE_ALIGN);
        let offset = file_end + (address - memory_end);
        let mut bundles = BTreeMap::new();
        let mut len = 0;
        for (&index, &bundle_len) in lens {
            let at = round_up(len, BUNDLE_ALIGN);
            bundles.insert(index, (at, bundle_len));
            len = at + bundle_len;
        }
        FatbinLayout {
            address,
            offset,
            len,
            bundles,
        }
    }

    fn end_offset(&self) -> u64 {
        self.offset + self.len
    }

    /// Makes section `index` (`.hip_fatbin`) describe the new bundles.
    fn describe(&self, shdrs: &mut [Shdr], index: usize) -> Result<(), ElfError> {
        let section = shdrs
            .get_mut(index)
            .ok_or_else(|| ElfError::Malformed(format!("section {index} vanished")))?;
        section.sh_type.set(LE, SHT_PROGBITS);
        section.sh_flags.set(LE, section.sh_flags(LE) | SHF_ALLOC);
        section.sh_addr.set(LE, self.address);
        section.sh_offset.set(LE, self.offset);
        section.sh_size.set(LE, self.len);
        section.sh_addralign.set(LE, BUNDLE_ALIGN);
        Ok(())
    }
}

/// Leaves section `index` (the marker) without a name: its bytes stay
/// where they are loaded, but the file is no longer a split one to any
/// reader, and a split of it writes a marker of its own.
fn unname(shdrs: &mut [Shdr], index: usize) -> Result<(), ElfError> {
    shdrs
        .get_mut(index)
        .ok_or_else(|| ElfError::Malformed(format!("section {index} vanished")))?
        .sh_name
        .set(LE, 0);
    Ok(())
}

/// Moves the sections at or past `file_end` down by `shift`; they must be
/// unloaded.
fn move_tail(shdrs: &mut [Shdr], file_end: u64, shift: u64) -> Result<(), ElfError> {
    for (index, section) in shdrs.iter_mut().enumerate() {
        if !has_file_data(section) || section.sh_offset(LE) < file_end {
            continue;
        }
        if section.sh_flags(LE).contains(SHF_ALLOC) {
            return Err(ElfError::Unsupported(format!(
                "loaded section {index} lies past the marker's segment"
            )));
        }
        section.sh_offset.set(LE, section.sh_offset(LE) + shift);
    }
    Ok(())
}

/// Writes a header table at `offset`.
fn write_table(out: &mut [u8], offset: u64, table: &[u8]) -> Result<(), ElfError> {
    usize::try_from(offset)
        .ok()
        .and_then(|at| out.get_mut(at..at.checked_add(table.len())?))
        .ok_or_else(|| ElfError::Malformed("a header table runs past the end of the file".into()))?
        .copy_from_slice(table);
    Ok(())
}

/// Makes every wrapper `HIPF` again, pointing at its bundle.
fn point_wrappers_at_bundles(
    out: &mut [u8],
    split: &SplitElf<'_>,
    shdrs: &[Shdr],
    fatbin: &FatbinLayout,
) -> Result<(), ElfError> {
    for wrapper in &split.wrappers {
        let (offset, _) = fatbin.bundles.get(&wrapper.bundle).ok_or_else(|| {
            ElfError::Malformed(format!("no bundle for index {}", wrapper.bundle))
        })?;
        write_wrapper(
            out,
            shdrs,
            WrapperSite {
                file_offset: wrapper.file_offset,
                pointer: wrapper.pointer,
            },
            WrapperValue {
                magic: HIPF_MAGIC,
                address: fatbin.address + offset,
                reserved: 0,
            },
        )?;
    }
    Ok(())
}

//! Writing fat PE32+ DLLs as a linker lays them out, for tests and
//! benchmarks that need images no compiler here makes: gigabytes of
//! device code, a checksum, an Authenticode certificate table, a section
//! table with no free slot, `.hip_fat` last. Sections: `.text` (one
//! `ret`), `.hipFatB` (the wrappers), `.hip_fat` (the bundles, each at a
//! 4096-byte boundary), `.rdata` (a debug directory whose CodeView record
//! is addressed by file offset too, as MSVC writes it), `.reloc` (a
//! `DIR64` entry for each wrapper's pointer).
#![allow(clippy::expect_used)]

use std::io::{self, Write};

use object::pe::SectionFlags;
use object::pe::{
    ImageDataDirectory, ImageDebugDirectory, ImageDosHeader, ImageFileHeader, ImageNtHeaders64,
    ImageOptionalHeader64, ImageSectionHeader, IMAGE_DEBUG_TYPE_CODEVIEW,
    IMAGE_DIRECTORY_ENTRY_BASERELOC, IMAGE_DIRECTORY_ENTRY_DEBUG, IMAGE_DIRECTORY_ENTRY_SECURITY,
    IMAGE_DLLCHARACTERISTICS_DYNAMIC_BASE, IMAGE_DLLCHARACTERISTICS_HIGH_ENTROPY_VA,
    IMAGE_DLLCHARACTERISTICS_NX_COMPAT, IMAGE_DOS_SIGNATURE, IMAGE_FILE_DLL,
    IMAGE_FILE_EXECUTABLE_IMAGE, IMAGE_FILE_LARGE_ADDRESS_AWARE, IMAGE_FILE_MACHINE_AMD64,
    IMAGE_NT_OPTIONAL_HDR64_MAGIC, IMAGE_NT_SIGNATURE, IMAGE_NUMBEROF_DIRECTORY_ENTRIES,
    IMAGE_SCN_CNT_CODE, IMAGE_SCN_CNT_INITIALIZED_DATA, IMAGE_SCN_MEM_DISCARDABLE,
    IMAGE_SCN_MEM_EXECUTE, IMAGE_SCN_MEM_READ, IMAGE_SCN_MEM_WRITE, IMAGE_SUBSYSTEM_WINDOWS_GUI,
};
use object::{pod, Pod, U16, U32, U64};

use super::checksum::pe_checksum;
use super::image::{section_name, LE};
use super::relocs::dir64_blocks;
use super::{FATBIN_SECTION, RELOC_SECTION, WRAPPER_SECTION};
use crate::stream::write_zeros;
use crate::wrapper::{HipWrapper, HIPF_MAGIC, POINTER_OFFSET, WRAPPER_SIZE};

/// The preferred base of the images written, as MSVC picks for DLLs.
pub const IMAGE_BASE: u64 = 0x1_8000_0000;
const FILE_ALIGN: u64 = 0x200;
const SECTION_ALIGN: u64 = 0x1000;
const BUNDLE_ALIGN: u64 = 4096;
/// Size of the headers: DOS header, NT headers, section table.
const SIZE_OF_HEADERS: u64 = 0x400;
/// The size of the NT headers with 16 data directories.
const NT_LEN: u64 = (size_of::<ImageNtHeaders64>()
    + IMAGE_NUMBEROF_DIRECTORY_ENTRIES * size_of::<ImageDataDirectory>())
    as u64;

/// A fat DLL to write; see the module documentation.
#[derive(Debug, Clone)]
pub struct SyntheticDll {
    /// Each bundle's length, in section order.
    pub bundle_lens: Vec<u64>,
    /// The bundle each wrapper points at, in section order.
    pub wrappers: Vec<usize>,
    /// Sets the optional header's checksum.
    pub checksum: bool,
    /// An Authenticode certificate table appended to the file.
    pub certificate: Option<Vec<u8>>,
    /// Ends the section table where another header does not fit before
    /// `SizeOfHeaders`.
    pub full_section_table: bool,
    /// Puts `.hip_fat` after `.reloc`, last in the image.
    pub fatbin_last: bool,
}

impl SyntheticDll {
    /// A DLL of `bundle_lens` bundles, wrapper N pointing at bundle N.
    pub fn new(bundle_lens: Vec<u64>) -> SyntheticDll {
        SyntheticDll {
            wrappers: (0..bundle_lens.len()).collect(),
            bundle_lens,
            checksum: false,
            certificate: None,
            full_section_table: false,
            fatbin_last: false,
        }
    }

    /// The DLL holding `bundles`, in memory.
    pub fn bytes(&self, bundles: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out, |index, out| out.write_all(&bundles[index]))
            .expect("writing to a Vec");
        if self.checksum {
            let at = self.nt_offset() as usize + 4 + 20 + 64;
            let sum = pe_checksum(&out, at);
            out[at..at + 4].copy_from_slice(&sum.to_le_bytes());
        }
        out
    }

    /// Writes the DLL to `out`, `bundle` writing bundle N's bytes (exactly
    /// `bundle_lens[N]`). With `checksum`, the caller computes it over the
    /// whole file ([`SyntheticDll::bytes`] does); a stream gets a placeholder.
    pub fn write<W: Write>(
        &self,
        out: &mut W,
        mut bundle: impl FnMut(usize, &mut W) -> io::Result<()>,
    ) -> io::Result<()> {
        let layout = self.layout();
        let mut file = Vec::new();
        file.extend_from_slice(pod::bytes_of(&self.dos_header()));
        file.resize(self.nt_offset() as usize, 0);
        file.extend_from_slice(pod::bytes_of(&self.nt_headers(&layout)));
        file.extend_from_slice(pod::bytes_of_slice(&self.directories(&layout)));
        file.extend_from_slice(pod::bytes_of_slice(&layout.headers));
        file.resize(SIZE_OF_HEADERS as usize, 0);
        out.write_all(&file)?;
        for section in &layout.order {
            match section {
                Section::Text => write_padded(out, &[0xc3], FILE_ALIGN)?,
                Section::Wrappers => write_padded(out, &self.wrapper_bytes(&layout), FILE_ALIGN)?,
                Section::Relocations => write_padded(out, &self.relocations(&layout), FILE_ALIGN)?,
                Section::Debug => write_padded(out, &debug_bytes(&layout), FILE_ALIGN)?,
                Section::Fatbin => {
                    let mut at = 0;
                    for (index, &offset) in layout.bundle_offsets.iter().enumerate() {
                        write_zeros(out, offset - at)?;
                        bundle(index, out)?;
                        at = offset + self.bundle_lens[index];
                    }
                    write_zeros(out, at.next_multiple_of(FILE_ALIGN) - at)?;
                }
            }
        }
        if let Some(certificate) = &self.certificate {
            out.write_all(certificate)?;
        }
        Ok(())
    }

    fn nt_offset(&self) -> u64 {
        if self.full_section_table {
            // The table ends 8 bytes before SizeOfHeaders.
            SIZE_OF_HEADERS - 8 - SECTIONS as u64 * size_of::<ImageSectionHeader>() as u64 - NT_LEN
        } else {
            size_of::<ImageDosHeader>() as u64
        }
    }

    fn dos_header(&self) -> ImageDosHeader {
        let mut dos: ImageDosHeader = zeroed();
        dos.e_magic = U16::new(LE, IMAGE_DOS_SIGNATURE);
        dos.e_lfanew = U32::new(LE, self.nt_offset() as u32);
        dos
    }

    /// Where every section goes.
    fn layout(&self) -> Layout {
        let mut bundle_offsets = Vec::new();
        let mut fatbin_len: u64 = 0;
        for &len in &self.bundle_lens {
            let at = fatbin_len.next_multiple_of(BUNDLE_ALIGN);
            bundle_offsets.push(at);
            fatbin_len = at + len;
        }
        let order = if self.fatbin_last {
            [
                Section::Text,
                Section::Wrappers,
                Section::Debug,
                Section::Relocations,
                Section::Fatbin,
            ]
        } else {
            [
                Section::Text,
                Section::Wrappers,
                Section::Fatbin,
                Section::Debug,
                Section::Relocations,
            ]
        };
        let wrappers_len = self.wrappers.len() as u64 * WRAPPER_SIZE;
        // Pages are 4 KiB and the section starts on one.
        let relocations_len = dir64_blocks(&wrapper_pointers(0, self.wrappers.len())).len() as u64;
        let (mut rva, mut offset) = (SECTION_ALIGN, SIZE_OF_HEADERS);
        let mut headers = Vec::new();
        let mut rvas = [0; SECTIONS];
        let mut offsets = [0; SECTIONS];
        for section in order {
            let (name, len, flags) = match section {
                Section::Text => (
                    ".text",
                    1,
                    IMAGE_SCN_CNT_CODE | IMAGE_SCN_MEM_EXECUTE | IMAGE_SCN_MEM_READ,
                ),
                Section::Wrappers => (
                    WRAPPER_SECTION,
                    wrappers_len,
                    data_flags() | IMAGE_SCN_MEM_WRITE,
                ),
                Section::Fatbin => (FATBIN_SECTION, fatbin_len, data_flags()),
                Section::Relocations => (
                    RELOC_SECTION,
                    relocations_len,
                    data_flags() | IMAGE_SCN_MEM_DISCARDABLE,
                ),
                Section::Debug => (".rdata", DEBUG_LEN, data_flags()),
            };
            let raw_len = len.next_multiple_of(FILE_ALIGN);
            headers.push(header(name, rva, len, offset, raw_len, flags));
            rvas[section as usize] = rva as u32;
            offsets[section as usize] = offset;
            rva += len.next_multiple_of(SECTION_ALIGN);
            offset += raw_len;
        }
        Layout {
            order,
            headers,
            rvas,
            offsets,
            bundle_offsets,
            relocations_len,
            image_len: rva,
            file_len: offset,
        }
    }

    fn nt_headers(&self, layout: &Layout) -> ImageNtHeaders64 {
        let mut nt: ImageNtHeaders64 = zeroed();
        nt.signature = U32::new(LE, IMAGE_NT_SIGNATURE);
        let file: &mut ImageFileHeader = &mut nt.file_header;
        file.machine = U16::new(LE, IMAGE_FILE_MACHINE_AMD64);
        file.number_of_sections = U16::new(LE, layout.headers.len() as u16);
        file.size_of_optional_header = U16::new(LE, (NT_LEN - 24) as u16);
        file.characteristics = U16::new(
            LE,
            IMAGE_FILE_EXECUTABLE_IMAGE | IMAGE_FILE_LARGE_ADDRESS_AWARE | IMAGE_FILE_DLL,
        );
        let optional: &mut ImageOptionalHeader64 = &mut nt.optional_header;
        optional.magic = U16::new(LE, IMAGE_NT_OPTIONAL_HDR64_MAGIC);
        optional.size_of_code = U32::new(LE, FILE_ALIGN as u32);
        let initialized = layout.file_len - SIZE_OF_HEADERS - FILE_ALIGN;
        optional.size_of_initialized_data = U32::new(LE, initialized as u32);
        optional.base_of_code = U32::new(LE, SECTION_ALIGN as u32);
        optional.image_base = U64::new(LE, IMAGE_BASE);
        optional.section_alignment = U32::new(LE, SECTION_ALIGN as u32);
        optional.file_alignment = U32::new(LE, FILE_ALIGN as u32);
        optional.major_operating_system_version = U16::new(LE, 6);
        optional.major_subsystem_version = U16::new(LE, 6);
        optional.size_of_image = U32::new(LE, layout.image_len as u32);
        optional.size_of_headers = U32::new(LE, SIZE_OF_HEADERS as u32);
        // A placeholder the caller replaces with the real sum.
        optional.check_sum = U32::new(LE, u32::from(self.checksum));
        optional.subsystem = U16::new(LE, IMAGE_SUBSYSTEM_WINDOWS_GUI);
        optional.dll_characteristics = U16::new(
            LE,
            IMAGE_DLLCHARACTERISTICS_HIGH_ENTROPY_VA
                | IMAGE_DLLCHARACTERISTICS_DYNAMIC_BASE
                | IMAGE_DLLCHARACTERISTICS_NX_COMPAT,
        );
        optional.size_of_stack_reserve = U64::new(LE, 1 << 20);
        optional.size_of_stack_commit = U64::new(LE, 1 << 12);
        optional.size_of_heap_reserve = U64::new(LE, 1 << 20);
        optional.size_of_heap_commit = U64::new(LE, 1 << 12);
        optional.number_of_rva_and_sizes = U32::new(LE, IMAGE_NUMBEROF_DIRECTORY_ENTRIES as u32);
        nt
    }

    fn directories(&self, layout: &Layout) -> Vec<ImageDataDirectory> {
        let mut directories =
            vec![zeroed::<ImageDataDirectory>(); IMAGE_NUMBEROF_DIRECTORY_ENTRIES];
        let debug = &mut directories[IMAGE_DIRECTORY_ENTRY_DEBUG];
        debug.virtual_address = U32::new(LE, layout.rvas[Section::Debug as usize]);
        debug.size = U32::new(LE, size_of::<ImageDebugDirectory>() as u32);
        let relocations = &mut directories[IMAGE_DIRECTORY_ENTRY_BASERELOC];
        relocations.virtual_address = U32::new(LE, layout.rvas[Section::Relocations as usize]);
        relocations.size = U32::new(LE, layout.relocations_len as u32);
        if let Some(certificate) = &self.certificate {
            let security = &mut directories[IMAGE_DIRECTORY_ENTRY_SECURITY];
            security.virtual_address = U32::new(LE, layout.file_len as u32);
            security.size = U32::new(LE, certificate.len() as u32);
        }
        directories
    }

    fn wrapper_bytes(&self, layout: &Layout) -> Vec<u8> {
        let fatbin = IMAGE_BASE + u64::from(layout.rvas[Section::Fatbin as usize]);
        let records: Vec<HipWrapper> = self
            .wrappers
            .iter()
            .map(|&bundle| HipWrapper::new(HIPF_MAGIC, fatbin + layout.bundle_offsets[bundle], 0))
            .collect();
        pod::bytes_of_slice(&records).to_vec()
    }

    /// A `DIR64` entry for each wrapper pointer.
    fn relocations(&self, layout: &Layout) -> Vec<u8> {
        let wrappers = layout.rvas[Section::Wrappers as usize];
        dir64_blocks(&wrapper_pointers(wrappers, self.wrappers.len()))
    }
}

/// The RVAs of the pointers of `count` wrappers at RVA `wrappers`.
fn wrapper_pointers(wrappers: u32, count: usize) -> Vec<u32> {
    (0..count as u32)
        .map(|index| wrappers + index * WRAPPER_SIZE as u32 + POINTER_OFFSET as u32)
        .collect()
}

/// The sections, by their place in `Layout::rvas`.
#[derive(Debug, Clone, Copy)]
enum Section {
    Text = 0,
    Wrappers = 1,
    Fatbin = 2,
    Relocations = 3,
    Debug = 4,
}

/// How many sections the images have.
const SECTIONS: usize = 5;

#[derive(Debug)]
struct Layout {
    order: [Section; SECTIONS],
    headers: Vec<ImageSectionHeader>,
    rvas: [u32; SECTIONS],
    /// Each section's file offset.
    offsets: [u64; SECTIONS],
    /// Each bundle's offset in `.hip_fat`.
    bundle_offsets: Vec<u64>,
    relocations_len: u64,
    image_len: u64,
    file_len: u64,
}

fn data_flags() -> SectionFlags {
    IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ
}

fn header(
    name: &str,
    rva: u64,
    len: u64,
    offset: u64,
    raw_len: u64,
    flags: SectionFlags,
) -> ImageSectionHeader {
    let mut header: ImageSectionHeader = zeroed();
    header.name = section_name(name);
    header.virtual_size = U32::new(LE, len as u32);
    header.virtual_address = U32::new(LE, rva as u32);
    header.size_of_raw_data = U32::new(LE, raw_len as u32);
    header.pointer_to_raw_data = U32::new(LE, offset as u32);
    header.characteristics = U32::new(LE, flags);
    header
}

/// The CodeView record the debug directory points at.
const CODEVIEW: &[u8] = b"RSDS0123456789abcdef\x01\x00\x00\x00fat.pdb\x00";
/// `.rdata`'s bytes: the debug directory, then its CodeView record.
const DEBUG_LEN: u64 = (size_of::<ImageDebugDirectory>() + CODEVIEW.len()) as u64;

/// `.rdata`: one debug directory entry for a CodeView record right after
/// it, addressed by RVA and by file offset.
fn debug_bytes(layout: &Layout) -> Vec<u8> {
    let entry_len = size_of::<ImageDebugDirectory>() as u32;
    let mut entry: ImageDebugDirectory = zeroed();
    entry.typ = U32::new(LE, IMAGE_DEBUG_TYPE_CODEVIEW);
    entry.size_of_data = U32::new(LE, CODEVIEW.len() as u32);
    let rva = layout.rvas[Section::Debug as usize];
    entry.address_of_raw_data = U32::new(LE, rva + entry_len);
    let offset = layout.offsets[Section::Debug as usize] as u32;
    entry.pointer_to_raw_data = U32::new(LE, offset + entry_len);
    let mut bytes = pod::bytes_of(&entry).to_vec();
    bytes.extend_from_slice(CODEVIEW);
    bytes
}

/// A record of zeros.
fn zeroed<T: Pod>() -> T {
    let zeros = vec![0u8; size_of::<T>()];
    *pod::from_bytes::<T>(&zeros).expect("a whole record").0
}

/// Writes `bytes`, then zeros up to a multiple of `align`.
fn write_padded<W: Write>(out: &mut W, bytes: &[u8], align: u64) -> io::Result<()> {
    out.write_all(bytes)?;
    let len = bytes.len() as u64;
    write_zeros(out, len.next_multiple_of(align) - len)
}

/// A fat DLL broken in one way, and what an error about it must say.
#[derive(Debug, Clone)]
pub struct Malformed {
    pub what: &'static str,
    pub bytes: Vec<u8>,
    /// Words the error's message holds.
    pub says: &'static str,
}

/// Fat DLLs of three bundles broken in the ways a reader must catch:
/// truncated headers, a section past the end of the file, a wrapper
/// pointing outside every section, a relocation block past its table,
/// sections overlapping in the file and in memory.
pub fn malformed() -> Vec<Malformed> {
    let bundle = crate::bundle::build::offload_bundle(&[(
        "hipv4-amdgcn-amd-amdhsa--gfx90a",
        &[0x5a; 3000][..],
    )]);
    let bundles = vec![bundle.clone(), bundle.clone(), bundle];
    let dll = SyntheticDll::new(bundles.iter().map(|b| b.len() as u64).collect());
    let good = dll.bytes(&bundles);
    let layout = dll.layout();
    let table = (dll.nt_offset() + NT_LEN) as usize;
    let header = |section: Section| {
        let index = layout
            .order
            .iter()
            .position(|s| *s as usize == section as usize)
            .expect("every section is laid out");
        table + index * size_of::<ImageSectionHeader>()
    };
    let field = |section, field: usize| header(section) + field;
    let raw_of = |section| {
        let at = field(section, 20);
        u32::from_le_bytes(good[at..at + 4].try_into().expect("4 bytes")) as usize
    };
    let with = |at: usize, value: &[u8]| {
        let mut bytes = good.clone();
        bytes[at..at + value.len()].copy_from_slice(value);
        bytes
    };
    vec![
        Malformed {
            what: "headers cut short",
            bytes: good[..0x80].to_vec(),
            says: "truncated NT headers",
        },
        Malformed {
            what: "a section table cut short",
            bytes: good[..table + 20].to_vec(),
            says: "section headers",
        },
        Malformed {
            what: "a section past the end",
            bytes: with(field(Section::Fatbin, 16), &0x1000_0000u32.to_le_bytes()),
            says: "section .hip_fat: its file data",
        },
        Malformed {
            what: "a wrapper pointing outside every section",
            bytes: with(
                raw_of(Section::Wrappers) + 8,
                &(IMAGE_BASE + 0x7000_0000).to_le_bytes(),
            ),
            says: "outside every section",
        },
        Malformed {
            what: "a relocation block past its table",
            bytes: with(raw_of(Section::Relocations) + 4, &0x100u32.to_le_bytes()),
            says: "runs past its table",
        },
        Malformed {
            what: "sections overlapping in the file",
            bytes: with(
                field(Section::Wrappers, 20),
                &(raw_of(Section::Text) as u32).to_le_bytes(),
            ),
            says: "overlap in the file",
        },
        Malformed {
            what: "sections overlapping in memory",
            bytes: with(
                field(Section::Wrappers, 12),
                &(SECTION_ALIGN as u32).to_le_bytes(),
            ),
            says: "overlap in memory",
        },
    ]
}

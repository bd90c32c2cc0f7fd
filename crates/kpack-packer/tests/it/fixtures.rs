//! Bundles and wrappers of real fat binaries: Debian's rocRAND library
//! (one uncompressed bundle) and the jax ROCm 7 wheel (CCOB v3, zstd).

use std::io::Read;

use kpack_binary::bundle::{BundleKind, CcobMethod};
use kpack_binary::elf::{ElfKind, FatElf, Machine, PointerSource};

/// `librocrand.so.1.1` out of the Debian package, unpacked by dpkg-deb.
fn rocrand() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    fs_err::read(crate::common::unpack_rocrand(dir.path())).unwrap()
}

/// A member of the jax wheel.
fn jax(name: &str) -> Vec<u8> {
    let wheel = fs_err::File::open(
        crate::common::fixtures()
            .join("pypi/jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl"),
    )
    .unwrap();
    let mut archive = zip::ZipArchive::new(wheel).unwrap();
    let mut member = archive
        .by_name(&format!("jax_rocm7_plugin/{name}"))
        .unwrap();
    let mut data = Vec::new();
    member.read_to_end(&mut data).unwrap();
    data
}

/// An AMDGPU code object: a 64-bit ELF file with `e_machine` EM_AMDGPU.
fn is_amdgpu_code_object(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF\x02")
        && bytes.len() > 20
        && u16::from_le_bytes([bytes[18], bytes[19]]) == 224
}

#[test]
fn finds_rocrand_bundle_and_its_wrapper() {
    let data = rocrand();
    let elf = FatElf::parse(&data)
        .unwrap()
        .expect("rocRAND is a fat binary");
    assert_eq!(elf.machine, Machine::X86_64);
    assert_eq!(elf.kind, ElfKind::Dynamic);
    assert_eq!(elf.page_size, 0x1000);
    assert_eq!(elf.fatbin.size, 0xbbf229);
    assert_eq!(elf.bundles.len(), 1);
    let bundle = &elf.bundles[0];
    assert_eq!(bundle.kind, BundleKind::Uncompressed);
    let targets: Vec<String> = bundle
        .entries
        .iter()
        .map(|c| c.target.to_string())
        .collect();
    let mut sorted = targets.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "gfx1030",
            "gfx803",
            "gfx900:xnack-",
            "gfx906:xnack-",
            "gfx908:xnack-",
            "gfx90a:xnack+",
            "gfx90a:xnack-"
        ]
    );
    for code_object in &bundle.code_objects().unwrap() {
        assert!(
            is_amdgpu_code_object(&code_object.bytes),
            "{}",
            code_object.triple
        );
        assert!(code_object.triple.starts_with("hipv4-amdgcn-amd-amdhsa--"));
    }
    // The bundle runs to the end of its last code object, within the section.
    assert!(bundle.len as u64 <= elf.fatbin.size);
    assert_eq!(elf.wrappers.len(), 1);
    let wrapper = &elf.wrappers[0];
    assert_eq!(wrapper.bundle, 0);
    assert_eq!(wrapper.target_address, elf.fatbin.address);
    assert!(
        matches!(
            wrapper.pointer,
            PointerSource::Rela {
                r_type: 8,
                symbol: None,
                ..
            }
        ),
        "{:?}",
        wrapper.pointer
    );
}

#[test]
fn finds_jax_compressed_bundles_and_wrappers() {
    for (name, bundles) in [("_linalg.so", 1), ("_prng.so", 1), ("_solver.so", 2)] {
        let data = jax(name);
        let elf = FatElf::parse(&data).unwrap().expect("fat binary");
        assert_eq!(elf.bundles.len(), bundles, "{name}");
        assert_eq!(elf.wrappers.len(), bundles, "{name}");
        for (index, wrapper) in elf.wrappers.iter().enumerate() {
            assert_eq!(wrapper.bundle, index, "{name}");
        }
        for bundle in &elf.bundles {
            assert_eq!(
                bundle.kind,
                BundleKind::Compressed {
                    version: 3,
                    method: CcobMethod::Zstd
                },
                "{name}"
            );
            assert!(!bundle.entries.is_empty());
            for code_object in &bundle.code_objects().unwrap() {
                assert!(
                    is_amdgpu_code_object(&code_object.bytes),
                    "{name} {}",
                    code_object.triple
                );
            }
        }
    }
}

#[test]
fn files_without_device_code_are_not_fat_binaries() {
    assert!(FatElf::parse(&jax("_hybrid.so")).unwrap().is_none());
    assert!(FatElf::parse(b"not an ELF file at all").unwrap().is_none());
    assert!(FatElf::parse(&[]).unwrap().is_none());
}

#[test]
fn splits_jax_libraries_into_healthy_files_with_every_code_object() {
    use kpack_packer::archive::{processor_archive_pattern, write_processor_archives};
    use kpack_packer::split::split_binary;
    use rocm_kpack::{Archive, Compression};

    let work = tempfile::tempdir().unwrap();
    for name in ["_linalg.so", "_prng.so", "_solver.so"] {
        let data = jax(name);
        let original = work.path().join(format!("original{name}"));
        fs_err::write(&original, &data).unwrap();
        let fat = FatElf::parse(&data).unwrap().unwrap();
        let out = work.path().join(name.trim_end_matches(".so"));
        fs_err::create_dir_all(&out).unwrap();
        let key = format!("jax_rocm7_plugin/{name}");
        let split = split_binary(
            &data,
            &key,
            vec![format!("../.kpack/{}", processor_archive_pattern("jax"))],
        )
        .unwrap()
        .unwrap();
        let host = out.join(name);
        fs_err::write(&host, &split.host).unwrap();
        write_processor_archives(
            &out.join(".kpack"),
            "jax",
            Compression::DEFAULT,
            &split.entries,
        )
        .unwrap();

        // Every code object of every decompressed bundle is in an archive.
        let mut checked = 0;
        for (index, bundle) in fat.bundles.iter().enumerate() {
            for code_object in &bundle.code_objects().unwrap() {
                let archive = Archive::open(out.join(format!(
                    ".kpack/jax_{}.kpack",
                    code_object.target.processor()
                )))
                .unwrap();
                let stored = archive
                    .kernel(&format!("{key}#{index}"), &code_object.target)
                    .unwrap();
                assert_eq!(
                    &*stored, &*code_object.bytes,
                    "{name} #{index} {}",
                    code_object.target
                );
                checked += 1;
            }
        }
        assert!(checked > 0);

        assert_eq!(
            crate::common::health_warnings(&host),
            Vec::<String>::new(),
            "{name}"
        );
        assert_eq!(
            crate::common::gdb_warnings(&host),
            crate::common::gdb_warnings(&original),
            "{name}"
        );
        let stripped = out.join(format!("stripped{name}"));
        crate::common::strip_copy(&host, &stripped);
        assert_eq!(
            crate::common::health_warnings(&stripped),
            Vec::<String>::new(),
            "{name} stripped"
        );
    }
}

/// Headers no linker writes, in jax's `_prng.so`: a load segment at the top
/// of the address space, load segments aligned beyond any page (1 TiB and
/// 2^63), a section to move for the program headers placed past every
/// segment. Each is an error, not an overflow or a huge allocation.
#[test]
fn impossible_headers_are_errors() {
    use std::mem::{offset_of, size_of};

    use kpack_packer::error::{ElfError, ImageError};
    use kpack_packer::split::split_binary;
    use object::elf::{FileHeader64, ProgramHeader64, SectionHeader64};
    use object::read::elf::FileHeader;
    use object::LittleEndian as LE;

    type Phdr = ProgramHeader64<LE>;
    type Shdr = SectionHeader64<LE>;
    let data = jax("_prng.so");
    let header = FileHeader64::<LE>::parse(&*data).unwrap();
    let phdr = |index: usize| header.e_phoff(LE) as usize + index * size_of::<Phdr>();
    let shdr = |index: usize| header.e_shoff(LE) as usize + index * size_of::<Shdr>();
    // Segment 4 is the last load segment, 1 the first; section 1 is
    // `.dynsym`, which moves to make room for the program headers.
    for (at, value) in [
        (phdr(4) + offset_of!(Phdr, p_vaddr), u64::MAX - 0xfff),
        (phdr(1) + offset_of!(Phdr, p_align), 1 << 40),
        (phdr(1) + offset_of!(Phdr, p_align), 1 << 63),
        (shdr(1) + offset_of!(Shdr, sh_addr), 1 << 50),
    ] {
        let mut bad = data.clone();
        bad[at..at + 8].copy_from_slice(&value.to_le_bytes());
        let result = split_binary(&bad, "_prng.so", Vec::new());
        assert!(
            matches!(
                result,
                Err(ImageError::Elf(
                    ElfError::Malformed(_) | ElfError::Unsupported(_)
                ))
            ),
            "{value:#x} at {at:#x}: {:?}",
            result.map(|split| split.is_some())
        );
    }
}

/// The SHA-256 of every file under `root`, one `path digest` line each,
/// sorted.
fn digests_under(root: &std::path::Path) -> String {
    let mut lines = Vec::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in fs_err::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let kind = fs_err::symlink_metadata(&path).unwrap().file_type();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let (digest, _) = kpack_hash::Sha256::of_file(&path).unwrap();
                let relative = path.strip_prefix(root).unwrap().display().to_string();
                let hex = digest.to_string();
                lines.push(format!("{relative} {hex}"));
            }
        }
    }
    lines.sort();
    lines.join("\n")
}

/// The streaming splitter writes the bytes the splitter that held whole
/// binaries in memory wrote: the snapshot holds that one's digests, of a
/// file split, a tree split per processor and per family (zstd level 5),
/// and the jax wheel's split.
#[test]
fn outputs_are_byte_identical_to_the_in_memory_splitters() {
    let work = tempfile::tempdir().unwrap();
    let library = crate::common::unpack_rocrand(work.path());
    let out = work.path().join("out");
    let kpack_pack = |args: &[&std::ffi::OsStr]| {
        crate::common::run(
            std::process::Command::new(env!("CARGO_BIN_EXE_kpack-pack"))
                .args(args)
                .env("SOURCE_DATE_EPOCH", "1700000000"),
        )
    };
    let tree = work.path().join("usr");
    let jax = crate::common::fixtures()
        .join("pypi/jax_rocm7_plugin-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl");
    let dir = |name: &str| out.join(name).into_os_string();
    kpack_pack(&[
        "split".as_ref(),
        library.as_ref(),
        "-o".as_ref(),
        &dir("rocrand-file"),
    ]);
    kpack_pack(&[
        "split".as_ref(),
        tree.as_ref(),
        "-o".as_ref(),
        &dir("rocrand-tree"),
    ]);
    kpack_pack(&[
        "split".as_ref(),
        tree.as_ref(),
        "-o".as_ref(),
        &dir("rocrand-tree-fam"),
        "--group-by".as_ref(),
        "family".as_ref(),
        "--level".as_ref(),
        "5".as_ref(),
    ]);
    kpack_pack(&[
        "wheel".as_ref(),
        "split".as_ref(),
        jax.as_ref(),
        "-o".as_ref(),
        &dir("jax-wheel"),
    ]);
    insta::assert_snapshot!(digests_under(&out));
}

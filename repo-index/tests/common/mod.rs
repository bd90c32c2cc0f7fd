//! Inputs for the repository tests: small archives and host trees.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use fs_err as fs;
use rocm_kpack::{ArchiveOptions, ArchiveWriter, BinaryKey, Compression, Target};

/// A small archive for `targets` of processor `name`.
pub fn archive(dir: &Path, name: &str, targets: &[&str]) -> PathBuf {
    let path = dir.join(format!("rocm_{name}.kpack"));
    let file = fs::File::create(&path).unwrap();
    let options = ArchiveOptions {
        group: "rocm".into(),
        family: name.into(),
        arches: targets.iter().map(|t| Target::parse(t).unwrap()).collect(),
        compression: Compression::DEFAULT,
    };
    let mut writer = ArchiveWriter::new(file, options).unwrap();
    for target in targets {
        writer
            .add(
                &BinaryKey::new("lib/librocrand.so.1.1", 0),
                &Target::parse(target).unwrap(),
                format!("code for {target}").as_bytes(),
            )
            .unwrap();
    }
    writer.finish().unwrap();
    path
}

/// A host tree artifact: a zstd-compressed tar with one file.
pub fn host_tree(dir: &Path) -> PathBuf {
    let path = dir.join("rocm-rand-host.tar.zst");
    let mut tar = Vec::new();
    // A minimal ustar archive: one header and one block of data, then two
    // zero blocks.
    let mut header = [0u8; 512];
    header[..17].copy_from_slice(b"lib/librocrand.so");
    header[100..107].copy_from_slice(b"0000644");
    header[124..135].copy_from_slice(b"00000000005");
    header[156] = b'0';
    header[257..262].copy_from_slice(b"ustar");
    header[148..156].copy_from_slice(b"        ");
    let sum: u32 = header.iter().map(|&b| u32::from(b)).sum();
    header[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    tar.extend_from_slice(&header);
    let mut data = [0u8; 512];
    data[..5].copy_from_slice(b"hello");
    tar.extend_from_slice(&data);
    tar.extend_from_slice(&[0u8; 1024]);
    fs::write(&path, zstd::bulk::compress(&tar, 3).unwrap()).unwrap();
    path
}

//! A kpack archive made byte by byte, as a publisher holding the key may
//! make one: its table of contents lists one binary key for several
//! targets, every entry pointing at the same zstd frame of zeros, so a few
//! KiB decode to the number of entries times the frame's size.

use std::io::{Read, Write};

/// A `zstd-per-kernel` archive of group `rocrand` whose TOC lists `key`
/// (`lib/librocrand.so.1.1#0`) for each of `targets`, every entry ordinal 0
/// of `size` bytes: one frame of `size` zeros with its content size.
pub fn zero_bomb_archive(key: &str, targets: &[&str], size: u64) -> Vec<u8> {
    let frame = zero_frame(size);
    let mut region = Vec::new();
    region.extend_from_slice(&1u32.to_le_bytes());
    region.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    region.extend_from_slice(&frame);
    let toc_offset = 64 + region.len() as u64;

    let mut toc = Vec::new();
    map(&mut toc, 8);
    string(&mut toc, "format_version");
    uint(&mut toc, 1);
    string(&mut toc, "group_name");
    string(&mut toc, "rocrand");
    string(&mut toc, "gfx_arch_family");
    string(&mut toc, "gfx90a");
    string(&mut toc, "gfx_arches");
    toc.push(0x90 | targets.len() as u8);
    for target in targets {
        string(&mut toc, target);
    }
    string(&mut toc, "toc");
    map(&mut toc, 1);
    string(&mut toc, key);
    map(&mut toc, targets.len());
    for target in targets {
        string(&mut toc, target);
        map(&mut toc, 3);
        string(&mut toc, "type");
        string(&mut toc, "hsaco");
        string(&mut toc, "ordinal");
        uint(&mut toc, 0);
        string(&mut toc, "original_size");
        uint(&mut toc, size);
    }
    string(&mut toc, "compression_scheme");
    string(&mut toc, "zstd-per-kernel");
    string(&mut toc, "zstd_offset");
    uint(&mut toc, 64);
    string(&mut toc, "zstd_size");
    uint(&mut toc, region.len() as u64);

    let mut archive = b"KPAK".to_vec();
    archive.extend_from_slice(&1u32.to_le_bytes());
    archive.extend_from_slice(&toc_offset.to_le_bytes());
    archive.resize(64, 0);
    archive.extend_from_slice(&region);
    archive.extend_from_slice(&toc);
    archive
}

/// The nine feature variants of gfx90a a TOC can name.
pub const GFX90A_VARIANTS: [&str; 9] = [
    "gfx90a",
    "gfx90a:xnack+",
    "gfx90a:xnack-",
    "gfx90a:sramecc+",
    "gfx90a:sramecc-",
    "gfx90a:sramecc+:xnack+",
    "gfx90a:sramecc+:xnack-",
    "gfx90a:sramecc-:xnack+",
    "gfx90a:sramecc-:xnack-",
];

/// One zstd frame (level 3, content size recorded) of `size` zeros.
fn zero_frame(size: u64) -> Vec<u8> {
    let mut encoder = zstd::Encoder::new(Vec::new(), 3).unwrap();
    encoder.include_contentsize(true).unwrap();
    encoder.set_pledged_src_size(Some(size)).unwrap();
    std::io::copy(&mut std::io::repeat(0).take(size), &mut encoder).unwrap();
    encoder.finish().unwrap()
}

fn map(out: &mut Vec<u8>, len: usize) {
    assert!(len < 16, "a fixmap");
    out.push(0x80 | len as u8);
}

fn string(out: &mut Vec<u8>, text: &str) {
    let len = text.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else {
        out.push(0xd9);
        out.push(u8::try_from(len).unwrap());
    }
    out.write_all(text.as_bytes()).unwrap();
}

fn uint(out: &mut Vec<u8>, value: u64) {
    match value {
        0..=0x7f => out.push(value as u8),
        0x80..=0xffff_ffff => {
            out.push(0xce);
            out.extend_from_slice(&(value as u32).to_be_bytes());
        }
        _ => {
            out.push(0xcf);
            out.extend_from_slice(&value.to_be_bytes());
        }
    }
}

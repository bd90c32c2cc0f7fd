//! Writing offload bundles and compressed bundles, as clang does: for
//! tests and tools that need fat binaries without a GPU compiler.
#![allow(clippy::expect_used)]

use std::io::Write;

use md5::{Digest, Md5};

use super::{ccob, offload, CcobHeader, CcobMethod};

/// An uncompressed bundle of `(triple, bytes)` entries, with a host entry
/// first as clang writes it.
pub fn offload_bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let host = "host-x86_64-unknown-linux-gnu-";
    let all: Vec<(&str, &[u8])> = std::iter::once((host, &[][..]))
        .chain(entries.iter().copied())
        .collect();
    let mut data_at = offload::header_len(all.iter().map(|&(triple, _)| triple));
    let mut table = Vec::with_capacity(all.len());
    for &(triple, bytes) in &all {
        let offset = if bytes.is_empty() { 0 } else { data_at };
        table.push((triple, offset, bytes.len() as u64));
        data_at += bytes.len() as u64;
    }
    let mut out = offload::encode_header(&table);
    for (_, bytes) in &all {
        out.extend_from_slice(bytes);
    }
    out
}

/// An offload bundle whose entry table lists a host entry and then
/// `entries` (triple, offset, size) exactly as given, followed by
/// `data_len` bytes of code: for shapes clang never writes (code objects
/// out of order or overlapping).
pub fn offload_bundle_as_listed(entries: &[(&str, u64, u64)], data_len: usize) -> Vec<u8> {
    let mut table = vec![("host-x86_64-unknown-linux-gnu-", 0, 0)];
    table.extend_from_slice(entries);
    let mut bundle = offload::encode_header(&table);
    bundle.resize(bundle.len() + data_len, 0x5a);
    bundle
}

/// A compressed bundle (CCOB v3, zstd) holding a bundle whose second code
/// object (gfx1100) lies before its first (gfx90a).
pub fn out_of_order_ccob() -> Vec<u8> {
    let first = offload::header_len(
        [
            "host-x86_64-unknown-linux-gnu-",
            "hipv4-amdgcn-amd-amdhsa--gfx90a",
            "hipv4-amdgcn-amd-amdhsa--gfx1100",
        ]
        .into_iter(),
    );
    let inner = offload_bundle_as_listed(
        &[
            ("hipv4-amdgcn-amd-amdhsa--gfx90a", first + 100, 100),
            ("hipv4-amdgcn-amd-amdhsa--gfx1100", first, 100),
        ],
        200,
    );
    ccob(&inner, 3, CcobMethod::Zstd)
}

/// A compressed bundle of `inner` with the given header version and method.
pub fn ccob(inner: &[u8], version: u16, method: CcobMethod) -> Vec<u8> {
    ccob_streamed(version, method, inner.len() as u64, |out| {
        out.write_all(inner)
    })
}

/// A compressed bundle of `inner_len` bytes that `write_inner` writes a
/// piece at a time: compressed and hashed as they come, never held whole,
/// so a test can make gigabytes of device code in a few megabytes.
pub fn ccob_streamed(
    version: u16,
    method: CcobMethod,
    inner_len: u64,
    write_inner: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Vec<u8> {
    let mut tee = Tee {
        md5: Md5::new(),
        encoder: match method {
            CcobMethod::Zstd => Encoder::Zstd(
                zstd::stream::write::Encoder::new(Vec::new(), 3).expect("a zstd encoder"),
            ),
            CcobMethod::Zlib => Encoder::Zlib(flate2::write::ZlibEncoder::new(
                Vec::new(),
                flate2::Compression::default(),
            )),
        },
    };
    write_inner(&mut tee).expect("writing to a Vec");
    let hash = ccob::low_64(&tee.md5.finalize().into());
    let payload = match tee.encoder {
        Encoder::Zstd(encoder) => encoder.finish(),
        Encoder::Zlib(encoder) => encoder.finish(),
    }
    .expect("writing to a Vec");
    let header = CcobHeader::new(version, method, inner_len, hash, payload.len() as u64);
    let mut out = Vec::with_capacity(header.header_len() + payload.len());
    header
        .write(&mut out)
        .expect("a header of version 1, 2 or 3 that holds its sizes");
    out.extend_from_slice(&payload);
    out
}

/// The compressor a compressed bundle's payload is written through.
enum Encoder {
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
    Zlib(flate2::write::ZlibEncoder<Vec<u8>>),
}

/// Hashes what it compresses.
struct Tee {
    md5: Md5,
    encoder: Encoder,
}

impl Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = match &mut self.encoder {
            Encoder::Zstd(encoder) => encoder.write(buf)?,
            Encoder::Zlib(encoder) => encoder.write(buf)?,
        };
        self.md5.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The targets of [`big_library_assembly`]'s bundles.
pub const BIG_TARGETS: [&str; 4] = ["gfx90a", "gfx942", "gfx1100", "gfx1201"];
/// Its compressed bundles, one wrapper each.
pub const BIG_BUNDLES: usize = 16;
/// Each code object's size: 16 bundles x 4 targets x 32 MiB = 2 GiB of
/// device code once decompressed.
pub const BIG_CODE_LEN: u64 = 32 << 20;

/// The 4 KiB block the code object of `bundle` for `BIG_TARGETS[target]`
/// repeats: its own, so no two code objects are alike, and repeated, so
/// gigabytes compress to little.
pub fn big_block(bundle: usize, target: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64 ^ ((bundle as u64) << 8 | target as u64);
    (0..4096)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect()
}

/// Writes into `dir` the assembly of a library whose `.hip_fatbin` holds
/// [`BIG_BUNDLES`] compressed bundles (CCOB v3, zstd) of 2 GiB of device
/// code in all, and whose `.hipFatBinSegment` holds a wrapper per bundle,
/// global hidden symbols `big_wrapper<N>`; returns the `.s` file, which
/// `cc -shared` links. The bundles (`bundle<N>.ccob`, included by
/// `.incbin`) are made as streams, never whole in memory.
pub fn big_library_assembly(dir: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    use super::OffloadBundleLayout;
    use std::fmt::Write as _;
    let triples: Vec<String> = BIG_TARGETS
        .iter()
        .map(|t| format!("hipv4-amdgcn-amd-amdhsa--{t}"))
        .collect();
    let mut assembly = String::from(".section .hip_fatbin,\"a\",@progbits\n");
    for bundle in 0..BIG_BUNDLES {
        let layout = OffloadBundleLayout::plan(
            "host-x86_64-unknown-linux-gnu",
            triples.iter().map(|t| (t.as_str(), BIG_CODE_LEN)),
            4096,
        );
        let ccob = ccob_streamed(3, CcobMethod::Zstd, layout.len(), |out| {
            layout.write(out, |target, write| {
                let block = big_block(bundle, target);
                for _ in 0..BIG_CODE_LEN / 4096 {
                    write(&block)?;
                }
                Ok::<(), std::io::Error>(())
            })
        });
        let path = dir.join(format!("bundle{bundle}.ccob"));
        fs_err::write(&path, ccob)?;
        let _ = write!(
            assembly,
            ".p2align 12\n.Lb{bundle}:\n.incbin \"{}\"\n",
            path.display()
        );
    }
    assembly.push_str(".section .hipFatBinSegment,\"aw\",@progbits\n.p2align 3\n");
    for bundle in 0..BIG_BUNDLES {
        let _ = write!(
            assembly,
            ".globl big_wrapper{bundle}\n.hidden big_wrapper{bundle}\nbig_wrapper{bundle}:\n\
             .long 0x48495046\n.long 1\n.quad .Lb{bundle}\n.quad 0\n"
        );
    }
    assembly.push_str(".section .note.GNU-stack,\"\",@progbits\n");
    let source = dir.join("big.s");
    fs_err::write(&source, assembly)?;
    Ok(source)
}

/// A bundle of `count` entries, each for its own made-up processor
/// (`gfx<N>`) with a few bytes of code: the shape of a bundle with very
/// many entries.
pub fn many_entry_bundle(count: usize) -> Vec<u8> {
    let triples: Vec<String> = (0..count)
        .map(|n| format!("hipv4-amdgcn-amd-amdhsa--gfx{n}"))
        .collect();
    let codes: Vec<[u8; 4]> = (0..count as u32).map(u32::to_le_bytes).collect();
    let entries: Vec<(&str, &[u8])> = triples
        .iter()
        .zip(&codes)
        .map(|(triple, code)| (triple.as_str(), &code[..]))
        .collect();
    offload_bundle(&entries)
}

/// The `.hip_fatbin` section of `bundles` small bundles back to back, each
/// at an 8-byte boundary, with every bundle's offset in it.
pub fn small_bundles(bundles: usize) -> (Vec<u8>, Vec<u64>) {
    let mut section = Vec::new();
    let mut offsets = Vec::with_capacity(bundles);
    for n in 0..bundles {
        section.resize(section.len().next_multiple_of(8), 0);
        offsets.push(section.len() as u64);
        let code = (n as u64).to_le_bytes();
        section.extend(offload_bundle(&[(
            "hipv4-amdgcn-amd-amdhsa--gfx90a",
            &code,
        )]));
    }
    (section, offsets)
}

/// Writes into `dir` the assembly of a library whose `.hip_fatbin` holds
/// [`small_bundles`]`(bundles)` and whose `.hipFatBinSegment` holds
/// `wrappers` wrappers, wrapper N pointing at bundle `N % bundles`;
/// returns the `.s` file, which `cc -shared` links.
pub fn many_wrappers_assembly(
    dir: &std::path::Path,
    bundles: usize,
    wrappers: usize,
) -> std::io::Result<std::path::PathBuf> {
    use std::fmt::Write as _;
    let (section, offsets) = small_bundles(bundles);
    let fatbin = dir.join("fatbin.bin");
    fs_err::write(&fatbin, section)?;
    let mut assembly = format!(
        ".section .hip_fatbin,\"a\",@progbits\n.p2align 12\n.Lfat:\n.incbin \"{}\"\n\
         .section .hipFatBinSegment,\"aw\",@progbits\n.p2align 3\n",
        fatbin.display()
    );
    for n in 0..wrappers {
        let offset = offsets[n % bundles];
        let _ = writeln!(
            assembly,
            ".long 0x48495046\n.long 1\n.quad .Lfat+{offset}\n.quad 0"
        );
    }
    assembly.push_str(".section .note.GNU-stack,\"\",@progbits\n");
    let source = dir.join("wrappers.s");
    fs_err::write(&source, assembly)?;
    Ok(source)
}

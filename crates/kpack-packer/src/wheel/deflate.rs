//! Deflating a large member on every core, as pigz does.
//!
//! The member is cut into blocks of [`BLOCK`] bytes, each deflated on its
//! own at [`LEVEL`] with the 32 KiB before it as a preset dictionary (the
//! history one stream would have had there, so the ratio stays that of one
//! stream) and ended by a sync flush: byte-aligned and not final, so the
//! blocks written one after another are one raw deflate stream, which an
//! empty final block ([`FINAL_BLOCK`]) ends. Blocks are deflated a window
//! at a time on rayon's pool ([`BLOCKS_PER_THREAD`] per thread, 8 MiB at
//! most), the next window read and the last one written meanwhile, so
//! memory holds a few windows whatever the member's size. Where blocks
//! start, and so every byte written, depends only on the input, never on
//! the thread count.

use std::io::{self, Read, Write};

use flate2::{Compress, Compression, FlushCompress};
use rayon::prelude::*;

/// The deflate level of every member the wheel writer deflates: zip's
/// default, `zip -6`.
pub const LEVEL: u32 = 6;

/// Bytes per block, as pigz: small enough that two cores share a member
/// of two blocks, large enough that each block's own Huffman tables and
/// sync flush cost little (the stream stays within 0.1% of one stream's
/// size).
pub const BLOCK: usize = 128 * 1024;

/// The history a deflate stream refers back to, which each block is given
/// as its preset dictionary.
const HISTORY: usize = 32 * 1024;

/// Blocks deflated per thread in one window: enough that a slow block
/// seldom keeps the others waiting at the window's end.
pub const BLOCKS_PER_THREAD: usize = 4;

/// The most blocks in one window (8 MiB), whatever the thread count: with
/// three windows and two windows' output in flight, 40 MiB at most.
const MAX_WINDOW: usize = 64;

/// Members of at least this many bytes are deflated in blocks: two
/// blocks, the least two cores can share. Going parallel costs nothing
/// worth waiting for a larger member (the preset dictionaries keep the
/// size within 0.1% of one stream's).
pub const PARALLEL_THRESHOLD: u64 = 2 * BLOCK as u64;

/// An empty final block (fixed Huffman codes, end of block only): what
/// ends a stream of blocks.
pub const FINAL_BLOCK: [u8; 2] = [0x03, 0x00];

/// Deflates blocks one at a time, reusing its state from block to block.
pub struct BlockDeflater {
    compress: Compress,
}

impl std::fmt::Debug for BlockDeflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BlockDeflater")
    }
}

impl Default for BlockDeflater {
    fn default() -> Self {
        BlockDeflater {
            compress: Compress::new(Compression::new(LEVEL), false),
        }
    }
}

impl BlockDeflater {
    /// Appends to `out` the deflated `input`, sync flushed and not final,
    /// with the last 32 KiB of `history` (the bytes before `input` in the
    /// stream) as its preset dictionary.
    pub fn deflate(&mut self, history: &[u8], input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        self.compress.reset();
        let history = &history[history.len().saturating_sub(HISTORY)..];
        if !history.is_empty() {
            self.compress
                .set_dictionary(history)
                .map_err(io::Error::other)?;
        }
        out.reserve(input.len() + input.len() / 1024 + 64);
        let start = self.compress.total_in();
        loop {
            let consumed = (self.compress.total_in() - start) as usize;
            if out.capacity() - out.len() < 64 {
                out.reserve(BLOCK / 8);
            }
            let room = out.capacity() - out.len();
            let before = out.len();
            self.compress
                .compress_vec(&input[consumed..], out, FlushCompress::Sync)
                .map_err(io::Error::other)?;
            let consumed = (self.compress.total_in() - start) as usize;
            // The flush is complete once all input is in and deflate left
            // room in the output.
            if consumed == input.len() && out.len() - before < room {
                return Ok(());
            }
        }
    }
}

/// What a stream of blocks holds: the CRC-32 and size of its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deflated {
    pub crc32: u32,
    pub size: u64,
}

/// Consecutive bytes of the input: up to 32 KiB of history, then the
/// blocks of one window.
#[derive(Debug, Default)]
struct Window {
    bytes: Vec<u8>,
    history: usize,
}

impl Window {
    /// The next window of `input` (`blocks` blocks, fewer at its end),
    /// after `previous`.
    fn read(input: &mut impl Read, previous: &Window, blocks: usize) -> io::Result<Window> {
        let history = &previous.bytes[previous.bytes.len().saturating_sub(HISTORY)..];
        let mut bytes = Vec::with_capacity(history.len() + blocks * BLOCK);
        bytes.extend_from_slice(history);
        input
            .take((blocks * BLOCK) as u64)
            .read_to_end(&mut bytes)?;
        Ok(Window {
            bytes,
            history: history.len(),
        })
    }

    /// The input bytes of the window's blocks.
    fn input(&self) -> &[u8] {
        &self.bytes[self.history..]
    }

    /// Deflates the window's blocks on rayon's pool, in order.
    fn deflate(&self) -> io::Result<Vec<Vec<u8>>> {
        let count = self.input().len().div_ceil(BLOCK);
        (0..count)
            .into_par_iter()
            .map_init(BlockDeflater::default, |deflater, block| {
                let start = self.history + block * BLOCK;
                let end = (start + BLOCK).min(self.bytes.len());
                let mut out = Vec::new();
                let history = &self.bytes[..start];
                deflater.deflate(history, &self.bytes[start..end], &mut out)?;
                Ok(out)
            })
            .collect()
    }
}

/// Deflates everything `input` yields into `output` as a stream of blocks
/// on rayon's pool; `each` is given the input in order (to hash it). The
/// stream is not ended: [`FINAL_BLOCK`], or any deflate stream, ends it.
pub fn deflate_blocks(
    mut input: impl Read + Send,
    mut output: impl Write + Send,
    mut each: impl FnMut(&[u8]) -> io::Result<()> + Send,
) -> io::Result<Deflated> {
    let threads = rayon::current_num_threads().max(1);
    let blocks = (BLOCKS_PER_THREAD * threads).min(MAX_WINDOW);
    let mut crc = crc32fast::Hasher::new();
    let mut size = 0u64;
    let mut write = |window: &Window, deflated: Vec<Vec<u8>>| -> io::Result<()> {
        for block in deflated {
            output.write_all(&block)?;
        }
        crc.update(window.input());
        each(window.input())?;
        size += window.input().len() as u64;
        Ok(())
    };
    // One window is deflated while the one before is written and the one
    // after read.
    let mut written: Option<(Window, Vec<Vec<u8>>)> = None;
    let mut current = Window::read(&mut input, &Window::default(), blocks)?;
    while !current.input().is_empty() {
        let (next, deflated) = rayon::join(
            || {
                if let Some((window, deflated)) = written.take() {
                    write(&window, deflated)?;
                }
                Window::read(&mut input, &current, blocks)
            },
            || current.deflate(),
        );
        written = Some((current, deflated?));
        current = next?;
    }
    if let Some((window, deflated)) = written {
        write(&window, deflated)?;
    }
    Ok(Deflated {
        crc32: crc.finalize(),
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes that compress, but not to nothing: text-like runs with a
    /// counter through them.
    fn sample(len: usize) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(len);
        let mut n = 0u32;
        while bytes.len() < len {
            bytes.extend_from_slice(
                format!("member {n} of the wheel, line {}\n", n % 97).as_bytes(),
            );
            n = n.wrapping_mul(1_103_515_245).wrapping_add(12_345) % 100_000;
        }
        bytes.truncate(len);
        bytes
    }

    fn inflate(stream: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::DeflateDecoder::new(stream)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    /// The ended stream of `input`, deflated in blocks with `threads`
    /// threads.
    fn blocks_of(input: &[u8], threads: usize) -> (Vec<u8>, Deflated) {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut stream = Vec::new();
        let mut seen = Vec::new();
        let deflated = pool
            .install(|| {
                deflate_blocks(input, &mut stream, |bytes| {
                    seen.extend_from_slice(bytes);
                    Ok(())
                })
            })
            .unwrap();
        assert!(seen == input, "each saw other bytes than the input");
        stream.extend_from_slice(&FINAL_BLOCK);
        (stream, deflated)
    }

    #[test]
    fn blocks_joined_inflate_to_the_input_with_its_crc() {
        let windows = BLOCKS_PER_THREAD * 2 * BLOCK;
        for len in [
            0,
            1,
            BLOCK - 1,
            BLOCK,
            BLOCK + 1,
            3 * BLOCK,
            windows,
            windows + 7,
            2 * windows + 5 * BLOCK + 321,
        ] {
            let input = sample(len);
            let (stream, deflated) = blocks_of(&input, 2);
            assert!(inflate(&stream) == input, "{len} bytes do not come back");
            assert_eq!(deflated.size, len as u64);
            assert_eq!(deflated.crc32, crc32fast::hash(&input), "{len} bytes");
        }
    }

    #[test]
    fn the_stream_is_the_same_whatever_the_thread_count() {
        // More blocks than the largest window holds.
        let input = sample((MAX_WINDOW + 5) * BLOCK + 999);
        let (one, _) = blocks_of(&input, 1);
        for threads in [2, 3, 32] {
            assert!(blocks_of(&input, threads).0 == one, "{threads} threads");
        }
    }

    #[test]
    fn preset_dictionaries_keep_the_ratio_of_one_stream() {
        let input = sample(64 * BLOCK);
        let (blocks, _) = blocks_of(&input, 2);
        let mut one = flate2::write::DeflateEncoder::new(Vec::new(), Compression::new(LEVEL));
        one.write_all(&input).unwrap();
        let one = one.finish().unwrap();
        let ratio = blocks.len() as f64 / one.len() as f64;
        assert!(
            ratio < 1.005,
            "{} bytes against {}",
            blocks.len(),
            one.len()
        );
    }

    #[test]
    fn a_block_is_byte_aligned_and_not_final() {
        let mut deflater = BlockDeflater::default();
        let mut block = Vec::new();
        deflater
            .deflate(b"", b"hello, hello, hello", &mut block)
            .unwrap();
        // A sync flush ends with an empty stored block.
        assert!(block.ends_with(&[0x00, 0x00, 0xff, 0xff]), "{block:02x?}");
        let mut second = Vec::new();
        deflater
            .deflate(b"hello, hello, hello", b"hello again", &mut second)
            .unwrap();
        let stream = [&block[..], &second[..], &FINAL_BLOCK[..]].concat();
        assert_eq!(inflate(&stream), b"hello, hello, hellohello again");
    }
}

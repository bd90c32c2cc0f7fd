//! The byte streams rewrites write: exact copies of the input, skips over
//! what leaves it (never read), and runs of zeros.

use std::io::{self, Read, Seek, SeekFrom, Write};

/// Copies exactly `len` bytes; an input that ends first is an error.
pub(crate) fn copy_exact<R: Read, W: Write>(
    input: &mut R,
    out: &mut W,
    len: u64,
) -> io::Result<()> {
    if io::copy(&mut input.take(len), out)? != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the input is shorter than its headers say",
        ));
    }
    Ok(())
}

/// Moves `input` past `len` bytes without reading them.
pub(crate) fn skip<R: Seek>(input: &mut R, len: u64) -> io::Result<()> {
    let len = i64::try_from(len).map_err(io::Error::other)?;
    input.seek(SeekFrom::Current(len)).map(|_| ())
}

/// Writes `count` zero bytes.
pub(crate) fn write_zeros<W: Write + ?Sized>(out: &mut W, mut count: u64) -> io::Result<()> {
    const ZEROS: [u8; 4096] = [0; 4096];
    while count > 0 {
        let n = count.min(ZEROS.len() as u64) as usize;
        out.write_all(&ZEROS[..n])?;
        count -= n as u64;
    }
    Ok(())
}

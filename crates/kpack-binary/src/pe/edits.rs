//! A file rewritten as a stream of edits to the input: at each input
//! offset, some bytes skipped and some zeros inserted. The split writes
//! its body through them and finds where every input offset went.

use std::io::{self, Read, Write};

use crate::bundle::write_zeros;

/// At input offset `at`, `delete` input bytes are skipped and `insert`
/// zeros written (before the bytes that follow).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Edit {
    pub at: u64,
    pub delete: u64,
    pub insert: u64,
}

/// Edits in input order, none overlapping another's deleted bytes.
#[derive(Debug, Clone, Default)]
pub(super) struct Edits(Vec<Edit>);

impl Edits {
    /// Adds `edit`, keeping the edits in input order (an insertion at the
    /// start of a deletion comes before it).
    pub fn push(&mut self, edit: Edit) {
        let at = self
            .0
            .partition_point(|e| (e.at, e.delete) <= (edit.at, edit.delete));
        self.0.insert(at, edit);
    }

    /// Where input offset `offset` lands in the output; `None` when its
    /// byte is deleted.
    pub fn map(&self, offset: u64) -> Option<u64> {
        let mut mapped = offset;
        for edit in &self.0 {
            if offset >= edit.at + edit.delete {
                mapped = mapped + edit.insert - edit.delete;
            } else if offset >= edit.at {
                return None;
            }
        }
        Some(mapped)
    }

    /// The output's length for an input of `len` bytes.
    pub fn output_len(&self, len: u64) -> u64 {
        self.0
            .iter()
            .fold(len, |len, edit| len + edit.insert - edit.delete)
    }

    /// Writes the input read from `input` (at its start, `len` bytes)
    /// with the edits applied. Between files `io::copy` lets the kernel
    /// copy the ranges.
    pub fn write<R: Read, W: Write>(&self, input: &mut R, len: u64, out: &mut W) -> io::Result<()> {
        let mut at = 0;
        for edit in &self.0 {
            copy_exact(input, out, edit.at - at)?;
            io::copy(&mut input.take(edit.delete), &mut io::sink())?;
            write_zeros(out, edit.insert)?;
            at = edit.at + edit.delete;
        }
        copy_exact(input, out, len - at)
    }
}

/// Copies exactly `len` bytes.
fn copy_exact<R: Read, W: Write>(input: &mut R, out: &mut W, len: u64) -> io::Result<()> {
    if io::copy(&mut input.take(len), out)? != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the input is shorter than its headers say",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edits() -> Edits {
        let mut edits = Edits::default();
        edits.push(Edit {
            at: 10,
            delete: 0,
            insert: 4,
        });
        edits.push(Edit {
            at: 20,
            delete: 5,
            insert: 0,
        });
        edits
    }

    #[test]
    fn offsets_move_by_what_was_inserted_and_deleted_before_them() {
        let edits = edits();
        assert_eq!(edits.map(9), Some(9));
        assert_eq!(edits.map(10), Some(14));
        assert_eq!(edits.map(19), Some(23));
        assert_eq!(edits.map(20), None);
        assert_eq!(edits.map(24), None);
        assert_eq!(edits.map(25), Some(24));
        assert_eq!(edits.output_len(30), 29);
    }

    #[test]
    fn the_written_output_is_the_input_with_the_edits() {
        let input: Vec<u8> = (1..=30).collect();
        let mut out = Vec::new();
        edits().write(&mut &input[..], 30, &mut out).unwrap();
        let mut expected: Vec<u8> = (1..=10).collect();
        expected.extend([0; 4]);
        expected.extend(11..=20);
        expected.extend(26..=30);
        assert_eq!(out, expected);
    }

    #[test]
    fn a_short_input_is_an_error() {
        let mut out = Vec::new();
        let error = edits()
            .write(&mut &[0u8; 12][..], 30, &mut out)
            .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }
}

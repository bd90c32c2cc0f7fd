//! A file rewritten as a stream of edits to the input: at each input
//! offset, some bytes skipped and some zeros inserted. The split writes
//! its body through them and finds where every input offset went.

use std::io::{self, Read, Seek, Write};

use crate::stream::{copy_exact, skip, write_zeros};

/// At input offset `at`, `delete` input bytes are skipped and `insert`
/// bytes written (before the bytes that follow): zeros, or what the
/// writer's caller fills in when `filled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Edit {
    pub at: u64,
    pub delete: u64,
    pub insert: u64,
    pub filled: bool,
}

impl Edit {
    /// Skips `len` input bytes at `at`.
    pub fn delete(at: u64, len: u64) -> Edit {
        Edit {
            at,
            delete: len,
            insert: 0,
            filled: false,
        }
    }

    /// Inserts `len` zeros at `at`.
    pub fn zeros(at: u64, len: u64) -> Edit {
        Edit {
            at,
            delete: 0,
            insert: len,
            filled: false,
        }
    }
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

    /// Where bytes inserted at input offset `at` land in the output:
    /// after what is already inserted there, before what is deleted from
    /// there on.
    pub fn insertion_point(&self, at: u64) -> u64 {
        self.0
            .iter()
            .filter(|edit| edit.at + edit.delete <= at)
            .fold(at, |point, edit| point + edit.insert - edit.delete)
    }

    /// The output's length for an input of `len` bytes.
    pub fn output_len(&self, len: u64) -> u64 {
        self.0
            .iter()
            .fold(len, |len, edit| len + edit.insert - edit.delete)
    }

    /// Writes the input read from `input` (at its start, `len` bytes)
    /// with the edits applied, `fill` writing the inserted bytes of
    /// `filled` edits (exactly `insert` of them). Deleted bytes are
    /// skipped, never read; between files `io::copy` lets the kernel copy
    /// the ranges.
    pub fn write<R: Read + Seek, W: Write, E: From<io::Error>>(
        &self,
        input: &mut R,
        len: u64,
        out: &mut W,
        mut fill: impl FnMut(&Edit, &mut W) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut at = 0;
        for edit in &self.0 {
            copy_exact(input, out, edit.at - at)?;
            skip(input, edit.delete)?;
            if edit.filled {
                fill(edit, out)?;
            } else {
                write_zeros(out, edit.insert)?;
            }
            at = edit.at + edit.delete;
        }
        Ok(copy_exact(input, out, len - at)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edits() -> Edits {
        let mut edits = Edits::default();
        edits.push(Edit::zeros(10, 4));
        edits.push(Edit::delete(20, 5));
        edits
    }

    fn no_fill(_: &Edit, _: &mut Vec<u8>) -> io::Result<()> {
        unreachable!("no edit is filled")
    }

    #[test]
    fn filled_insertions_come_from_the_caller() {
        let mut edits = Edits::default();
        edits.push(Edit {
            filled: true,
            ..Edit::zeros(2, 3)
        });
        let mut out = Vec::new();
        edits
            .write(
                &mut io::Cursor::new([1u8, 2, 3]),
                3,
                &mut out,
                |edit, out| {
                    out.extend(std::iter::repeat_n(9, edit.insert as usize));
                    io::Result::Ok(())
                },
            )
            .unwrap();
        assert_eq!(out, [1, 2, 9, 9, 9, 3]);
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
    fn an_insertion_where_a_deletion_starts_lands_before_it() {
        let edits = edits();
        assert_eq!(edits.insertion_point(20), 24);
        assert_eq!(edits.insertion_point(10), 14);
        assert_eq!(edits.insertion_point(25), 24);
    }

    #[test]
    fn the_written_output_is_the_input_with_the_edits() {
        let input: Vec<u8> = (1..=30).collect();
        let mut out = Vec::new();
        edits()
            .write(&mut io::Cursor::new(&input), 30, &mut out, no_fill)
            .unwrap();
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
            .write(&mut io::Cursor::new([0u8; 12]), 30, &mut out, no_fill)
            .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }
}

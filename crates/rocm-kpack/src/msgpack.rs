//! A bounds-checked, zero-copy MessagePack cursor for the archive TOC and
//! the marker, built on `rmp`'s marker classification.
//!
//! Both documents have a fixed shape, so they are read value by value
//! instead of through a generic value tree: opening an archive with 100,000
//! entries must not allocate a node per MessagePack value. Skipping unknown
//! values is iterative, so deeply nested input cannot overflow the stack.

use rmp::Marker;

use crate::error::MsgpackError;

/// Why a value could not be read as the expected type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The bytes are not valid MessagePack.
    Msgpack(MsgpackError),
    /// A valid value of another type.
    WrongType {
        expected: &'static str,
        found: &'static str,
    },
}

impl From<MsgpackError> for ReadError {
    fn from(error: MsgpackError) -> Self {
        ReadError::Msgpack(error)
    }
}

/// A position in a MessagePack byte string.
#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    /// Bytes consumed so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], MsgpackError> {
        let end = self.pos.checked_add(n).ok_or(MsgpackError::Truncated)?;
        let bytes = self
            .data
            .get(self.pos..end)
            .ok_or(MsgpackError::Truncated)?;
        self.pos = end;
        Ok(bytes)
    }

    fn be(&mut self, n: usize) -> Result<u64, MsgpackError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn marker(&mut self) -> Result<Marker, MsgpackError> {
        let byte = *self.take(1)?.first().ok_or(MsgpackError::Truncated)?;
        Ok(Marker::from_u8(byte))
    }

    /// Reads a marker, undoing the read when `f` rejects it.
    fn expect<T>(
        &mut self,
        expected: &'static str,
        f: impl FnOnce(&mut Self, Marker) -> Result<Option<T>, MsgpackError>,
    ) -> Result<T, ReadError> {
        let start = self.pos;
        let marker = self.marker()?;
        match f(self, marker)? {
            Some(value) => Ok(value),
            None => {
                self.pos = start;
                Err(ReadError::WrongType {
                    expected,
                    found: kind(marker),
                })
            }
        }
    }

    /// Reads a map header and returns its number of key/value pairs.
    pub(crate) fn map_len(&mut self) -> Result<usize, ReadError> {
        self.expect("map", |c, marker| {
            Ok(match marker {
                Marker::FixMap(n) => Some(usize::from(n)),
                Marker::Map16 => Some(c.be(2)? as usize),
                Marker::Map32 => Some(c.be(4)? as usize),
                _ => None,
            })
        })
    }

    /// Reads an array header and returns its number of elements.
    pub(crate) fn array_len(&mut self) -> Result<usize, ReadError> {
        self.expect("array", |c, marker| {
            Ok(match marker {
                Marker::FixArray(n) => Some(usize::from(n)),
                Marker::Array16 => Some(c.be(2)? as usize),
                Marker::Array32 => Some(c.be(4)? as usize),
                _ => None,
            })
        })
    }

    /// Reads a `str` value, borrowing it from the input.
    pub(crate) fn str(&mut self) -> Result<&'a str, ReadError> {
        let bytes = self.expect("string", |c, marker| {
            let len = match marker {
                Marker::FixStr(n) => usize::from(n),
                Marker::Str8 => c.be(1)? as usize,
                Marker::Str16 => c.be(2)? as usize,
                Marker::Str32 => c.be(4)? as usize,
                _ => return Ok(None),
            };
            c.take(len).map(Some)
        })?;
        std::str::from_utf8(bytes).map_err(|_| ReadError::Msgpack(MsgpackError::InvalidUtf8))
    }

    /// Reads a non-negative integer of any width.
    pub(crate) fn uint(&mut self) -> Result<u64, ReadError> {
        self.expect("non-negative integer", |c, marker| {
            Ok(match marker {
                Marker::FixPos(n) => Some(u64::from(n)),
                Marker::U8 => Some(c.be(1)?),
                Marker::U16 => Some(c.be(2)?),
                Marker::U32 => Some(c.be(4)?),
                Marker::U64 => Some(c.be(8)?),
                Marker::I8 => u64::try_from(c.be(1)? as u8 as i8).ok(),
                Marker::I16 => u64::try_from(c.be(2)? as u16 as i16).ok(),
                Marker::I32 => u64::try_from(c.be(4)? as u32 as i32).ok(),
                Marker::I64 => u64::try_from(c.be(8)? as i64).ok(),
                _ => None,
            })
        })
    }

    /// Skips one value of any type.
    pub(crate) fn skip(&mut self) -> Result<(), MsgpackError> {
        let data = self.data;
        self.pos = skip_value(|i| data.get(i).copied(), self.pos, data.len())?;
        Ok(())
    }
}

/// Walks one MessagePack value starting at `start` and returns the position
/// just past it, reading only marker and length bytes (through `byte_at`)
/// and never looking at or past `limit`.
pub(crate) fn skip_value(
    byte_at: impl Fn(usize) -> Option<u8>,
    start: usize,
    limit: usize,
) -> Result<usize, MsgpackError> {
    let read_be = |pos: usize, n: usize| -> Result<u64, MsgpackError> {
        if pos.checked_add(n).is_none_or(|end| end > limit) {
            return Err(MsgpackError::Truncated);
        }
        (pos..pos + n).try_fold(0u64, |acc, i| {
            byte_at(i)
                .map(|b| (acc << 8) | u64::from(b))
                .ok_or(MsgpackError::Truncated)
        })
    };
    let mut pos = start;
    // Values still to skip; every value takes at least one byte, so more
    // pending values than remaining bytes means truncated input.
    let mut pending: u64 = 1;
    while pending > 0 {
        pending -= 1;
        if pos >= limit {
            return Err(MsgpackError::Truncated);
        }
        let marker = Marker::from_u8(byte_at(pos).ok_or(MsgpackError::Truncated)?);
        pos += 1;
        // (bytes of a length field, bytes of payload not counted by it)
        let (len_bytes, fixed, children): (usize, u64, u64) = match marker {
            Marker::FixPos(_) | Marker::FixNeg(_) | Marker::Null | Marker::True | Marker::False => {
                (0, 0, 0)
            }
            Marker::U8 | Marker::I8 => (0, 1, 0),
            Marker::U16 | Marker::I16 => (0, 2, 0),
            Marker::U32 | Marker::I32 | Marker::F32 => (0, 4, 0),
            Marker::U64 | Marker::I64 | Marker::F64 => (0, 8, 0),
            Marker::FixStr(n) => (0, u64::from(n), 0),
            Marker::Str8 | Marker::Bin8 => (1, 0, 0),
            Marker::Str16 | Marker::Bin16 => (2, 0, 0),
            Marker::Str32 | Marker::Bin32 => (4, 0, 0),
            Marker::FixExt1 => (0, 2, 0),
            Marker::FixExt2 => (0, 3, 0),
            Marker::FixExt4 => (0, 5, 0),
            Marker::FixExt8 => (0, 9, 0),
            Marker::FixExt16 => (0, 17, 0),
            Marker::Ext8 => (1, 1, 0),
            Marker::Ext16 => (2, 1, 0),
            Marker::Ext32 => (4, 1, 0),
            Marker::FixArray(n) => (0, 0, u64::from(n)),
            Marker::FixMap(n) => (0, 0, 2 * u64::from(n)),
            Marker::Array16 => (0, 0, read_be(pos, 2)?),
            Marker::Array32 => (0, 0, read_be(pos, 4)?),
            Marker::Map16 => (0, 0, 2 * read_be(pos, 2)?),
            Marker::Map32 => (0, 0, 2 * read_be(pos, 4)?),
            Marker::Reserved => return Err(MsgpackError::ReservedMarker),
        };
        let header = match marker {
            Marker::Array16 | Marker::Map16 => 2,
            Marker::Array32 | Marker::Map32 => 4,
            _ => 0,
        };
        let payload = if len_bytes > 0 {
            read_be(pos, len_bytes)?
        } else {
            0
        };
        let advance = (header + len_bytes) as u64 + fixed + payload;
        let end = (pos as u64)
            .checked_add(advance)
            .filter(|&end| end <= limit as u64)
            .ok_or(MsgpackError::Truncated)?;
        pos = end as usize;
        pending += children;
        if pending > (limit - pos) as u64 {
            return Err(MsgpackError::Truncated);
        }
    }
    Ok(pos)
}

/// A human name for the type a marker starts.
fn kind(marker: Marker) -> &'static str {
    match marker {
        Marker::FixPos(_) | Marker::U8 | Marker::U16 | Marker::U32 | Marker::U64 => "integer",
        Marker::FixNeg(_) | Marker::I8 | Marker::I16 | Marker::I32 | Marker::I64 => "integer",
        Marker::Null => "nil",
        Marker::True | Marker::False => "boolean",
        Marker::F32 | Marker::F64 => "float",
        Marker::FixStr(_) | Marker::Str8 | Marker::Str16 | Marker::Str32 => "string",
        Marker::Bin8 | Marker::Bin16 | Marker::Bin32 => "binary",
        Marker::FixArray(_) | Marker::Array16 | Marker::Array32 => "array",
        Marker::FixMap(_) | Marker::Map16 | Marker::Map32 => "map",
        Marker::FixExt1
        | Marker::FixExt2
        | Marker::FixExt4
        | Marker::FixExt8
        | Marker::FixExt16
        | Marker::Ext8
        | Marker::Ext16
        | Marker::Ext32 => "extension",
        Marker::Reserved => "reserved marker",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut buf = Vec::new();
        f(&mut buf);
        buf
    }

    #[test]
    fn reads_typed_values() {
        let bytes = encode(|b| {
            rmp::encode::write_map_len(b, 2).unwrap();
            rmp::encode::write_str(b, "a").unwrap();
            rmp::encode::write_uint(b, 70_000).unwrap();
            rmp::encode::write_str(b, "b").unwrap();
            rmp::encode::write_array_len(b, 1).unwrap();
            rmp::encode::write_sint(b, 5).unwrap();
        });
        let mut c = Cursor::new(&bytes);
        assert_eq!(c.map_len().unwrap(), 2);
        assert_eq!(c.str().unwrap(), "a");
        assert_eq!(c.uint().unwrap(), 70_000);
        assert_eq!(c.str().unwrap(), "b");
        assert_eq!(c.array_len().unwrap(), 1);
        assert_eq!(c.uint().unwrap(), 5);
        assert_eq!(c.remaining(), 0);
    }

    #[test]
    fn wrong_type_leaves_cursor_in_place() {
        let bytes = encode(|b| rmp::encode::write_str(b, "x").unwrap());
        let mut c = Cursor::new(&bytes);
        assert_eq!(
            c.uint(),
            Err(ReadError::WrongType {
                expected: "non-negative integer",
                found: "string"
            })
        );
        assert_eq!(c.pos(), 0);
        assert_eq!(c.str().unwrap(), "x");
    }

    #[test]
    fn negative_integers_are_not_uints() {
        let bytes = encode(|b| {
            rmp::encode::write_i32(b, -3).unwrap();
        });
        assert!(matches!(
            Cursor::new(&bytes).uint(),
            Err(ReadError::WrongType { .. })
        ));
    }

    #[test]
    fn skips_nested_values() {
        let bytes = encode(|b| {
            rmp::encode::write_map_len(b, 1).unwrap();
            rmp::encode::write_str(b, "k").unwrap();
            rmp::encode::write_array_len(b, 3).unwrap();
            rmp::encode::write_bin(b, &[1, 2, 3]).unwrap();
            rmp::encode::write_f64(b, 1.5).unwrap();
            rmp::encode::write_ext_meta(b, 2, 7).unwrap();
            b.extend_from_slice(&[9, 9]);
            rmp::encode::write_nil(b).unwrap();
        });
        let mut c = Cursor::new(&bytes);
        c.skip().unwrap();
        assert_eq!(c.remaining(), 1);
    }

    #[test]
    fn rejects_truncated_and_reserved_input() {
        let bytes = encode(|b| {
            rmp::encode::write_array_len(b, 3).unwrap();
            rmp::encode::write_str(b, "abc").unwrap();
        });
        assert_eq!(Cursor::new(&bytes).skip(), Err(MsgpackError::Truncated));
        assert_eq!(
            Cursor::new(&[0xc1]).skip(),
            Err(MsgpackError::ReservedMarker)
        );
        // A huge declared array in a few bytes fails fast.
        assert_eq!(
            Cursor::new(&[0xdd, 0xff, 0xff, 0xff, 0xff]).skip(),
            Err(MsgpackError::Truncated)
        );
        assert_eq!(
            Cursor::new(&[0xdb, 0xff, 0xff, 0xff, 0xff]).str(),
            Err(ReadError::Msgpack(MsgpackError::Truncated))
        );
    }

    #[test]
    fn deep_nesting_does_not_overflow_the_stack() {
        let mut bytes = vec![0x91u8; 1_000_000];
        bytes.push(0xc0);
        assert!(Cursor::new(&bytes).skip().is_ok());
    }
}

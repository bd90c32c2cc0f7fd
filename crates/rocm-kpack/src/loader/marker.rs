//! The `.rocm_kpack_ref` marker a split binary carries: where its device
//! code archives are and under which name.

use crate::error::{Error, MarkerProblem, Result};
use crate::msgpack::{skip_value, Cursor, ReadError};

/// The most bytes read from a marker pointer.
pub const MAX_MARKER_SIZE: usize = 64 * 1024;

const KEY_SEARCH_PATHS: &str = "kpack_search_paths";
const KEY_KERNEL_NAME: &str = "kernel_name";
/// Placeholder expanded to each compatible target.
pub const GFXARCH_PLACEHOLDER: &str = "@GFXARCH@";

/// A parsed marker: `{"kpack_search_paths": [...], "kernel_name": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// Archive paths, relative to the binary's directory unless absolute,
    /// possibly containing `@GFXARCH@`.
    pub search_paths: Vec<String>,
    /// The binary key without `#N`.
    pub kernel_name: String,
}

impl Marker {
    /// Parses a marker from the start of `bytes` (at most 64 KiB are read;
    /// bytes after the map are ignored).
    pub fn parse(bytes: &[u8]) -> Result<Marker> {
        let bytes = &bytes[..bytes.len().min(MAX_MARKER_SIZE)];
        parse_map(&mut Cursor::new(bytes)).map_err(|problem| Error::InvalidMarker { problem })
    }

    /// Parses a marker in memory, reading only the bytes its MessagePack
    /// structure spans (never more than 64 KiB).
    ///
    /// # Safety
    ///
    /// `ptr` must point to readable memory holding a MessagePack value, as
    /// the marker section of a loaded binary does: every byte the value's
    /// headers claim, up to 64 KiB, must be readable.
    pub unsafe fn from_ptr(ptr: *const u8) -> Result<Marker> {
        // SAFETY: the caller guarantees the bytes of the value are readable;
        // `skip_value` reads bytes one at a time and stops at the first
        // malformed or truncated header, never past the 64 KiB limit.
        let byte_at = |i: usize| Some(unsafe { ptr.add(i).read() });
        let len =
            skip_value(byte_at, 0, MAX_MARKER_SIZE).map_err(|error| Error::InvalidMarker {
                problem: MarkerProblem::Msgpack { offset: 0, error },
            })?;
        // SAFETY: `skip_value` proved the value spans exactly `len` bytes,
        // which the caller guarantees are readable.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
        Marker::parse(bytes)
    }

    /// Encodes the marker as the packer stores it.
    pub fn to_bytes(&self) -> Vec<u8> {
        use rmp::encode::{write_array_len, write_map_len, write_str};
        let mut buf = Vec::new();
        // Writing into a Vec cannot fail.
        let _ = write_map_len(&mut buf, 2);
        let _ = write_str(&mut buf, KEY_SEARCH_PATHS);
        let _ = write_array_len(&mut buf, self.search_paths.len() as u32);
        for path in &self.search_paths {
            let _ = write_str(&mut buf, path);
        }
        let _ = write_str(&mut buf, KEY_KERNEL_NAME);
        let _ = write_str(&mut buf, &self.kernel_name);
        buf
    }
}

fn parse_map(c: &mut Cursor<'_>) -> Result<Marker, MarkerProblem> {
    let msgpack = |c: &Cursor<'_>, error| MarkerProblem::Msgpack {
        offset: c.pos(),
        error,
    };
    let fields = c.map_len().map_err(|e| match e {
        ReadError::Msgpack(error) => msgpack(c, error),
        ReadError::WrongType { .. } => MarkerProblem::NotMap,
    })?;
    let mut search_paths = None;
    let mut kernel_name = None;
    for _ in 0..fields {
        let key = match c.str() {
            Ok(key) => key,
            Err(ReadError::Msgpack(error)) => return Err(msgpack(c, error)),
            Err(ReadError::WrongType { .. }) => {
                // A non-string key is an extension we do not know: skip it
                // and its value.
                c.skip().map_err(|e| msgpack(c, e))?;
                c.skip().map_err(|e| msgpack(c, e))?;
                continue;
            }
        };
        let wrong = |name| {
            move |e| match e {
                ReadError::Msgpack(error) => MarkerProblem::Msgpack { offset: 0, error },
                ReadError::WrongType { .. } => MarkerProblem::WrongType(name),
            }
        };
        match key {
            KEY_KERNEL_NAME => {
                kernel_name = Some(c.str().map_err(wrong(KEY_KERNEL_NAME))?.to_owned());
            }
            KEY_SEARCH_PATHS => {
                let count = c.array_len().map_err(wrong(KEY_SEARCH_PATHS))?;
                let mut paths = Vec::with_capacity(count.min(c.remaining()));
                for _ in 0..count {
                    match c.str() {
                        Ok(path) if !path.is_empty() => paths.push(path.to_owned()),
                        Ok(_) => {}
                        Err(ReadError::WrongType { .. }) => c.skip().map_err(|e| msgpack(c, e))?,
                        Err(ReadError::Msgpack(error)) => return Err(msgpack(c, error)),
                    }
                }
                search_paths = Some(paths);
            }
            _ => c.skip().map_err(|e| msgpack(c, e))?,
        }
    }
    let search_paths = search_paths.ok_or(MarkerProblem::MissingKey(KEY_SEARCH_PATHS))?;
    if search_paths.is_empty() {
        return Err(MarkerProblem::NoPaths);
    }
    Ok(Marker {
        search_paths,
        kernel_name: kernel_name.ok_or(MarkerProblem::MissingKey(KEY_KERNEL_NAME))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::MsgpackError;

    fn problem(bytes: &[u8]) -> MarkerProblem {
        match Marker::parse(bytes) {
            Err(Error::InvalidMarker { problem }) => problem,
            other => panic!("expected an invalid marker, got {other:?}"),
        }
    }

    #[test]
    fn round_trips() {
        let marker = Marker {
            search_paths: vec!["../.kpack/rocm_@GFXARCH@.kpack".into(), "/abs.kpack".into()],
            kernel_name: "lib/librocrand.so.1.1".into(),
        };
        let bytes = marker.to_bytes();
        assert_eq!(Marker::parse(&bytes).unwrap(), marker);
        // SAFETY: `bytes` is a whole marker, which `from_ptr` reads no
        // further than.
        assert_eq!(unsafe { Marker::from_ptr(bytes.as_ptr()) }.unwrap(), marker);
    }

    #[test]
    fn ignores_extra_keys_and_key_order() {
        let mut buf = Vec::new();
        rmp::encode::write_map_len(&mut buf, 4).unwrap();
        rmp::encode::write_str(&mut buf, "kernel_name").unwrap();
        rmp::encode::write_str(&mut buf, "bin/app").unwrap();
        rmp::encode::write_uint(&mut buf, 7).unwrap();
        rmp::encode::write_nil(&mut buf).unwrap();
        rmp::encode::write_str(&mut buf, "future").unwrap();
        rmp::encode::write_map_len(&mut buf, 0).unwrap();
        rmp::encode::write_str(&mut buf, "kpack_search_paths").unwrap();
        rmp::encode::write_array_len(&mut buf, 2).unwrap();
        rmp::encode::write_uint(&mut buf, 1).unwrap();
        rmp::encode::write_str(&mut buf, "a.kpack").unwrap();
        buf.extend_from_slice(b"trailing junk");
        let marker = Marker::parse(&buf).unwrap();
        assert_eq!(marker.kernel_name, "bin/app");
        assert_eq!(marker.search_paths, ["a.kpack"]);
    }

    #[test]
    fn rejects_bad_markers() {
        assert_eq!(problem(&[0x90]), MarkerProblem::NotMap);
        assert_eq!(
            problem(&[0x80]),
            MarkerProblem::MissingKey(KEY_SEARCH_PATHS)
        );
        let mut buf = Vec::new();
        rmp::encode::write_map_len(&mut buf, 2).unwrap();
        rmp::encode::write_str(&mut buf, "kpack_search_paths").unwrap();
        rmp::encode::write_array_len(&mut buf, 1).unwrap();
        rmp::encode::write_uint(&mut buf, 1).unwrap();
        rmp::encode::write_str(&mut buf, "kernel_name").unwrap();
        rmp::encode::write_str(&mut buf, "x").unwrap();
        assert_eq!(problem(&buf), MarkerProblem::NoPaths);
        let mut buf = Vec::new();
        rmp::encode::write_map_len(&mut buf, 2).unwrap();
        rmp::encode::write_str(&mut buf, "kpack_search_paths").unwrap();
        rmp::encode::write_array_len(&mut buf, 1).unwrap();
        rmp::encode::write_str(&mut buf, "x.kpack").unwrap();
        rmp::encode::write_str(&mut buf, "kernel_name").unwrap();
        rmp::encode::write_uint(&mut buf, 3).unwrap();
        assert_eq!(problem(&buf), MarkerProblem::WrongType(KEY_KERNEL_NAME));
        assert!(matches!(
            problem(&[0x81, 0xa1]),
            MarkerProblem::Msgpack { .. }
        ));
        assert!(matches!(
            problem(&[]),
            MarkerProblem::Msgpack {
                error: MsgpackError::Truncated,
                ..
            }
        ));
    }

    #[test]
    fn from_ptr_stops_at_the_size_limit() {
        // A string claiming 70,000 bytes inside a 64 KiB window.
        let mut buf = vec![0x81, 0xdb];
        buf.extend_from_slice(&70_000u32.to_be_bytes());
        buf.resize(80_000, b'a');
        // SAFETY: `buf` holds 80,000 bytes, past the 64 KiB `from_ptr`
        // reads at most.
        let err = unsafe { Marker::from_ptr(buf.as_ptr()) }.unwrap_err();
        assert!(matches!(err, Error::InvalidMarker { .. }));
    }
}

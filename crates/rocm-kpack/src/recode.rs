//! An archive written again with another compression: the same entries in
//! the same order, with their metadata and the archive-wide fields. A
//! repository publishes archives whose code objects are stored as they
//! are (scheme `none`) compressed whole for the download, which shares
//! bytes between code objects that one frame per code object cannot.

use std::io::{Seek, Write};

use crate::error::Result;
use crate::read::Archive;
use crate::write::{ArchiveOptions, ArchiveWriter, BinaryKey, Compression, PreparedBlob};

/// Writes every entry of `archive`, in TOC order, into `out` with
/// `compression`; returns `out`. The code objects decode to the same bytes
/// and the loader finds each where it found it before.
pub fn recode<W: Write + Seek>(archive: &Archive, compression: Compression, out: W) -> Result<W> {
    let options = ArchiveOptions {
        group: archive.group().to_owned(),
        family: archive.family().to_owned(),
        arches: archive.architectures().to_vec(),
        compression,
    };
    let mut writer = ArchiveWriter::new(out, options)?;
    for binary in archive.binaries() {
        let key = binary_key(binary);
        let targets = archive.targets_of(binary).into_iter().flatten();
        for target in targets {
            let kernel = archive.find(binary, target)?;
            let blob = PreparedBlob::new(compression, &kernel.bytes()?)?;
            writer.add_prepared_with_metadata(&key, target, blob, kernel.metadata()?)?;
        }
    }
    writer.finish()
}

/// The key a TOC name was written from: `path#N`, or a name as it is.
fn binary_key(name: &str) -> BinaryKey {
    match name.rsplit_once('#').map(|(path, n)| (path, n.parse())) {
        Some((path, Ok(index))) => BinaryKey::new(path, index),
        _ => BinaryKey::named(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_back_as_they_were_written() {
        for name in [
            "lib/librocrand.so.1#0",
            "rocblas/gfx90a/Kernels.co",
            "a#b",
            "lib/x.so#12",
        ] {
            assert_eq!(binary_key(name).to_string(), name);
        }
        assert_eq!(binary_key("lib/x.so#12").index(), Some(12));
        assert_eq!(binary_key("a#b").index(), None);
    }
}

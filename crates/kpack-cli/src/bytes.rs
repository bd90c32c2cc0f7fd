//! Byte counts as people read them, in what every kpack tool prints: `512 B`,
//! `347.1 KiB`, `10.2 MiB`.

use std::fmt;

/// A number of bytes, shown in the largest binary unit it reaches, to one
/// decimal (bytes as they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut value = self.0 as f64;
        let mut unit = 0;
        while value >= 1024.0 && unit + 1 < UNITS.len() {
            value /= 1024.0;
            unit += 1;
        }
        // `pad`, so that a width in the format string lines sizes up.
        if unit == 0 {
            f.pad(&format!("{} B", self.0))
        } else {
            f.pad(&format!("{value:.1} {}", UNITS[unit]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ByteSize;

    #[test]
    fn sizes_read_in_the_largest_unit_they_reach() {
        assert_eq!(ByteSize(0).to_string(), "0 B");
        assert_eq!(ByteSize(512).to_string(), "512 B");
        assert_eq!(ByteSize(1023).to_string(), "1023 B");
        assert_eq!(ByteSize(1024).to_string(), "1.0 KiB");
        assert_eq!(ByteSize(2_202_009).to_string(), "2.1 MiB");
        assert_eq!(ByteSize(u64::MAX).to_string(), "16777216.0 TiB");
        assert_eq!(format!("{:>9}|", ByteSize(512)), "    512 B|");
    }
}

//! The optional header's `CheckSum`, as `imagehlp!CheckSumMappedFile`
//! computes it: the one's-complement sum of the file's 16-bit words, the
//! checksum field itself left out, folded to 16 bits, plus the file's
//! length. Drivers and some loaders check it; a split recomputes it where
//! the input had one.

/// The checksum of `image`, whose own checksum field is at
/// `checksum_offset`.
pub(super) fn pe_checksum(image: &[u8], checksum_offset: usize) -> u32 {
    let field = checksum_offset..checksum_offset + 4;
    let mut sum: u64 = 0;
    for (index, word) in image.chunks(2).enumerate() {
        let at = index * 2;
        if field.contains(&at) {
            continue;
        }
        let word = u16::from_le_bytes([word[0], word.get(1).copied().unwrap_or(0)]);
        sum += u64::from(word);
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum = (sum & 0xffff) + (sum >> 16);
    (sum as u32).wrapping_add(image.len() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_skips_its_own_field_and_adds_the_length() {
        let mut image = vec![0u8; 16];
        image[0] = 0x01;
        image[2] = 0xff;
        image[3] = 0xff;
        image[8..12].copy_from_slice(&[0xaa; 4]);
        // 0x0001 + 0xffff = 0x10000, folded to 0x0001; plus 16 bytes.
        assert_eq!(pe_checksum(&image, 8), 0x0001 + 16);
    }

    #[test]
    fn an_odd_length_pads_the_last_word_with_zero() {
        assert_eq!(pe_checksum(&[0x34, 0x12, 0x05], 0x100), 0x1234 + 0x05 + 3);
    }
}

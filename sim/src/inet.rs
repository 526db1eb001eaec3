//! The Internet checksum (RFC 1071) of the IPv4 and UDP headers that the model's traffic sources
//! build (the QEMU card's generator, `onic run`'s traffic) and check.

/// `acc` plus the 16-bit big-endian words of `bytes` (an odd last byte padded with zero), not yet
/// folded: a partial sum, e.g. of a UDP pseudo-header, for [`checksum`].
#[must_use]
pub fn sum_words(acc: u64, bytes: &[u8]) -> u64 {
    bytes.chunks(2).fold(acc, |s, w| {
        s + u64::from(u16::from_be_bytes([w[0], w.get(1).copied().unwrap_or(0)]))
    })
}

/// The checksum of `bytes` with the partial sum `acc` ([`sum_words`]) added: the ones'
/// complement of the folded sum. A header that holds its own correct checksum gives 0.
#[must_use]
pub fn checksum(acc: u64, bytes: &[u8]) -> u16 {
    let mut s = sum_words(acc, bytes);
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    // CAST: folded to 16 bits above.
    !(s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The IPv4 header of RFC 1071's neighbour, the classic worked example: its checksum is
    /// 0xb861, and with the checksum in place the header sums to 0.
    #[test]
    fn an_ipv4_header_checksums_to_its_known_value_and_then_to_zero() {
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01,
            0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(0, &h), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(checksum(0, &h), 0);
    }

    #[test]
    fn an_odd_length_is_padded_and_a_partial_sum_adds_in() {
        assert_eq!(sum_words(0, &[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(checksum(sum_words(0, &[0x00, 0x01]), &[0x00, 0x02]), !3u16);
    }
}

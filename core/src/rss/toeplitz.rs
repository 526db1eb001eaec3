//! Standard Toeplitz RSS hash (the Microsoft RSS definition), as other NICs compute it with
//! `ethtool -X ... hfunc toeplitz` and as DPDK's `rte_softrss` does in software.
//!
//! # Definition
//!
//! Number the key bits from the most significant bit of key byte 0 (bit 0) on, and the input bits
//! likewise. For every input bit `p` that is set, XOR the 32 key bits `p..p+32` into the result.
//! The inputs are network-order byte strings: source address, destination address, then for the
//! 4-tuples source port and destination port.
//!
//! A key of `L` bytes fully covers inputs of `L - 4` bytes (36 for the usual 40-byte key, exactly an
//! IPv6 4-tuple). Beyond that this module reads key bits past the end as 0, so input bytes at
//! position `L` and later contribute nothing; [`toeplitz_reference`] follows the same rule.
//!
//! # Implementation
//!
//! [`Toeplitz`] keeps one 256-entry table of `u32` per input byte position: entry `v` of row `i` is
//! the XOR of the key windows of the set bits of `v` at byte `i`. A hash is then one lookup and one
//! XOR per input byte, with no loop over bits. Rows exist for [`MAX_KEY_LEN`] positions (52 KiB in
//! all); an IPv4 4-tuple touches the first 12 rows, an IPv6 4-tuple the first 36.

use core::net::{Ipv4Addr, Ipv6Addr};

use super::RssError;

/// Longest key [`Toeplitz`] accepts, in bytes: 52, the extended key of some NICs (40 standard
/// bytes plus 12).
pub const MAX_KEY_LEN: usize = 52;

/// Shortest key [`Toeplitz`] accepts, in bytes: one 32-bit window.
pub const MIN_KEY_LEN: usize = 4;

/// 32 key bits starting at bit `p` counted from the most significant bit of byte 0; bits past the
/// end of the key are 0.
const fn key_window(key: &[u8], p: usize) -> u32 {
    // Five bytes from byte p/8: the window starts p%8 bits below the top of these 40 bits.
    let mut acc: u64 = 0;
    let mut n = 0;
    while n < 5 {
        let i = p / 8 + n;
        let b = if i < key.len() { key[i] } else { 0 };
        acc = (acc << 8) | b as u64;
        n += 1;
    }
    (acc >> (8 - p % 8)) as u32
}

#[derive(Clone)]
#[repr(C, align(64))]
struct Tables([[u32; 256]; MAX_KEY_LEN]);

/// Fills the tables for `key` (whose length is already checked).
const fn fill_tables(t: &mut [[u32; 256]; MAX_KEY_LEN], key: &[u8]) {
    let mut row = 0;
    while row < MAX_KEY_LEN {
        t[row][0] = 0;
        let mut v = 1usize;
        while v < 256 {
            // The lowest set bit of v is input bit 7 - tz within the byte (bit 0 = MSB).
            let msb_index = 7 - v.trailing_zeros() as usize;
            t[row][v] = t[row][v & (v - 1)] ^ key_window(key, 8 * row + msb_index);
            v += 1;
        }
        row += 1;
    }
}

const fn check_key_len(len: usize) -> Result<(), RssError> {
    if len < MIN_KEY_LEN || len > MAX_KEY_LEN {
        Err(RssError::KeyLength {
            len,
            min: MIN_KEY_LEN,
            max: MAX_KEY_LEN,
        })
    } else {
        Ok(())
    }
}

/// Table-driven Toeplitz hash for one key: one lookup per input byte.
///
/// It holds 52 KiB of tables. [`Toeplitz::new`] is a `const fn`, so a hasher for a fixed key can be
/// a `static`; [`Toeplitz::rekey`] rebuilds one in place.
#[derive(Clone)]
pub struct Toeplitz {
    tables: Tables,
    key: [u8; MAX_KEY_LEN],
    key_len: usize,
}

impl Toeplitz {
    /// Precomputes the tables for `key` (4 to 52 bytes; 40 is the usual length).
    ///
    /// # Errors
    ///
    /// [`RssError::KeyLength`] for a key shorter than [`MIN_KEY_LEN`] or longer than
    /// [`MAX_KEY_LEN`].
    pub const fn new(key: &[u8]) -> Result<Self, RssError> {
        if let Err(e) = check_key_len(key.len()) {
            return Err(e);
        }
        let mut stored = [0u8; MAX_KEY_LEN];
        let mut i = 0;
        while i < key.len() {
            stored[i] = key[i];
            i += 1;
        }
        let mut tables = Tables([[0; 256]; MAX_KEY_LEN]);
        fill_tables(&mut tables.0, key);
        Ok(Self {
            tables,
            key: stored,
            key_len: key.len(),
        })
    }

    /// Rebuilds the tables for another key, in place.
    ///
    /// # Errors
    ///
    /// [`RssError::KeyLength`] as for [`Toeplitz::new`]; the hasher is then unchanged.
    pub fn rekey(&mut self, key: &[u8]) -> Result<(), RssError> {
        check_key_len(key.len())?;
        self.key = [0; MAX_KEY_LEN];
        for (d, s) in self.key.iter_mut().zip(key) {
            *d = *s;
        }
        self.key_len = key.len();
        fill_tables(&mut self.tables.0, key);
        Ok(())
    }

    /// The key the tables were built for.
    #[must_use]
    pub fn key(&self) -> &[u8] {
        self.key.get(..self.key_len).unwrap_or(&self.key)
    }

    /// The hash of `input`, any length (bytes past the key's length contribute nothing).
    #[inline]
    #[must_use]
    pub fn hash(&self, input: &[u8]) -> u32 {
        self.tables
            .0
            .iter()
            .zip(input)
            .fold(0, |h, (row, &b)| h ^ row[usize::from(b)])
    }

    #[inline(always)]
    fn hash_array<const N: usize>(&self, input: &[u8; N]) -> u32 {
        // Two accumulators halve the XOR dependency chain; with N known the loop unrolls.
        let mut a = 0;
        let mut b = 0;
        let mut rows = self.tables.0.iter().zip(input);
        while let Some((row, &x)) = rows.next() {
            a ^= row[usize::from(x)];
            if let Some((row, &y)) = rows.next() {
                b ^= row[usize::from(y)];
            }
        }
        a ^ b
    }

    /// Toeplitz over the IPv4 2-tuple (source and destination address, 8 bytes).
    #[inline]
    #[must_use]
    pub fn hash_ipv4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u32 {
        self.hash_array(&ipv4_input(src, dst))
    }

    /// Toeplitz over the IPv4 4-tuple (addresses, then source and destination port, 12 bytes).
    #[inline]
    #[must_use]
    pub fn hash_ipv4_ports(&self, src: Ipv4Addr, dst: Ipv4Addr, src_port: u16, dst_port: u16) -> u32 {
        self.hash_array(&ipv4_ports_input(src, dst, src_port, dst_port))
    }

    /// Toeplitz over the IPv6 2-tuple (source and destination address, 32 bytes).
    #[inline]
    #[must_use]
    pub fn hash_ipv6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> u32 {
        self.hash_array(&ipv6_input(src, dst))
    }

    /// Toeplitz over the IPv6 4-tuple (addresses, then source and destination port, 36 bytes).
    #[inline]
    #[must_use]
    pub fn hash_ipv6_ports(&self, src: Ipv6Addr, dst: Ipv6Addr, src_port: u16, dst_port: u16) -> u32 {
        self.hash_array(&ipv6_ports_input(src, dst, src_port, dst_port))
    }
}

impl core::fmt::Debug for Toeplitz {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Toeplitz")
            .field("key", &self.key())
            .finish_non_exhaustive()
    }
}

/// The 8-byte Toeplitz input of an IPv4 2-tuple.
#[must_use]
pub const fn ipv4_input(src: Ipv4Addr, dst: Ipv4Addr) -> [u8; 8] {
    let s = src.octets();
    let d = dst.octets();
    [s[0], s[1], s[2], s[3], d[0], d[1], d[2], d[3]]
}

/// The 12-byte Toeplitz input of an IPv4 4-tuple.
#[must_use]
pub const fn ipv4_ports_input(src: Ipv4Addr, dst: Ipv4Addr, src_port: u16, dst_port: u16) -> [u8; 12] {
    let s = src.octets();
    let d = dst.octets();
    let sp = src_port.to_be_bytes();
    let dp = dst_port.to_be_bytes();
    [
        s[0], s[1], s[2], s[3], d[0], d[1], d[2], d[3], sp[0], sp[1], dp[0], dp[1],
    ]
}

/// The 32-byte Toeplitz input of an IPv6 2-tuple.
#[must_use]
pub const fn ipv6_input(src: Ipv6Addr, dst: Ipv6Addr) -> [u8; 32] {
    let s = src.octets();
    let d = dst.octets();
    let mut out = [0u8; 32];
    let mut i = 0;
    while i < 16 {
        out[i] = s[i];
        out[16 + i] = d[i];
        i += 1;
    }
    out
}

/// The 36-byte Toeplitz input of an IPv6 4-tuple.
#[must_use]
pub const fn ipv6_ports_input(src: Ipv6Addr, dst: Ipv6Addr, src_port: u16, dst_port: u16) -> [u8; 36] {
    let two = ipv6_input(src, dst);
    let sp = src_port.to_be_bytes();
    let dp = dst_port.to_be_bytes();
    let mut out = [0u8; 36];
    let mut i = 0;
    while i < 32 {
        out[i] = two[i];
        i += 1;
    }
    out[32] = sp[0];
    out[33] = sp[1];
    out[34] = dp[0];
    out[35] = dp[1];
    out
}

/// Toeplitz of `input` under `key` (any lengths), one input bit at a time, straight from the
/// definition; key bits past the end of the key are 0. For tests.
#[must_use]
pub fn toeplitz_reference(key: &[u8], input: &[u8]) -> u32 {
    let key_bit = |p: usize| -> u32 { key.get(p / 8).map_or(0, |b| u32::from(b >> (7 - p % 8)) & 1) };
    let mut hash = 0;
    for (i, byte) in input.iter().enumerate() {
        for b in 0..8 {
            if (byte >> (7 - b)) & 1 == 1 {
                let p = 8 * i + b;
                let mut window = 0u32;
                for t in 0..32 {
                    window = (window << 1) | key_bit(p + t);
                }
                hash ^= window;
            }
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rss::RssKey;

    #[test]
    #[cfg_attr(miri, ignore = "plain values only; slow under Miri")]
    fn first_microsoft_vector() {
        let t = Toeplitz::new(RssKey::MICROSOFT.as_bytes()).unwrap();
        let (s, d) = (Ipv4Addr::new(66, 9, 149, 187), Ipv4Addr::new(161, 142, 100, 80));
        assert_eq!(t.hash_ipv4(s, d), 0x323e8fc2);
        assert_eq!(t.hash_ipv4_ports(s, d, 2794, 1766), 0x51ccc178);
        assert_eq!(
            toeplitz_reference(RssKey::MICROSOFT.as_bytes(), &ipv4_ports_input(s, d, 2794, 1766)),
            0x51ccc178
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "plain values only; slow under Miri")]
    fn key_length_limits() {
        assert!(Toeplitz::new(&[1; 3]).is_err());
        assert!(Toeplitz::new(&[1; 4]).is_ok());
        assert!(Toeplitz::new(&[1; 52]).is_ok());
        assert_eq!(
            Toeplitz::new(&[1; 53]).err(),
            Some(RssError::KeyLength {
                len: 53,
                min: 4,
                max: 52
            })
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "plain values only; slow under Miri")]
    fn rekey_rejects_without_change() {
        let mut t = Toeplitz::new(RssKey::MICROSOFT.as_bytes()).unwrap();
        assert!(t.rekey(&[0; 60]).is_err());
        assert_eq!(t.key(), RssKey::MICROSOFT.as_bytes());
        t.rekey(&[0xFF; 8]).unwrap();
        assert_eq!(t.key(), &[0xFF; 8]);
        assert_eq!(t.hash(&[0x80]), 0xFFFF_FFFF);
        // Past the key, only zeros: the last byte's window holds 1 key bit at most.
        assert_eq!(t.hash(&[0, 0, 0, 0, 0, 0, 0, 0x01]), 0x8000_0000);
        assert_eq!(t.hash(&[0, 0, 0, 0, 0, 0, 0, 0, 0xFF]), 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "plain values only; slow under Miri")]
    fn long_input_matches_reference() {
        let t = Toeplitz::new(RssKey::MICROSOFT.as_bytes()).unwrap();
        let input = [0xA5u8; 70];
        assert_eq!(
            t.hash(&input),
            toeplitz_reference(RssKey::MICROSOFT.as_bytes(), &input)
        );
    }
}

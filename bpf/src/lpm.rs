//! Longest-prefix matching for `BPF_MAP_TYPE_LPM_TRIE`, on top of the map's hash table.
//!
//! A key is `struct bpf_lpm_trie_key`: a 32-bit prefix length in the machine's byte order, then
//! `key_size - 4` bytes of data whose bits count from the most significant bit of the first
//! byte (network order). An entry is identified by its prefix length and the first that many
//! bits of its data; the hash table holds each entry under its key with the bits past the
//! prefix cleared, so an exact match is one probe. A lookup tries the prefix lengths that have
//! entries, longest first, from the lookup key's own prefix length down: the first hit is the
//! longest matching prefix, as the kernel's trie finds it.

use alloc::vec;
use alloc::vec::Vec;

use crate::hashtab::HashTable;

/// Bytes of the prefix length field in front of the data.
pub const PREFIX_FIELD: usize = 4;
/// Most data bytes a key may have (the kernel's `LPM_DATA_SIZE_MAX`).
pub const MAX_DATA: usize = 256;
/// `BPF_F_NO_PREALLOC`: the kernel creates LPM tries only with this flag.
pub const NO_PREALLOC: u32 = 1;

/// The prefix bookkeeping of one trie.
#[derive(Clone, Debug)]
pub struct Lpm {
    /// Most bits a prefix may have (`8 * data bytes`).
    bits: u32,
    /// Entries per prefix length (`0..=bits`).
    counts: Vec<u32>,
    /// A key with the bits past its prefix cleared (kept to avoid allocating during runs).
    buf: Vec<u8>,
}

impl Lpm {
    /// The bookkeeping for `key_size`-byte keys (checked by the caller: 5..=260).
    #[must_use]
    pub fn new(key_size: usize) -> Self {
        let bits = (8 * key_size.saturating_sub(PREFIX_FIELD)) as u32;
        Self {
            bits,
            counts: vec![0; bits as usize + 1],
            buf: vec![0; key_size],
        }
    }

    /// The prefix length a key names.
    #[must_use]
    pub fn prefix_len(key: &[u8]) -> u32 {
        match key.get(..PREFIX_FIELD) {
            Some(p) => u32::from_le_bytes([p[0], p[1], p[2], p[3]]),
            None => u32::MAX,
        }
    }

    /// `key` with its prefix length set to `len` and the data bits past `len` cleared, or `None`
    /// when the key's length is wrong or its prefix is longer than the data.
    fn masked(&mut self, key: &[u8], len: u32) -> Option<&[u8]> {
        mask_into(&mut self.buf, key, len, self.bits).then_some(&self.buf[..])
    }

    /// The key an entry is stored under (its own prefix length), or `None` for a prefix length
    /// beyond the data (the kernel's -EINVAL).
    pub fn entry_key(&mut self, key: &[u8]) -> Option<&[u8]> {
        self.masked(key, Self::prefix_len(key))
    }

    /// [`Lpm::entry_key`] in a new buffer (for the host side, which may allocate).
    #[must_use]
    pub fn entry_key_owned(&self, key: &[u8]) -> Option<Vec<u8>> {
        let mut buf = vec![0; self.buf.len()];
        mask_into(&mut buf, key, Self::prefix_len(key), self.bits).then_some(buf)
    }

    /// Counts an entry of prefix length `len` as added (`true`) or removed.
    pub fn count(&mut self, len: u32, added: bool) {
        if let Some(c) = self.counts.get_mut(len as usize) {
            *c = if added {
                c.saturating_add(1)
            } else {
                c.saturating_sub(1)
            };
        }
    }

    /// The slot of the longest prefix in `table` that matches `key`: an entry whose prefix
    /// length is at most the key's and whose bits agree with the key's data over that length.
    pub fn longest(&mut self, table: &HashTable, key: &[u8]) -> Option<u32> {
        let top = Self::prefix_len(key);
        if top > self.bits {
            return None;
        }
        for len in (0..=top).rev() {
            if self.counts.get(len as usize).copied().unwrap_or(0) == 0 {
                continue;
            }
            if let Some(s) = self.masked(key, len).and_then(|k| table.peek(k)) {
                return Some(s);
            }
        }
        None
    }
}

/// Writes `key` into `buf` with prefix length `len` and the data bits past it cleared; false
/// when the sizes differ or `len` exceeds `bits`.
fn mask_into(buf: &mut [u8], key: &[u8], len: u32, bits: u32) -> bool {
    if key.len() != buf.len() || key.len() < PREFIX_FIELD || len > bits {
        return false;
    }
    buf.copy_from_slice(key);
    buf[..PREFIX_FIELD].copy_from_slice(&len.to_le_bytes());
    let data = &mut buf[PREFIX_FIELD..];
    let (whole, rest) = ((len / 8) as usize, len % 8);
    if let Some(b) = data.get_mut(whole) {
        *b = if rest > 0 { *b & (0xff << (8 - rest)) } else { 0 };
    }
    data.iter_mut().skip(whole + 1).for_each(|b| *b = 0);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(len: u32, data: [u8; 4]) -> [u8; 8] {
        let mut k = [0; 8];
        k[..4].copy_from_slice(&len.to_le_bytes());
        k[4..].copy_from_slice(&data);
        k
    }

    #[test]
    fn entries_are_kept_under_their_masked_prefix() {
        let mut l = Lpm::new(8);
        assert_eq!(
            l.entry_key(&key(20, [10, 1, 255, 7])).unwrap(),
            key(20, [10, 1, 240, 0])
        );
        assert_eq!(
            l.entry_key(&key(32, [1, 2, 3, 4])).unwrap(),
            key(32, [1, 2, 3, 4])
        );
        assert_eq!(l.entry_key(&key(0, [1, 2, 3, 4])).unwrap(), key(0, [0; 4]));
        assert!(l.entry_key(&key(33, [0; 4])).is_none());
        assert!(l.entry_key(&[0; 5]).is_none());
    }

    #[test]
    fn the_longest_matching_prefix_wins() {
        let mut l = Lpm::new(8);
        let mut t = HashTable::new(8, 8, false);
        for (len, data) in [(8, [10, 0, 0, 0]), (16, [10, 1, 0, 0]), (0, [0; 4])] {
            let k = l.entry_key(&key(len, data)).unwrap().to_vec();
            t.insert(&k);
            l.count(len, true);
        }
        let slot = |l: &mut Lpm, len, d| l.longest(&t, &key(len, d));
        assert_eq!(slot(&mut l, 32, [10, 1, 2, 3]), Some(1));
        assert_eq!(slot(&mut l, 32, [10, 2, 2, 3]), Some(0));
        assert_eq!(slot(&mut l, 32, [11, 0, 0, 0]), Some(2));
        // A lookup key's own prefix length caps the entries it can match.
        assert_eq!(slot(&mut l, 12, [10, 1, 2, 3]), Some(0));
        assert_eq!(slot(&mut l, 33, [10, 1, 2, 3]), None);
    }
}

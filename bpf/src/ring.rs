//! The producer side of `BPF_MAP_TYPE_RINGBUF`: records reserved in the map's data area, written
//! by the program in place, then submitted (handed to the host, [`crate::Host::output`]) or
//! discarded.
//!
//! Positions count bytes from the ring's creation, as the kernel's do: a record takes an 8-byte
//! header and its data rounded up to 8 bytes, at `producer % size`. The engine's consumer is the
//! host, which takes every record when it is committed: the consumer position follows the
//! oldest record still reserved, or the producer when none is. Unlike the kernel, whose data
//! area is mapped twice so that a record may run across its end, a record that would not fit
//! before the end starts again at the beginning, the bytes skipped counting as consumed.

use alloc::vec::Vec;

/// Bytes of a record's header (the kernel's `BPF_RINGBUF_HDR_SZ`).
pub const HEADER: u64 = 8;
/// Smallest data area the kernel accepts (one page).
pub const PAGE: u32 = 4096;

/// `bpf_ringbuf_query` flags.
pub mod query {
    #![allow(missing_docs)]
    pub const AVAIL_DATA: u64 = 0;
    pub const RING_SIZE: u64 = 1;
    pub const CONS_POS: u64 = 2;
    pub const PROD_POS: u64 = 3;
}

/// A reserved record: where its data starts in the data area, its data bytes, its start
/// position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Reserved {
    data: u32,
    len: u32,
    pos: u64,
}

/// The positions and reservations of one ring.
#[derive(Clone, Debug, Default)]
pub struct Ring {
    size: u64,
    prod: u64,
    cons: u64,
    reserved: Vec<Reserved>,
}

impl Ring {
    /// A ring of `size` bytes (a power of two, checked by the caller).
    #[must_use]
    pub fn new(size: u32) -> Self {
        Self {
            size: u64::from(size),
            ..Self::default()
        }
    }

    /// Reserves `len` data bytes: the offset of the data in the data area, or `None` when the
    /// ring has no room (the kernel's NULL).
    pub fn reserve(&mut self, len: u64) -> Option<u32> {
        let total = len.checked_add(HEADER)?.checked_next_multiple_of(8)?;
        if total > self.size {
            return None;
        }
        let mut at = self.prod % self.size;
        let skip = if at + total > self.size { self.size - at } else { 0 };
        if self.prod + skip + total - self.cons > self.size {
            return None;
        }
        if skip > 0 {
            self.prod += skip;
            at = 0;
            if self.reserved.is_empty() {
                self.cons = self.prod;
            }
        }
        let r = Reserved {
            data: u32::try_from(at + HEADER).ok()?,
            len: u32::try_from(len).ok()?,
            pos: self.prod,
        };
        self.reserved.push(r);
        self.prod += total;
        Some(r.data)
    }

    /// Commits (submits or discards) the record whose data starts at `data`: its data range,
    /// or `None` when no record reserved and not yet committed starts there.
    pub fn commit(&mut self, data: u32) -> Option<core::ops::Range<usize>> {
        let i = self.reserved.iter().position(|r| r.data == data)?;
        let r = self.reserved.remove(i);
        self.cons = self.reserved.iter().map(|r| r.pos).min().unwrap_or(self.prod);
        Some(r.data as usize..r.data as usize + r.len as usize)
    }

    /// Commits every record still reserved (a run that ended without doing so): discarded.
    pub fn release_all(&mut self) {
        self.reserved.clear();
        self.cons = self.prod;
    }

    /// Whether `n` bytes at offset `o` of the data area lie in one reserved record's data.
    #[must_use]
    pub fn covers(&self, o: u32, n: usize) -> bool {
        let end = u64::from(o) + n as u64;
        self.reserved
            .iter()
            .any(|r| o >= r.data && end <= u64::from(r.data) + u64::from(r.len))
    }

    /// `bpf_ringbuf_query`: 0 for a flag it does not know, as the kernel.
    #[must_use]
    pub fn query(&self, flag: u64) -> u64 {
        match flag {
            query::AVAIL_DATA => self.prod - self.cons,
            query::RING_SIZE => self.size,
            query::CONS_POS => self.cons,
            query::PROD_POS => self.prod,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_reserved_committed_and_wrap_to_the_start() {
        let mut r = Ring::new(64);
        let a = r.reserve(10).unwrap();
        assert_eq!(a, 8);
        assert_eq!(r.query(query::PROD_POS), 24);
        assert!(r.covers(8, 10) && !r.covers(8, 11) && !r.covers(0, 1));
        let b = r.reserve(20).unwrap();
        assert_eq!(b, 32);
        assert_eq!(r.query(query::AVAIL_DATA), 56);
        // No room for another 8 + 8 bytes while both are held.
        assert_eq!(r.reserve(8), None);
        assert_eq!(r.commit(b), Some(32..52));
        assert_eq!(r.query(query::CONS_POS), 0);
        assert_eq!(r.commit(a), Some(8..18));
        assert_eq!(r.commit(a), None);
        assert_eq!(r.query(query::AVAIL_DATA), 0);
        // 56 + 16 > 64: the record starts again at 0.
        assert_eq!(r.reserve(8), Some(8));
        assert_eq!(r.query(query::PROD_POS), 80);
        assert_eq!(r.reserve(64), None);
        // Sizes that would overflow a position are no room, not a panic.
        for huge in [u64::MAX, u64::MAX - 8, u64::MAX - 15, 1 << 63] {
            assert_eq!(r.reserve(huge), None);
        }
        r.release_all();
        assert_eq!(r.query(query::AVAIL_DATA), 0);
        assert_eq!(r.query(query::RING_SIZE), 64);
    }
}

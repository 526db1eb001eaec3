//! A fixed-capacity hash table of byte-string keys for the hash map types: slots allocated once
//! at load (no allocation while a program runs), an open-addressing index with linear probing and
//! backward-shift deletion, and an optional least-recently-used list for the LRU map types.

use alloc::vec;
use alloc::vec::Vec;

/// No slot / end of a list.
const NIL: u32 = u32::MAX;

/// FNV-1a over the key bytes.
fn hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Recency order of the live slots: most recent at the head.
#[derive(Clone, Debug)]
struct Lru {
    prev: Vec<u32>,
    next: Vec<u32>,
    head: u32,
    tail: u32,
}

impl Lru {
    fn new(cap: usize) -> Self {
        Self {
            prev: vec![NIL; cap],
            next: vec![NIL; cap],
            head: NIL,
            tail: NIL,
        }
    }

    fn unlink(&mut self, s: u32) {
        let (p, n) = (self.prev[s as usize], self.next[s as usize]);
        if p == NIL {
            self.head = n;
        } else {
            self.next[p as usize] = n;
        }
        if n == NIL {
            self.tail = p;
        } else {
            self.prev[n as usize] = p;
        }
        self.prev[s as usize] = NIL;
        self.next[s as usize] = NIL;
    }

    fn push_front(&mut self, s: u32) {
        self.prev[s as usize] = NIL;
        self.next[s as usize] = self.head;
        if self.head == NIL {
            self.tail = s;
        } else {
            self.prev[self.head as usize] = s;
        }
        self.head = s;
    }
}

/// The table. Slots are numbered `0..capacity`; a slot's value lives in the map's value storage.
#[derive(Clone, Debug)]
pub struct HashTable {
    key_size: usize,
    keys: Vec<u8>,
    used: Vec<bool>,
    free: Vec<u32>,
    index: Vec<u32>,
    mask: usize,
    len: usize,
    lru: Option<Lru>,
}

/// What an insertion did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    /// The key was there already, in this slot.
    Existing(u32),
    /// A free slot was taken.
    New(u32),
    /// The least recently used entry was evicted to make room (LRU tables only).
    Evicted(u32),
}

impl HashTable {
    /// An empty table of `capacity` slots of `key_size`-byte keys.
    #[must_use]
    pub fn new(key_size: usize, capacity: usize, lru: bool) -> Self {
        // Callers keep `footprint` within their limit, so this neither overflows nor saturates.
        let index_len = capacity.max(4).saturating_mul(2).next_power_of_two();
        Self {
            key_size,
            keys: vec![0; key_size * capacity],
            used: vec![false; capacity],
            // Popped from the end: slot 0 first.
            free: (0..capacity as u32).rev().collect(),
            index: vec![NIL; index_len],
            mask: index_len - 1,
            len: 0,
            lru: lru.then(|| Lru::new(capacity)),
        }
    }

    /// Bytes this table allocates for `capacity` slots (for the load-time memory limit).
    #[must_use]
    pub fn footprint(key_size: usize, capacity: usize) -> usize {
        // Saturating: a hostile definition must fail the limit, not overflow past it.
        let index_len = capacity
            .max(4)
            .saturating_mul(2)
            .checked_next_power_of_two()
            .unwrap_or(usize::MAX);
        key_size
            .saturating_mul(capacity)
            .saturating_add(capacity.saturating_mul(13))
            .saturating_add(index_len.saturating_mul(4))
    }

    /// Live entries.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// The key stored in `slot`.
    pub fn key(&self, slot: u32) -> &[u8] {
        let s = slot as usize * self.key_size;
        &self.keys[s..s + self.key_size]
    }

    /// Index position holding `key`'s slot, or the empty position where it would go.
    fn probe(&self, key: &[u8]) -> (usize, Option<u32>) {
        let mut i = hash(key) as usize & self.mask;
        loop {
            let s = self.index[i];
            if s == NIL {
                return (i, None);
            }
            if self.key(s) == key {
                return (i, Some(s));
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The slot of `key`; an LRU table marks it as just used.
    pub fn find(&mut self, key: &[u8]) -> Option<u32> {
        if key.len() != self.key_size {
            return None;
        }
        let (_, s) = self.probe(key);
        if let (Some(s), Some(l)) = (s, self.lru.as_mut()) {
            l.unlink(s);
            l.push_front(s);
        }
        s
    }

    /// The slot of `key`, without touching the LRU order (for host-side reads).
    #[must_use]
    pub fn peek(&self, key: &[u8]) -> Option<u32> {
        if key.len() != self.key_size {
            return None;
        }
        self.probe(key).1
    }

    /// Inserts `key` (or finds it); `None` if the table is full and is no LRU table.
    pub fn insert(&mut self, key: &[u8]) -> Option<Inserted> {
        if key.len() != self.key_size {
            return None;
        }
        if let Some(s) = self.find(key) {
            return Some(Inserted::Existing(s));
        }
        let (slot, evicted) = match self.free.pop() {
            Some(s) => (s, false),
            None => {
                let victim = self.lru.as_ref().map(|l| l.tail).filter(|&t| t != NIL)?;
                let old: Vec<u8> = self.key(victim).to_vec();
                self.remove(&old);
                (self.free.pop()?, true)
            }
        };
        let s = slot as usize * self.key_size;
        self.keys[s..s + self.key_size].copy_from_slice(key);
        self.used[slot as usize] = true;
        let (pos, _) = self.probe(key);
        self.index[pos] = slot;
        self.len += 1;
        if let Some(l) = self.lru.as_mut() {
            l.push_front(slot);
        }
        Some(if evicted {
            Inserted::Evicted(slot)
        } else {
            Inserted::New(slot)
        })
    }

    /// Removes `key`; returns the slot it had.
    pub fn remove(&mut self, key: &[u8]) -> Option<u32> {
        if key.len() != self.key_size {
            return None;
        }
        let (mut hole, slot) = self.probe(key);
        let slot = slot?;
        self.index[hole] = NIL;
        // Backward shift: pull later entries of the run into the hole when their home allows.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let s = self.index[j];
            if s == NIL {
                break;
            }
            let home = hash(self.key(s)) as usize & self.mask;
            let between = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !between {
                self.index[hole] = s;
                self.index[j] = NIL;
                hole = j;
            }
        }
        self.used[slot as usize] = false;
        self.free.push(slot);
        self.len -= 1;
        if let Some(l) = self.lru.as_mut() {
            l.unlink(slot);
        }
        Some(slot)
    }

    /// Live entries: (slot, key).
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        self.used
            .iter()
            .enumerate()
            .filter(|(_, u)| **u)
            .map(|(s, _)| (s as u32, self.key(s as u32)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_find_remove_and_full() {
        let mut t = HashTable::new(4, 3, false);
        assert_eq!(t.insert(&1u32.to_le_bytes()), Some(Inserted::New(0)));
        assert_eq!(t.insert(&2u32.to_le_bytes()), Some(Inserted::New(1)));
        assert_eq!(t.insert(&1u32.to_le_bytes()), Some(Inserted::Existing(0)));
        assert_eq!(t.insert(&3u32.to_le_bytes()), Some(Inserted::New(2)));
        assert_eq!(t.insert(&4u32.to_le_bytes()), None);
        assert_eq!(t.remove(&2u32.to_le_bytes()), Some(1));
        assert_eq!(t.remove(&2u32.to_le_bytes()), None);
        assert_eq!(t.find(&3u32.to_le_bytes()), Some(2));
        assert_eq!(t.insert(&4u32.to_le_bytes()), Some(Inserted::New(1)));
        assert_eq!(t.len(), 3);
        assert_eq!(t.find(&[0u8; 3]), None);
    }

    #[test]
    fn lru_evicts_the_least_recently_used() {
        let mut t = HashTable::new(1, 2, true);
        t.insert(&[1]);
        t.insert(&[2]);
        t.find(&[1]);
        assert_eq!(t.insert(&[3]), Some(Inserted::Evicted(1)));
        assert_eq!(t.peek(&[2]), None);
        assert!(t.peek(&[1]).is_some() && t.peek(&[3]).is_some());
    }

    #[test]
    fn many_keys_with_deletes_stay_consistent() {
        let mut t = HashTable::new(2, 500, false);
        let mut live = std::collections::BTreeMap::new();
        let mut x: u32 = 7;
        for _ in 0..20_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let k = ((x >> 8) % 700) as u16;
            if x & 1 == 0 {
                if let Some(r) = t.insert(&k.to_le_bytes()) {
                    let s = match r {
                        Inserted::New(s) | Inserted::Existing(s) | Inserted::Evicted(s) => s,
                    };
                    live.insert(k, s);
                } else {
                    assert_eq!(live.len(), 500);
                }
            } else {
                assert_eq!(t.remove(&k.to_le_bytes()), live.remove(&k));
            }
            assert_eq!(t.len(), live.len());
        }
        for (k, s) in &live {
            assert_eq!(t.peek(&k.to_le_bytes()), Some(*s));
        }
    }
}

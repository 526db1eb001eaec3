//! The indirection table and key of one PCI function, with ethtool `-X` / `-x` semantics, and their
//! programming and read-back through the shell BAR (hardware.md §9.1, §9.2).
//!
//! [`RssConfig`] validates every request completely before it changes anything: a refused request
//! leaves table, key, queue count and pending writes as they were. (The C driver checks each entry
//! just before writing it, so a bad entry `k` leaves entries `0..k` already written,
//! hardware.md §9.2; here nothing reaches the registers unless the whole request is valid.)
//! [`Rss`] is the one owner of a brought-up function's state: it tries each change on a copy,
//! writes it, then keeps it. The register layer (crate private, written through [`Rss`], read
//! back through [`crate::Device::rss_read_back`]) follows hardware.md §9.2: 128 table entries
//! from entry 0 up, each written as the plain queue index, then the 10 key words from word 0 up;
//! reads in the same order, table entries masked with 0xFFFF because the RTL leaves the upper half
//! stale.

use onic_hal::regs::shell::{self, HASH_KEY_WORDS, INDIR_ENTRY_MASK};
use onic_hal::{FunctionId, QueueId, RegisterAccess, RegisterWindow};

use crate::rss::{RssError, RssKey, TABLE_INDEX_MASK, TABLE_LEN};

mod owner;
pub use owner::Rss;

/// The 128-entry indirection table of one function: entry `hash & 0x7F` is the function-relative
/// RX queue of a frame (hardware.md §9.4). The entries are the plain numbers ethtool and the
/// registers exchange; [`IndirectionTable::queue_for`] gives one as a [`QueueId`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct IndirectionTable([u16; TABLE_LEN]);

impl IndirectionTable {
    /// Every entry 0: the RTL reset value (every flow to queue 0).
    pub const ZERO: IndirectionTable = IndirectionTable([0; TABLE_LEN]);

    /// Entry `k` = `k % n` (ethtool's default and `equal n`). `n` = 0 gives [`IndirectionTable::ZERO`].
    #[must_use]
    pub const fn round_robin(n: u16) -> Self {
        let mut e = [0u16; TABLE_LEN];
        if n == 0 {
            return Self(e);
        }
        let mut k = 0;
        while k < TABLE_LEN {
            e[k] = (k % n as usize) as u16;
            k += 1;
        }
        Self(e)
    }

    /// A table from a slice of exactly 128 entries, unchecked against any queue count.
    ///
    /// # Errors
    ///
    /// [`RssError::TableLength`] for any other length.
    pub fn from_slice(entries: &[u16]) -> Result<Self, RssError> {
        <[u16; TABLE_LEN]>::try_from(entries)
            .map(Self)
            .map_err(|_| RssError::TableLength { len: entries.len() })
    }

    /// The table `ethtool -X weight w0 w1 ...` builds: queue `j` gets a share of the 128 entries
    /// proportional to `weights[j]`, in contiguous runs from queue 0 up. Entry `i` goes to the
    /// first queue `j` with `i < 128 * (w0 + ... + wj) / sum` (integer division), as ethtool fills it.
    ///
    /// # Errors
    ///
    /// [`RssError::WeightsAllZero`] when the weights sum to 0 (or none are given),
    /// [`RssError::WeightSumTooLarge`] when they sum to more than 128 (ethtool's limit).
    pub(crate) fn weighted(weights: &[u32]) -> Result<Self, RssError> {
        let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        if sum == 0 {
            return Err(RssError::WeightsAllZero);
        }
        if sum > TABLE_LEN as u64 {
            return Err(RssError::WeightSumTooLarge { sum });
        }
        let size = TABLE_LEN as u64;
        let mut entries = [0u16; TABLE_LEN];
        // `next` is the index of the next weight to take; queue `next - 1` owns entries below
        // `size * partial / sum`.
        let mut next = 0usize;
        let mut partial = 0u64;
        for (i, entry) in (0u64..).zip(entries.iter_mut()) {
            while i >= size * partial / sum {
                let Some(&w) = weights.get(next) else { break };
                partial += u64::from(w);
                next += 1;
            }
            // A queue index past u16 cannot be valid for any function; saturate so validation
            // against the queue count refuses it.
            *entry = u16::try_from(next.saturating_sub(1)).unwrap_or(u16::MAX);
        }
        Ok(Self(entries))
    }

    /// The entries, entry 0 first.
    #[must_use]
    pub const fn entries(&self) -> &[u16; TABLE_LEN] {
        &self.0
    }

    /// The function-relative queue of a frame with this hash: entry `hash & 0x7F`.
    #[inline]
    #[must_use]
    pub const fn queue_for(&self, hash: u32) -> QueueId {
        QueueId::new(self.0[(hash & TABLE_INDEX_MASK) as usize])
    }

    /// The highest queue index in the table.
    #[must_use]
    pub(crate) fn max_entry(&self) -> u16 {
        self.0.iter().copied().max().unwrap_or(0)
    }

    /// Checks that every entry names one of `rx_queues` queues.
    ///
    /// # Errors
    ///
    /// [`RssError::QueueOutOfRange`] for the first entry that does not.
    pub(crate) fn check_queues(&self, rx_queues: u16) -> Result<(), RssError> {
        match self.0.iter().position(|&q| q >= rx_queues) {
            None => Ok(()),
            Some(index) => Err(RssError::QueueOutOfRange {
                index,
                queue: self.0[index],
                rx_queues,
            }),
        }
    }
}

impl Default for IndirectionTable {
    /// The RTL reset value, [`IndirectionTable::ZERO`].
    fn default() -> Self {
        Self::ZERO
    }
}

/// The `hfunc` argument of an ethtool RSS request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HashFunction {
    /// Keep the hash function (`ETH_RSS_HASH_NO_CHANGE`, 0).
    NoChange,
    /// Toeplitz (`ETH_RSS_HASH_TOP`, bit 0). The shell's hash is a Toeplitz-like XOR hash, not
    /// standard Toeplitz (hardware.md §9.4), but it is what the driver reports.
    Toeplitz,
    /// Any other ethtool `hfunc` bits (XOR, CRC32, ...): refused.
    Other(u8),
}

impl HashFunction {
    /// ethtool's `ETH_RSS_HASH_TOP` bit.
    pub const ETH_RSS_HASH_TOP: u8 = 1 << 0;

    /// From ethtool's `hfunc` bits: 0 is "no change", `ETH_RSS_HASH_TOP` is Toeplitz.
    #[must_use]
    pub const fn from_ethtool(hfunc: u8) -> Self {
        match hfunc {
            0 => Self::NoChange,
            Self::ETH_RSS_HASH_TOP => Self::Toeplitz,
            other => Self::Other(other),
        }
    }
}

/// Which parts of the RSS state a request touched or a programming step writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RssParts {
    /// The 128 indirection entries.
    pub table: bool,
    /// The 10 key words.
    pub key: bool,
}

impl RssParts {
    /// Nothing.
    pub const NONE: RssParts = RssParts {
        table: false,
        key: false,
    };
    /// The table only.
    pub const TABLE: RssParts = RssParts {
        table: true,
        key: false,
    };
    /// The key only.
    pub const KEY: RssParts = RssParts {
        table: false,
        key: true,
    };
    /// Table and key.
    pub const ALL: RssParts = RssParts {
        table: true,
        key: true,
    };

    /// The parts in `self` or in `other`.
    #[must_use]
    pub const fn union(self, other: RssParts) -> RssParts {
        RssParts {
            table: self.table || other.table,
            key: self.key || other.key,
        }
    }

    /// Whether no part is named.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        !self.table && !self.key
    }
}

/// Writes the 128 entries of function `func`, entry 0 first, each as the plain queue index.
pub(crate) fn write_table<W: RegisterWindow + ?Sized>(shell: &W, func: FunctionId, table: &IndirectionTable) {
    for (k, &q) in table.entries().iter().enumerate() {
        shell.write(shell::indir_table(func, k), u32::from(q));
    }
}

/// Writes the 10 key words of function `func`, word 0 first, in the byte order of hardware.md §9.2.
pub(crate) fn write_key<W: RegisterWindow + ?Sized>(shell: &W, func: FunctionId, key: &RssKey) {
    for (k, &w) in key.to_register_words().iter().enumerate() {
        shell.write(shell::hash_key(func, k), w);
    }
}

/// Reads the 128 entries of function `func`, entry 0 first, keeping bits 15..0 of each.
pub(crate) fn read_table<W: RegisterWindow + ?Sized>(shell: &W, func: FunctionId) -> IndirectionTable {
    let mut e = [0u16; TABLE_LEN];
    for (k, entry) in e.iter_mut().enumerate() {
        // The mask keeps exactly 16 bits, so the narrowing cannot lose anything.
        *entry = (shell.read(shell::indir_table(func, k)) & INDIR_ENTRY_MASK) as u16;
    }
    IndirectionTable(e)
}

/// Reads the 10 key words of function `func`, word 0 first.
pub(crate) fn read_key<W: RegisterWindow + ?Sized>(shell: &W, func: FunctionId) -> RssKey {
    let mut words = [0u32; HASH_KEY_WORDS];
    for (k, w) in words.iter_mut().enumerate() {
        *w = shell.read(shell::hash_key(func, k));
    }
    RssKey::from_register_words(words)
}

/// `ethtool -x`: reads table then key of function `func` (hardware.md §9.2 order).
pub(crate) fn read_back<W: RegisterWindow + ?Sized>(
    shell: &W,
    func: FunctionId,
) -> (IndirectionTable, RssKey) {
    let table = read_table(shell, func);
    let key = read_key(shell, func);
    (table, key)
}

/// The RSS state of one PCI function: indirection table, key and RX queue count, with the ethtool
/// operations on them, and what is still to be written to the shell.
///
/// [`Rss`] keeps one per brought-up function and writes what a change leaves pending to the shell
/// ([`Rss::set`] and its siblings); the state alone can be tried out:
///
/// ```
/// use onic_core::device::rss_control::{HashFunction, RssConfig};
///
/// // Probe: default table (k % 4), RTL reset key kept (hardware.md §9.2).
/// let mut cfg = RssConfig::new(4)?;
/// // ethtool -X eth0 equal 2
/// cfg.equal(2)?;
/// // A refused request changes nothing.
/// assert!(cfg.set(Some(&[9; 128]), None, HashFunction::NoChange).is_err());
/// assert_eq!(cfg.table().entries()[1], 1);
/// # Ok::<(), onic_core::rss::RssError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RssConfig {
    table: IndirectionTable,
    key: RssKey,
    rx_queues: u16,
    /// Whether the user set the table (ethtool `-X`); a default table follows queue-count changes.
    table_user_set: bool,
    pending: RssParts,
}

impl RssConfig {
    /// The probe-time state for a function with `rx_queues` RX queues: table entry `k` =
    /// `k % rx_queues`, pending; key = the RTL reset key, not pending, since the driver does not
    /// write it (hardware.md §9.2).
    ///
    /// # Errors
    ///
    /// [`RssError::NoQueues`] when `rx_queues` is 0.
    pub fn new(rx_queues: u16) -> Result<Self, RssError> {
        if rx_queues == 0 {
            return Err(RssError::NoQueues);
        }
        Ok(Self {
            table: IndirectionTable::round_robin(rx_queues),
            key: RssKey::DEFAULT,
            rx_queues,
            table_user_set: false,
            pending: RssParts::TABLE,
        })
    }

    /// The indirection table.
    #[must_use]
    pub const fn table(&self) -> &IndirectionTable {
        &self.table
    }

    /// The key.
    #[must_use]
    pub const fn key(&self) -> &RssKey {
        &self.key
    }

    /// The number of RX queues (`ethtool` "rx rings").
    #[must_use]
    pub(crate) const fn rx_queues(&self) -> u16 {
        self.rx_queues
    }

    /// The function-relative queue for a hash.
    #[inline]
    #[must_use]
    pub const fn queue_for(&self, hash: u32) -> QueueId {
        self.table.queue_for(hash)
    }

    /// `ethtool -X` in one call: `indir` (128 entries; an empty slice resets the default table, as
    /// an indirection size of 0 does in the ethtool ABI), `key` (40 bytes) and `hfunc`; `None` leaves
    /// a part as it is. Returns the parts given, which are now pending.
    ///
    /// Checks, in order, before changing anything: the hash function (only Toeplitz or no change),
    /// the key length, the table length, and that every entry is below the RX queue count.
    ///
    /// # Errors
    ///
    /// [`RssError::UnsupportedHashFunction`], [`RssError::KeyLength`], [`RssError::TableLength`],
    /// [`RssError::QueueOutOfRange`]; the state is then unchanged.
    pub fn set(
        &mut self,
        indir: Option<&[u16]>,
        key: Option<&[u8]>,
        hfunc: HashFunction,
    ) -> Result<RssParts, RssError> {
        if let HashFunction::Other(h) = hfunc {
            return Err(RssError::UnsupportedHashFunction(h));
        }
        let key = match key {
            Some(k) => Some(RssKey::from_slice(k)?),
            None => None,
        };
        let table = match indir {
            Some([]) => Some((IndirectionTable::round_robin(self.rx_queues), false)),
            Some(entries) => {
                let t = IndirectionTable::from_slice(entries)?;
                t.check_queues(self.rx_queues)?;
                Some((t, true))
            }
            None => None,
        };
        // Everything is valid: commit.
        let mut parts = RssParts::NONE;
        if let Some((t, user_set)) = table {
            self.table = t;
            self.table_user_set = user_set;
            parts.table = true;
        }
        if let Some(k) = key {
            self.key = k;
            parts.key = true;
        }
        self.pending = self.pending.union(parts);
        Ok(parts)
    }

    /// `ethtool -X ... equal n`: entry `k` = `k % n`.
    ///
    /// # Errors
    ///
    /// [`RssError::EqualOutOfRange`] for `n` = 0 or `n` above the RX queue count; the state is
    /// then unchanged.
    pub fn equal(&mut self, n: u16) -> Result<RssParts, RssError> {
        if n == 0 || n > self.rx_queues {
            return Err(RssError::EqualOutOfRange {
                n,
                rx_queues: self.rx_queues,
            });
        }
        Ok(self.commit_table(IndirectionTable::round_robin(n), true))
    }

    /// `ethtool -X ... weight w0 w1 ...`: queue `j` gets a share of the 128 entries proportional
    /// to `weights[j]`, in contiguous runs from queue 0 up, as ethtool fills the table.
    ///
    /// # Errors
    ///
    /// [`RssError::WeightsAllZero`], [`RssError::WeightSumTooLarge`], or
    /// [`RssError::QueueOutOfRange`] when a non-zero weight is given for a queue at or above the RX
    /// queue count; the state is then unchanged.
    pub fn weights(&mut self, weights: &[u32]) -> Result<RssParts, RssError> {
        let t = IndirectionTable::weighted(weights)?;
        t.check_queues(self.rx_queues)?;
        Ok(self.commit_table(t, true))
    }

    /// `ethtool -X ... default`: entry `k` = `k % rx_queues`, following later queue-count changes.
    pub(crate) fn reset_table(&mut self) -> RssParts {
        self.commit_table(IndirectionTable::round_robin(self.rx_queues), false)
    }

    /// Changes the RX queue count (`ethtool -L`). A default table is rebuilt for the new count; a
    /// user-set table is kept, and must not name a queue at or above the new count.
    ///
    /// # Errors
    ///
    /// [`RssError::NoQueues`] for 0, [`RssError::QueuesInUse`] when a user-set table names a queue
    /// that would disappear; the state is then unchanged.
    pub(crate) fn set_rx_queues(&mut self, rx_queues: u16) -> Result<RssParts, RssError> {
        if rx_queues == 0 {
            return Err(RssError::NoQueues);
        }
        if self.table_user_set {
            let max_entry = self.table.max_entry();
            if max_entry >= rx_queues {
                return Err(RssError::QueuesInUse { rx_queues, max_entry });
            }
            self.rx_queues = rx_queues;
            return Ok(RssParts::NONE);
        }
        self.rx_queues = rx_queues;
        Ok(self.commit_table(IndirectionTable::round_robin(rx_queues), false))
    }

    fn commit_table(&mut self, table: IndirectionTable, user_set: bool) -> RssParts {
        self.table = table;
        self.table_user_set = user_set;
        self.pending = self.pending.union(RssParts::TABLE);
        RssParts::TABLE
    }

    /// Forgets the pending parts, once they have been programmed.
    pub(crate) fn mark_programmed(&mut self) {
        self.pending = RssParts::NONE;
    }

    /// Writes the pending parts to function `func` (table first, then key, hardware.md §9.2) and
    /// returns them. Call [`RssConfig::mark_programmed`] afterwards.
    pub(crate) fn program<W: RegisterWindow + ?Sized>(&self, shell: &W, func: FunctionId) -> RssParts {
        if self.pending.table {
            write_table(shell, func, &self.table);
        }
        if self.pending.key {
            write_key(shell, func, &self.key);
        }
        self.pending
    }
}

#[cfg(test)]
mod ethtool_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_and_queue_for() {
        let t = IndirectionTable::round_robin(3);
        assert_eq!(&t.entries()[..5], &[0, 1, 2, 0, 1]);
        assert_eq!(t.queue_for(0x2F39E0E6), QueueId::new(102 % 3));
        assert_eq!(t.queue_for(0xFFFF_FF80), QueueId::new(0));
        assert_eq!(IndirectionTable::round_robin(0), IndirectionTable::ZERO);
        assert_eq!(t.max_entry(), 2);
    }

    #[test]
    fn weighted_matches_ethtool_fill() {
        // weight 1 1: entries 0..63 -> 0, 64..127 -> 1.
        let t = IndirectionTable::weighted(&[1, 1]).unwrap();
        assert!(t.entries()[..64].iter().all(|&q| q == 0));
        assert!(t.entries()[64..].iter().all(|&q| q == 1));
        // weight 0 1 2: queue 0 gets nothing.
        let t = IndirectionTable::weighted(&[0, 1, 2]).unwrap();
        let c1 = t.entries().iter().filter(|&&q| q == 1).count();
        let c2 = t.entries().iter().filter(|&&q| q == 2).count();
        assert_eq!((c1, c2), (42, 86));
        assert_eq!(t.entries()[0], 1);
        assert_eq!(IndirectionTable::weighted(&[0, 0]), Err(RssError::WeightsAllZero));
        assert_eq!(IndirectionTable::weighted(&[]), Err(RssError::WeightsAllZero));
        assert_eq!(
            IndirectionTable::weighted(&[100, 29]),
            Err(RssError::WeightSumTooLarge { sum: 129 })
        );
    }

    #[test]
    fn hash_function_ethtool_bits() {
        assert_eq!(HashFunction::from_ethtool(0), HashFunction::NoChange);
        assert_eq!(HashFunction::from_ethtool(1), HashFunction::Toeplitz);
        assert_eq!(HashFunction::from_ethtool(2), HashFunction::Other(2));
    }
}

//! A queue's counters as the flat words the port publishes, one block per writer
//! ([`StatBlock`]), and back.
//!
//! The blocks are the port's own memory: each is written only by its block's single writer, one
//! relaxed atomic store per word, and read by anyone (statistics readers in any context) with
//! relaxed loads. A reader may see a publication half done, each word whole and never falling
//! between two writes of its writer: what a `u64_stats_sync` block gives on a 64-bit Linux, where
//! its sequence count compiles away. The NAPI poll writes its block straight from the core's
//! counter structs, with no copy in between and no call out of the port.
//!
//! A target without 64-bit atomics (a 32-bit microcontroller) keeps each word as two 32-bit
//! halves and the block under a sequence count, as `u64_stats_sync` does on a 32-bit kernel: the
//! writer makes it odd while it writes, a reader retries until it read a whole publication.

use onic_core::stats::{PairStats, QueueCounters, RxStats, TxStats, XskStats};

use super::host::StatBlock;

/// Words of a queue's published counters: every RX, TX, pair and AF_XDP counter (the pool's
/// statistics are the host's, read from the pool).
pub const QSTAT_WORDS: usize = RxStats::WORDS + TxStats::WORDS + PairStats::WORDS + XskStats::WORDS;

/// Where the TX counters start in a block's words (after the RX counters): the stack's and the
/// redirect-in rings' blocks publish only this range.
pub const TX_WORDS_AT: usize = RxStats::WORDS;
const PAIR_WORDS_AT: usize = TX_WORDS_AT + TxStats::WORDS;
const XSK_WORDS_AT: usize = PAIR_WORDS_AT + PairStats::WORDS;

/// The counters as the flat words the host publishes: RX, TX, pair, then AF_XDP counters, each in
/// the core's declaration order (the core lists each struct's fields once, for these words and
/// for adding counters up, so a counter added there reaches every host).
#[must_use]
pub fn to_words(c: &QueueCounters) -> [u64; QSTAT_WORDS] {
    let mut w = [0u64; QSTAT_WORDS];
    w[..TX_WORDS_AT].copy_from_slice(&c.rx.to_words());
    w[TX_WORDS_AT..PAIR_WORDS_AT].copy_from_slice(&c.tx.to_words());
    w[PAIR_WORDS_AT..XSK_WORDS_AT].copy_from_slice(&c.pair.to_words());
    w[XSK_WORDS_AT..].copy_from_slice(&c.xsk.to_words());
    w
}

/// One published counter block (see the module docs).
pub(crate) struct CounterBlock {
    seq: word::Seq,
    words: [word::Word; QSTAT_WORDS],
}

impl CounterBlock {
    const fn new() -> Self {
        Self {
            seq: word::Seq::new(),
            words: [const { word::Word::new() }; QSTAT_WORDS],
        }
    }

    /// Stores `words` from word `first` on (the part past the block's end is left out).
    pub(crate) fn store(&self, first: usize, words: &[u64]) {
        let to = self.words.get(first..).unwrap_or_default();
        self.seq.write(|| {
            for (d, &w) in to.iter().zip(words) {
                d.set(w);
            }
        });
    }

    /// Stores the words of the counter structs given, each straight into its range; a group
    /// given as `None` keeps its words (its writer knows they did not change).
    #[inline]
    pub(crate) fn store_live(
        &self,
        rx: &RxStats,
        tx: Option<&TxStats>,
        pair: Option<&PairStats>,
        xsk: Option<&XskStats>,
    ) {
        let (r, rest) = self.words.split_at(TX_WORDS_AT);
        let (t, rest) = rest.split_at(TxStats::WORDS);
        let (p, x) = rest.split_at(PairStats::WORDS);
        self.seq.write(|| {
            rx.each_word(|i, w| store_word(r, i, w));
            if let Some(tx) = tx {
                tx.each_word(|i, w| store_word(t, i, w));
            }
            if let Some(pair) = pair {
                pair.each_word(|i, w| store_word(p, i, w));
            }
            if let Some(xsk) = xsk {
                xsk.each_word(|i, w| store_word(x, i, w));
            }
        });
    }

    /// Every word.
    pub(crate) fn load(&self) -> [u64; QSTAT_WORDS] {
        self.seq.read(|| {
            let mut w = [0u64; QSTAT_WORDS];
            for (d, s) in w.iter_mut().zip(&self.words) {
                *d = s.get();
            }
            w
        })
    }
}

/// Word `i` of `to` (nothing past its end).
#[inline(always)]
fn store_word(to: &[word::Word], i: usize, w: u64) {
    if let Some(d) = to.get(i) {
        d.set(w);
    }
}

/// A published word, and the sequence count around a publication, where words are atomic: the
/// count is nothing.
#[cfg(target_has_atomic = "64")]
mod word {
    use core::sync::atomic::{AtomicU64, Ordering};

    pub(super) struct Word(AtomicU64);

    impl Word {
        pub(super) const fn new() -> Self {
            Self(AtomicU64::new(0))
        }

        #[inline(always)]
        pub(super) fn set(&self, v: u64) {
            self.0.store(v, Ordering::Relaxed);
        }

        #[inline(always)]
        pub(super) fn get(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    /// No count: every word is read whole.
    pub(super) struct Seq;

    impl Seq {
        pub(super) const fn new() -> Self {
            Self
        }

        #[inline(always)]
        pub(super) fn write(&self, f: impl FnOnce()) {
            f();
        }

        #[inline(always)]
        pub(super) fn read<R>(&self, f: impl FnOnce() -> R) -> R {
            f()
        }
    }
}

#[cfg(not(target_has_atomic = "64"))]
use halves as word;

/// A published word as two 32-bit halves, and the sequence count that makes a reader see whole
/// publications (a seqlock of atomics: no word is ever read torn into a result). Built for the
/// host's tests too.
#[cfg(any(test, not(target_has_atomic = "64")))]
mod halves {
    use core::sync::atomic::{fence, AtomicU32, Ordering};

    pub(super) struct Word {
        lo: AtomicU32,
        hi: AtomicU32,
    }

    impl Word {
        pub(super) const fn new() -> Self {
            Self {
                lo: AtomicU32::new(0),
                hi: AtomicU32::new(0),
            }
        }

        #[inline(always)]
        pub(super) fn set(&self, v: u64) {
            // CAST: the two halves of v.
            self.lo.store(v as u32, Ordering::Relaxed);
            self.hi.store((v >> 32) as u32, Ordering::Relaxed);
        }

        #[inline(always)]
        pub(super) fn get(&self) -> u64 {
            u64::from(self.hi.load(Ordering::Relaxed)) << 32 | u64::from(self.lo.load(Ordering::Relaxed))
        }
    }

    /// Odd while the block's single writer writes.
    pub(super) struct Seq(AtomicU32);

    impl Seq {
        pub(super) const fn new() -> Self {
            Self(AtomicU32::new(0))
        }

        pub(super) fn write(&self, f: impl FnOnce()) {
            let s = self.0.load(Ordering::Relaxed);
            self.0.store(s.wrapping_add(1), Ordering::Relaxed);
            // The odd count is seen before any word of this publication.
            fence(Ordering::Release);
            f();
            self.0.store(s.wrapping_add(2), Ordering::Release);
        }

        pub(super) fn read<R>(&self, mut f: impl FnMut() -> R) -> R {
            loop {
                let s = self.0.load(Ordering::Acquire);
                if s & 1 == 0 {
                    let r = f();
                    // The words are read before the count is read again.
                    fence(Ordering::Acquire);
                    if self.0.load(Ordering::Relaxed) == s {
                        return r;
                    }
                }
                core::hint::spin_loop();
            }
        }
    }
}

/// The published blocks of one queue index, one per [`StatBlock`].
pub(crate) struct QueueBlocks([CounterBlock; StatBlock::ALL.len()]);

impl QueueBlocks {
    pub(crate) const fn new() -> Self {
        Self([const { CounterBlock::new() }; StatBlock::ALL.len()])
    }

    /// Block `b`.
    pub(crate) fn get(&self, b: StatBlock) -> &CounterBlock {
        // An index of StatBlock::ALL by construction: `b as usize` is below its length.
        &self.0[b as usize]
    }

    /// The queue index's counters: its blocks added up.
    pub(crate) fn sum(&self) -> QueueCounters {
        let mut c = QueueCounters::default();
        for b in &self.0 {
            c += from_words(&b.load());
        }
        c
    }
}

/// `w += base`, word by word (wrapping, as the counters' own `+=`).
pub fn add_words(w: &mut [u64; QSTAT_WORDS], base: &[u64; QSTAT_WORDS]) {
    for (d, b) in w.iter_mut().zip(base) {
        *d = d.wrapping_add(*b);
    }
}

/// The counters from published words (the order of [`to_words`]).
#[must_use]
pub fn from_words(w: &[u64; QSTAT_WORDS]) -> QueueCounters {
    let (rx, rest) = w.split_at(RxStats::WORDS);
    let (tx, rest) = rest.split_at(TxStats::WORDS);
    let (pair, xsk) = rest.split_at(PairStats::WORDS);
    QueueCounters {
        rx: RxStats::from_words(rx),
        tx: TxStats::from_words(tx),
        pair: PairStats::from_words(pair),
        pool: Default::default(),
        xsk: XskStats::from_words(xsk),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 32-bit targets' words: whole values across the halves, and a writer racing a reader
    /// never lets it see one publication's first word with another's second.
    #[test]
    fn halves_keep_words_whole_and_publications_apart() {
        extern crate std;
        let w = halves::Word::new();
        w.set(0x1234_5678_9abc_def0);
        assert_eq!(w.get(), 0x1234_5678_9abc_def0);
        let (seq, a, b) = (halves::Seq::new(), halves::Word::new(), halves::Word::new());
        use core::sync::atomic::{AtomicBool, Ordering};
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut v = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Both words change in both halves with every publication.
                    v += 0x1_0000_0001;
                    seq.write(|| {
                        a.set(v);
                        b.set(v);
                    });
                }
            });
            let mut last = 0;
            for _ in 0..300_000 {
                let (x, y) = seq.read(|| (a.get(), b.get()));
                assert_eq!(x, y, "one publication");
                assert!(x >= last, "never back");
                last = x;
            }
            stop.store(true, Ordering::Relaxed);
        });
    }

    #[test]
    fn blocks_store_in_place_and_add_up() {
        let mut c = QueueCounters::default();
        c.rx.rx_packets = 7;
        c.tx.tx_aborted = 3;
        c.pair.rx_pass_refused = 5;
        c.xsk.tx_bytes = 11;
        let blocks = QueueBlocks::new();
        let napi = blocks.get(StatBlock::Napi);
        napi.store_live(&c.rx, Some(&c.tx), Some(&c.pair), Some(&c.xsk));
        assert_eq!(napi.load(), to_words(&c), "each struct in its own range");
        // A TX-only block: only its TX range is ever written.
        let tx = TxStats {
            tx_packets: 2,
            ..TxStats::default()
        };
        blocks.get(StatBlock::Stack).store(TX_WORDS_AT, &tx.to_words());
        // A range running past the end stores what fits and no more.
        blocks
            .get(StatBlock::History)
            .store(QSTAT_WORDS - 1, &[4, 99, 99]);
        let sum = blocks.sum();
        assert_eq!(sum.rx.rx_packets, 7);
        assert_eq!(sum.tx.tx_packets, 2);
        assert_eq!(sum.xsk.tx_bytes, 15, "the NAPI block's 11 and the history's 4");
        assert_eq!(blocks.get(StatBlock::Xmit).load(), [0; QSTAT_WORDS]);
        blocks.get(StatBlock::Xmit).store(QSTAT_WORDS + 5, &[1]);
        assert_eq!(blocks.get(StatBlock::Xmit).load(), [0; QSTAT_WORDS]);
    }

    #[test]
    fn words_round_trip_every_counter() {
        let mut w = [0u64; QSTAT_WORDS];
        for (i, x) in w.iter_mut().enumerate() {
            *x = 1000 + i as u64;
        }
        let c = from_words(&w);
        assert_eq!(c.rx.rx_packets, 1000);
        assert_eq!(
            c.pair.rx_pass_refused,
            1000 + QSTAT_WORDS as u64 - 1 - XskStats::WORDS as u64
        );
        assert_eq!(c.xsk.tx_bytes, 1000 + QSTAT_WORDS as u64 - 1);
        assert_eq!(to_words(&c), w);
        // The queue-health counters travel too (they were once left out of the words).
        assert_eq!(c.rx.rx_abandoned, 1019);
        assert_eq!(c.tx.tx_aborted, 1034);
        // A counter's word, by name (the NAPI poll reads two for adaptive moderation).
        assert_eq!(w[RxStats::word("rx_packets")], c.rx.rx_packets);
        assert_eq!(w[RxStats::word("rx_bytes")], c.rx.rx_bytes);
        assert_eq!(w[TX_WORDS_AT + TxStats::word("tx_aborted")], c.tx.tx_aborted);
        // The TX range alone, as the TX-only blocks publish it.
        let tx = &w[TX_WORDS_AT..TX_WORDS_AT + TxStats::WORDS];
        assert_eq!(tx, c.tx.to_words().as_slice());
        let mut sum = to_words(&c);
        add_words(&mut sum, &w);
        assert_eq!(sum[0], 2000);
    }
}

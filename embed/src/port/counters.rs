//! A queue's counters as the flat words a host publishes, one block per writer
//! ([`StatBlock`](super::host::StatBlock)), and back.

use onic_core::stats::{PairStats, QueueCounters, RxStats, TxStats, XskStats};

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
    live_words(&c.rx, &c.tx, &c.pair, &c.xsk)
}

/// The words of the four counter structs, each copied into its range (one pass, no
/// intermediate `QueueCounters`: a NAPI poll publishes these every time).
#[must_use]
pub fn live_words(rx: &RxStats, tx: &TxStats, pair: &PairStats, xsk: &XskStats) -> [u64; QSTAT_WORDS] {
    let mut w = [0u64; QSTAT_WORDS];
    w[..TX_WORDS_AT].copy_from_slice(&rx.to_words());
    w[TX_WORDS_AT..PAIR_WORDS_AT].copy_from_slice(&tx.to_words());
    w[PAIR_WORDS_AT..XSK_WORDS_AT].copy_from_slice(&pair.to_words());
    w[XSK_WORDS_AT..].copy_from_slice(&xsk.to_words());
    w
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

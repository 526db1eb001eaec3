//! A queue's counters as the flat words a host publishes, one block per writer
//! ([`StatBlock`](super::host::StatBlock)), and back.

use onic_core::stats::{PairStats, QueueCounters, RxStats, TxStats, XskStats};

/// Words of a queue's published counters: every RX, TX, pair and AF_XDP counter (the pool's
/// statistics are the host's, read from the pool).
pub const QSTAT_WORDS: usize = RxStats::WORDS + TxStats::WORDS + PairStats::WORDS + XskStats::WORDS;

/// The counters as the flat words the host publishes: RX, TX, pair, then AF_XDP counters, each in
/// the core's declaration order (the core lists each struct's fields once, for these words and
/// for adding counters up, so a counter added there reaches every host).
#[must_use]
pub fn to_words(c: &QueueCounters) -> [u64; QSTAT_WORDS] {
    let mut w = [0u64; QSTAT_WORDS];
    let parts: [&[u64]; 4] = [
        &c.rx.to_words(),
        &c.tx.to_words(),
        &c.pair.to_words(),
        &c.xsk.to_words(),
    ];
    for (d, s) in w.iter_mut().zip(parts.into_iter().flatten()) {
        *d = *s;
    }
    w
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
    }
}

//! A queue's counters as the flat words a host publishes, one block per writer
//! ([`StatBlock`](super::host::StatBlock)), and back.

use onic_core::stats::{PairStats, QueueCounters, RxStats, TxStats};

/// Words of a queue's published counters: RX, TX and pair counters (the pool's statistics are
/// the host's, read from the pool).
pub const QSTAT_WORDS: usize = 15 + 11 + 9;

macro_rules! words {
    ($($s:ident . $f:ident),* $(,)?) => {
        /// The counters as the flat words the host publishes.
        #[must_use]
        pub fn to_words(c: &QueueCounters) -> [u64; QSTAT_WORDS] {
            [$(c.$s.$f),*]
        }

        /// The counters from published words.
        #[must_use]
        pub fn from_words(w: &[u64; QSTAT_WORDS]) -> QueueCounters {
            let mut c = QueueCounters {
                rx: RxStats::default(),
                tx: TxStats::default(),
                pair: PairStats::default(),
                pool: Default::default(),
            };
            let mut i = 0;
            $(
                c.$s.$f = w[i];
                i += 1;
            )*
            debug_assert_eq!(i, QSTAT_WORDS);
            c
        }
    };
}

words!(
    rx.rx_packets,
    rx.rx_bytes,
    rx.recycled,
    rx.to_os,
    rx.to_tx,
    rx.rx_cmpt_errors,
    rx.rx_bad_length,
    rx.rx_multi_buffer,
    rx.rx_no_page,
    rx.refill_alloc_failures,
    rx.cmpt_not_ready,
    rx.c2h_doorbells,
    rx.cmpt_doorbells,
    rx.rearms,
    rx.rearm_rechecks,
    tx.tx_packets,
    tx.tx_bytes,
    tx.queued,
    tx.tx_busy,
    tx.tx_bad_length,
    tx.padded,
    tx.stops,
    tx.wakes,
    tx.doorbells,
    tx.tx_xdp_xmit,
    tx.tx_xdp_xmit_errors,
    pair.rx_xdp_tx,
    pair.rx_xdp_redirect,
    pair.rx_xdp_tx_errors,
    pair.rx_xdp_pass,
    pair.rx_xdp_drop,
    pair.rx_xdp_aborted,
    pair.rx_xdp_invalid,
    pair.rx_xdp_redirect_errors,
    pair.rx_pass_refused,
);

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
        assert_eq!(c.pair.rx_pass_refused, 1000 + QSTAT_WORDS as u64 - 1);
        assert_eq!(to_words(&c), w);
    }
}

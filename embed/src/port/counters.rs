//! A queue's counters as the flat words a host publishes, one block per writer
//! ([`StatBlock`](super::host::StatBlock)), and back.

use onic_core::stats::{PairStats, QueueCounters, RxStats, TxStats};

/// Words of a queue's published counters: every RX, TX and pair counter (the pool's statistics
/// are the host's, read from the pool).
pub const QSTAT_WORDS: usize = 20 + 15 + 9;

/// Lists each counter struct's fields once: the flat words are built by destructuring each
/// struct without `..`, so a counter added to the core and not listed here does not compile
/// (and would otherwise never reach a host's statistics).
macro_rules! words {
    ($(($s:ident: $t:ident { $($f:ident),* $(,)? })),* $(,)?) => {
        /// The counters as the flat words the host publishes.
        #[must_use]
        pub fn to_words(c: &QueueCounters) -> [u64; QSTAT_WORDS] {
            $( let $t { $($f: _),* } = c.$s; )*
            [$($(c.$s.$f),*),*]
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
            let mut words = w.iter().copied();
            $($( c.$s.$f = words.next().unwrap_or(0); )*)*
            debug_assert!(words.next().is_none());
            c
        }
    };
}

words!(
    (rx: RxStats {
        rx_packets,
        rx_bytes,
        recycled,
        to_os,
        to_tx,
        rx_cmpt_errors,
        rx_bad_length,
        rx_multi_buffer,
        rx_no_page,
        refill_alloc_failures,
        refill_bad_pages,
        cmpt_not_ready,
        c2h_doorbells,
        cmpt_doorbells,
        rearms,
        rearm_rechecks,
        stall_polls,
        queue_errors,
        restarts,
        rx_abandoned,
    }),
    (tx: TxStats {
        tx_packets,
        tx_bytes,
        queued,
        tx_busy,
        tx_bad_length,
        padded,
        stops,
        wakes,
        doorbells,
        tx_xdp_xmit,
        tx_xdp_xmit_errors,
        stall_reclaims,
        queue_errors,
        restarts,
        tx_aborted,
    }),
    (pair: PairStats {
        rx_xdp_tx,
        rx_xdp_redirect,
        rx_xdp_tx_errors,
        rx_xdp_pass,
        rx_xdp_drop,
        rx_xdp_aborted,
        rx_xdp_invalid,
        rx_xdp_redirect_errors,
        rx_pass_refused,
    }),
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
        // The queue-health counters travel too (they were once left out of the words).
        assert_eq!(c.rx.rx_abandoned, 1019);
        assert_eq!(c.tx.tx_aborted, 1034);
    }
}

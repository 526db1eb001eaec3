//! The software counters of the queues (RX, TX, the pair's XDP verdicts), of the page pools, and
//! their per-pair snapshot. The counter types live here, apart from the queues and pools that
//! update them, so that the names and totals (`ethtool`) depend on the counters alone.

/// `+=` for a struct of counters: every field added (wrapping: counters never panic). The struct
/// is destructured, so a field added later without being listed here does not compile. Fields
/// that are counter structs themselves are added with their own `+=`.
macro_rules! counters_add_assign {
    // A flat counter struct that also travels as plain words (a host publishes them, Linux's
    // u64_stats blocks): the field list written once serves both.
    ($t:ident { $($f:ident),* $(,)? } words) => {
        counters_add_assign!($t { $($f),* });

        impl $t {
            /// How many counters the struct has (the length of [`Self::to_words`]).
            pub const WORDS: usize = [$(stringify!($f)),*].len();

            /// The position of counter `name` in [`Self::to_words`]; for constants, where a
            /// name that is not a counter of the struct stops the build.
            ///
            /// # Panics
            ///
            /// When `name` is not a counter of the struct (at compile time in a constant).
            #[must_use]
            pub const fn word(name: &str) -> usize {
                let fields = [$(stringify!($f)),*];
                let mut i = 0;
                while i < fields.len() {
                    if const_str_eq(fields[i], name) {
                        return i;
                    }
                    i += 1;
                }
                panic!("not a counter of this struct")
            }

            /// Every counter, in declaration order.
            #[must_use]
            #[inline]
            pub const fn to_words(&self) -> [u64; Self::WORDS] {
                [$(self.$f),*]
            }

            /// Calls `f` with each counter's position in [`Self::to_words`] and its value, in
            /// that order: a writer that stores each word as it reads it (a published block)
            /// needs no array in between.
            #[inline]
            pub fn each_word(&self, mut f: impl FnMut(usize, u64)) {
                let words = [$(stringify!($f)),*];
                let mut at = 0..words.len();
                $( f(at.next().unwrap_or(0), self.$f); )*
            }

            /// The counters from `w`, in the order of [`Self::to_words`]; counters past the end
            /// of `w` are 0.
            #[must_use]
            pub fn from_words(w: &[u64]) -> Self {
                let mut it = w.iter().copied();
                let mut c = Self::default();
                $( c.$f = it.next().unwrap_or(0); )*
                c
            }
        }
    };
    ($t:ident { $($f:ident),* $(,)? } $(nested { $($n:ident),* $(,)? })?) => {
        impl core::ops::AddAssign for $t {
            fn add_assign(&mut self, o: Self) {
                let $t { $($f,)* $($($n,)*)? } = o;
                $( self.$f = self.$f.wrapping_add($f); )*
                $($( self.$n += $n; )*)?
            }
        }
    };
}
pub(crate) use counters_add_assign;

/// `a == b` in a `const fn`.
const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Allocation statistics, named as Linux's `page_pool_alloc_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PoolAllocStats {
    /// Allocations served from the cache.
    pub fast: u64,
    /// Slow-path calls: bulk allocations from the HAL (one per call, however many pages).
    pub slow: u64,
    /// Slow-path calls for higher-order pages; always 0 (this pool only has order-0 pages).
    pub slow_high_order: u64,
    /// Times the cache and the recycle ring were both empty, forcing the slow path.
    pub empty: u64,
    /// Times the cache was refilled from the recycle ring.
    pub refill: u64,
    /// Pages taken from the ring that could not go into the cache (Linux: NUMA mismatch); always
    /// 0 here, there is no NUMA placement.
    pub waive: u64,
}

/// Recycling statistics, named as Linux's `page_pool_recycle_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PoolRecycleStats {
    /// Pages recycled directly into the cache.
    pub cached: u64,
    /// Direct recycles that found the cache full (the page then went to the ring).
    pub cache_full: u64,
    /// Pages put into the recycle ring.
    pub ring: u64,
    /// Pages released to the HAL because the ring was full.
    pub ring_full: u64,
    /// Pages released to the HAL through [`PageProvider::release_page`] (Linux: still
    /// referenced elsewhere, so not recyclable).
    ///
    /// [`PageProvider::release_page`]: crate::queue::pool::PageProvider::release_page
    pub released_refcnt: u64,
}

/// Everything a [`PagePool`](crate::queue::pool::PagePool) counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PoolStats {
    /// Allocation side.
    pub alloc: PoolAllocStats,
    /// Recycling side.
    pub recycle: PoolRecycleStats,
    /// Pages taken from the HAL (allocated and mapped) over the pool's life.
    pub pages_from_hal: u64,
    /// Pages given back to the HAL (unmapped and freed) over the pool's life, including those
    /// released by other contexts on a full ring.
    pub pages_to_hal: u64,
    /// Slow-path allocations that got no page at all from the HAL.
    pub hal_alloc_failures: u64,
    /// Pages the OS gave back (directly or through the ring).
    pub os_returns: u64,
}

counters_add_assign!(PoolAllocStats {
    fast,
    slow,
    slow_high_order,
    empty,
    refill,
    waive,
});
counters_add_assign!(PoolRecycleStats {
    cached,
    cache_full,
    ring,
    ring_full,
    released_refcnt,
});
counters_add_assign!(PoolStats {
    pages_from_hal,
    pages_to_hal,
    hal_alloc_failures,
    os_returns,
} nested { alloc, recycle });

impl PoolStats {
    /// Pages that exist because of this pool: taken from the HAL and not given back.
    #[must_use]
    pub const fn live_pages(&self) -> u64 {
        self.pages_from_hal - self.pages_to_hal
    }
}

/// Counters of an RX queue (names after `rtnl_link_stats64` where one applies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxStats {
    /// Frames handed to the sink.
    pub rx_packets: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames the sink gave back for recycling.
    pub recycled: u64,
    /// Frames whose page the sink handed to the OS.
    pub to_os: u64,
    /// Frames whose page the sink queued for transmission.
    pub to_tx: u64,
    /// Completions with the error bit set (dropped).
    pub rx_cmpt_errors: u64,
    /// Completions with a length of 0, above the largest frame, or above what was posted
    /// (dropped).
    pub rx_bad_length: u64,
    /// Frames spanning several buffers (dropped).
    pub rx_multi_buffer: u64,
    /// Frames dropped because no replacement page could be had (their page was reused).
    pub rx_no_page: u64,
    /// Refills that stopped because the pool had no page.
    pub refill_alloc_failures: u64,
    /// Pages the provider handed out whose bytes do not all have a device address (the page's
    /// range wraps past 2^64): released instead of posted, and the refill stopped there, as
    /// when the pool has no page.
    pub refill_bad_pages: u64,
    /// Completion entries reported by the status record but not yet visible (wrong color).
    pub cmpt_not_ready: u64,
    /// C2H PIDX doorbells written.
    pub c2h_doorbells: u64,
    /// CMPT CIDX doorbells written.
    pub cmpt_doorbells: u64,
    /// Polls that re-armed the interrupt.
    pub rearms: u64,
    /// Re-arms after which the status record already showed new completions.
    pub rearm_rechecks: u64,
    /// Polls that ended without progress while the device claimed work (not-yet-visible
    /// entries, entries the status record does not report, a device consumer index out of step).
    pub stall_polls: u64,
    /// Times the queue entered its error state.
    pub queue_errors: u64,
    /// Restarts ([`RxQueue::restart`](crate::queue::rx::RxQueue::restart)).
    pub restarts: u64,
    /// Completions the device had written but the queue had not consumed when it was restarted:
    /// frames lost with the restart (dropped).
    pub rx_abandoned: u64,
}

counters_add_assign!(RxStats {
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
} words);

impl RxStats {
    /// All frames dropped by the queue itself (not by the sink).
    #[must_use]
    pub const fn rx_dropped(&self) -> u64 {
        self.rx_cmpt_errors + self.rx_bad_length + self.rx_multi_buffer + self.rx_no_page + self.rx_abandoned
    }
}

/// Counters of a TX queue (names after `rtnl_link_stats64` where one applies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TxStats {
    /// Frames the device completed.
    pub tx_packets: u64,
    /// Bytes of those frames (as posted, padding included).
    pub tx_bytes: u64,
    /// Frames queued on the ring.
    pub queued: u64,
    /// Frames refused because the ring was full.
    pub tx_busy: u64,
    /// Frames refused for their length: 0, above [`TX_MAX_FRAME`], too short and not paddable, or
    /// running past the buffer they are in ([`TxError::BadLength`], [`TxError::BeyondBuffer`]).
    ///
    /// [`TX_MAX_FRAME`]: crate::queue::tx::TX_MAX_FRAME
    /// [`TxError::BadLength`]: crate::queue::tx::TxError::BadLength
    /// [`TxError::BeyondBuffer`]: crate::queue::tx::TxError::BeyondBuffer
    pub tx_bad_length: u64,
    /// Frames padded to [`ETH_ZLEN`](crate::queue::tx::ETH_ZLEN).
    pub padded: u64,
    /// Times the queue stopped (free descriptors fell below the stop threshold).
    pub stops: u64,
    /// Times it woke again after a reclaim.
    pub wakes: u64,
    /// H2C PIDX doorbells written.
    pub doorbells: u64,
    /// Frames of other devices queued through `xdp_xmit` (`ndo_xdp_xmit`).
    pub tx_xdp_xmit: u64,
    /// Frames `xdp_xmit` did not queue (left with their owner).
    pub tx_xdp_xmit_errors: u64,
    /// Reclaims that found the queue stopped, buffers in flight and no progress.
    pub stall_reclaims: u64,
    /// Times the queue entered its error state.
    pub queue_errors: u64,
    /// Restarts ([`TxQueue::restart`](crate::queue::tx::TxQueue::restart)).
    pub restarts: u64,
    /// Buffers a restart handed back to their owners without the device having reported them
    /// sent (dropped).
    pub tx_aborted: u64,
}

counters_add_assign!(TxStats {
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
} words);

/// Counters of a pair beyond those of its queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PairStats {
    /// Frames the program sent back out (XDP_TX), queued or not.
    pub rx_xdp_tx: u64,
    /// Frames the program redirected to another TX queue or target.
    pub rx_xdp_redirect: u64,
    /// XDP_TX frames that could not be queued (ring full, bad length); their pages were recycled
    /// and they count as drops. Deviation: the reference driver leaks the page here
    /// (hardware.md §15 item 13).
    pub rx_xdp_tx_errors: u64,
    /// Frames the program passed to the OS ([`QueuePair::poll`](crate::queue::pair::QueuePair::poll)).
    pub rx_xdp_pass: u64,
    /// Frames the XDP path recycled instead of delivering: DROP, ABORTED, unknown verdicts,
    /// failed TX and failed redirects ([`QueuePair::poll`](crate::queue::pair::QueuePair::poll)).
    pub rx_xdp_drop: u64,
    /// ABORTED verdicts (also in `rx_xdp_drop`).
    pub rx_xdp_aborted: u64,
    /// Raw verdicts that are no XDP action, handled like ABORTED (also in `rx_xdp_drop`): the
    /// exception counter.
    pub rx_xdp_invalid: u64,
    /// Redirects the target refused or that had no target (also in `rx_xdp_drop`).
    pub rx_xdp_redirect_errors: u64,
    /// Frames the sink gave back ([`RxSink::pass`] failed); their pages were recycled.
    ///
    /// [`RxSink::pass`]: crate::queue::pair::RxSink::pass
    pub rx_pass_refused: u64,
}

counters_add_assign!(PairStats {
    rx_xdp_tx,
    rx_xdp_redirect,
    rx_xdp_tx_errors,
    rx_xdp_pass,
    rx_xdp_drop,
    rx_xdp_aborted,
    rx_xdp_invalid,
    rx_xdp_redirect_errors,
    rx_pass_refused,
} words);

/// AF_XDP zero copy on one queue index, counted by the owner of its XSK pool (the queue's NAPI
/// context): zero for a queue on its page pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct XskStats {
    /// Frames the program redirected into the application's memory without a copy.
    pub rx_packets: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Refills that found the pool's free list and fill ring empty (the application did not
    /// give frames back in time; the RX ring runs short until it does).
    pub rx_fill_empty: u64,
    /// Frames of the application's TX ring sent from its memory.
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
}

counters_add_assign!(XskStats {
    rx_packets,
    rx_bytes,
    rx_fill_empty,
    tx_packets,
    tx_bytes,
} words);

/// A snapshot of one queue pair's counters (taken by its owner, read by whoever asks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// The RX queue's.
    pub rx: RxStats,
    /// The TX queue's.
    pub tx: TxStats,
    /// The pair's (XDP verdicts).
    pub pair: PairStats,
    /// The pool's (zero for a provider that keeps none, such as the kernel's page pool, whose
    /// statistics Linux reports itself).
    pub pool: PoolStats,
    /// AF_XDP zero copy's.
    pub xsk: XskStats,
}

counters_add_assign!(QueueCounters {} nested { rx, tx, pair, pool, xsk });

#[cfg(test)]
mod tests {
    use super::*;

    /// `each_word` visits every counter once, at its `to_words` position, with its value.
    #[test]
    fn each_word_agrees_with_to_words() {
        fn check<const N: usize>(words: [u64; N], each: impl Fn(&mut dyn FnMut(usize, u64))) {
            let mut seen = [None; N];
            each(&mut |i, w| {
                assert!(seen[i].is_none(), "word {i} visited twice");
                seen[i] = Some(w);
            });
            assert_eq!(seen, words.map(Some));
        }
        let w: [u64; 64] = core::array::from_fn(|i| 100 + i as u64);
        let rx = RxStats::from_words(&w);
        check(rx.to_words(), |f| rx.each_word(f));
        let tx = TxStats::from_words(&w);
        check(tx.to_words(), |f| tx.each_word(f));
        let pair = PairStats::from_words(&w);
        check(pair.to_words(), |f| pair.each_word(f));
        let xsk = XskStats::from_words(&w);
        check(xsk.to_words(), |f| xsk.each_word(f));
        assert_eq!(rx.to_words()[..3], [100, 101, 102]);
    }
}

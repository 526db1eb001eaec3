//! Software counters of the netdev: per RX queue and per TX queue, each written by one context
//! only (the queue's NAPI poll, or the holder of the TX queue's lock) and read by anyone
//! (`ndo_get_stats64`, `ethtool -S`).
//!
//! Each counter is a single-writer `AtomicU64` updated with a relaxed load and store (no
//! read-modify-write). That is exactly what the kernel's `u64_stats_t` + `u64_stats_sync` pair
//! compiles to on 64-bit kernels (the sync is an empty struct there and the counters are
//! `local64_t`); the module only builds for x86-64, so readers never see a torn value and writers
//! never pay for a locked instruction.

use core::sync::atomic::{AtomicU64, Ordering};

/// One single-writer 64-bit counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the counter's owning context may call this (single writer).
    pub fn add(&self, n: u64) {
        let v = self.0.load(Ordering::Relaxed);
        self.0.store(v.wrapping_add(n), Ordering::Relaxed);
    }

    /// The current value.
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Names of the per-RX-queue counters, in `ethtool -S` order (`rx_queue_<q>_<name>`).
pub const RX_QUEUE_STATS: [&str; 10] = [
    "packets",
    "bytes",
    "drops",
    "errors",
    "alloc_fail",
    "xdp_redirect",
    "xdp_pass",
    "xdp_drop",
    "xdp_tx",
    "xdp_tx_errors",
];

/// Names of the per-TX-queue counters, in `ethtool -S` order (`tx_queue_<q>_<name>`).
pub const TX_QUEUE_STATS: [&str; 6] = [
    "packets",
    "bytes",
    "busy",
    "dropped",
    "xdp_xmit",
    "xdp_xmit_errors",
];

/// Counters of one RX queue, written by its NAPI poll.
#[derive(Debug, Default)]
pub struct RxCounters {
    /// Frames received (every completion with a usable length, whatever the verdict).
    pub packets: Counter,
    /// Bytes of those frames.
    pub bytes: Counter,
    /// Frames the OS could not take (no skb) or XDP dropped.
    pub drops: Counter,
    /// Completions with the error bit or an impossible length.
    pub errors: Counter,
    /// Buffer allocations that failed at refill.
    pub alloc_fail: Counter,
    /// XDP_REDIRECT verdicts carried out.
    pub xdp_redirect: Counter,
    /// XDP_PASS verdicts.
    pub xdp_pass: Counter,
    /// XDP_DROP / ABORTED / unknown verdicts, and failed TX or redirect.
    pub xdp_drop: Counter,
    /// XDP_TX verdicts that reached the TX ring.
    pub xdp_tx: Counter,
    /// XDP_TX frames that could not be converted or queued.
    pub xdp_tx_errors: Counter,
}

impl RxCounters {
    /// The counters as values, in [`RX_QUEUE_STATS`] order.
    #[must_use]
    pub fn values(&self) -> [u64; RX_QUEUE_STATS.len()] {
        [
            self.packets.get(),
            self.bytes.get(),
            self.drops.get(),
            self.errors.get(),
            self.alloc_fail.get(),
            self.xdp_redirect.get(),
            self.xdp_pass.get(),
            self.xdp_drop.get(),
            self.xdp_tx.get(),
            self.xdp_tx_errors.get(),
        ]
    }
}

/// Counters of one TX queue, written under the TX queue's lock.
#[derive(Debug, Default)]
pub struct TxCounters {
    /// Frames queued to the device.
    pub packets: Counter,
    /// Bytes of those frames (before padding).
    pub bytes: Counter,
    /// Transmit calls refused because the ring was full.
    pub busy: Counter,
    /// Frames dropped before reaching the ring (too long, empty, queue not running).
    pub dropped: Counter,
    /// Frames sent through `ndo_xdp_xmit`.
    pub xdp_xmit: Counter,
    /// `ndo_xdp_xmit` frames that could not be sent.
    pub xdp_xmit_errors: Counter,
}

impl TxCounters {
    /// The counters as values, in [`TX_QUEUE_STATS`] order.
    #[must_use]
    pub fn values(&self) -> [u64; TX_QUEUE_STATS.len()] {
        [
            self.packets.get(),
            self.bytes.get(),
            self.busy.get(),
            self.dropped.get(),
            self.xdp_xmit.get(),
            self.xdp_xmit_errors.get(),
        ]
    }
}

/// The subset of `struct rtnl_link_stats64` the driver fills (the C glue copies it over).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames received but dropped by the driver.
    pub rx_dropped: u64,
    /// Bad completions.
    pub rx_errors: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames dropped on transmit.
    pub tx_dropped: u64,
    /// Transmit errors.
    pub tx_errors: u64,
}

/// Sums the per-queue counters into link statistics.
#[must_use]
pub fn link_stats(rx: &[RxCounters], tx: &[TxCounters]) -> LinkStats {
    let mut s = LinkStats::default();
    for q in rx {
        s.rx_packets += q.packets.get();
        s.rx_bytes += q.bytes.get();
        s.rx_dropped += q.drops.get();
        s.rx_errors += q.errors.get();
    }
    for q in tx {
        s.tx_packets += q.packets.get();
        s.tx_bytes += q.bytes.get();
        s.tx_dropped += q.dropped.get();
        s.tx_errors += q.xdp_xmit_errors.get();
    }
    s
}

/// The seven XDP totals of the reference driver's `ethtool -S` list (spec §10.5 entries 64-70):
/// `rx_xdp_redirect`, `rx_xdp_pass`, `rx_xdp_drop`, `rx_xdp_tx`, `rx_xdp_tx_errors`,
/// `tx_xdp_xmit`, `tx_xdp_xmit_errors`, summed over all queues.
#[must_use]
pub fn xdp_totals(rx: &[RxCounters], tx: &[TxCounters]) -> [u64; 7] {
    let mut t = [0u64; 7];
    for q in rx {
        t[0] += q.xdp_redirect.get();
        t[1] += q.xdp_pass.get();
        t[2] += q.xdp_drop.get();
        t[3] += q.xdp_tx.get();
        t[4] += q.xdp_tx_errors.get();
    }
    for q in tx {
        t[5] += q.xdp_xmit.get();
        t[6] += q.xdp_xmit_errors.get();
    }
    t
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn sums_over_queues() {
        let rx: Vec<RxCounters> = (0..3).map(|_| RxCounters::default()).collect();
        let tx: Vec<TxCounters> = (0..3).map(|_| TxCounters::default()).collect();
        for (i, q) in rx.iter().enumerate() {
            q.packets.add(i as u64 + 1);
            q.bytes.add(100);
            q.xdp_drop.add(2);
        }
        tx[2].packets.add(5);
        tx[2].bytes.add(500);
        tx[1].xdp_xmit.add(4);
        let s = link_stats(&rx, &tx);
        assert_eq!((s.rx_packets, s.rx_bytes), (6, 300));
        assert_eq!((s.tx_packets, s.tx_bytes), (5, 500));
        assert_eq!(xdp_totals(&rx, &tx), [0, 0, 6, 0, 0, 4, 0]);
        assert_eq!(rx[1].values()[0], 2);
    }

    #[test]
    fn counter_wraps_instead_of_panicking() {
        let c = Counter::default();
        c.add(u64::MAX);
        c.add(2);
        assert_eq!(c.get(), 1);
    }
}

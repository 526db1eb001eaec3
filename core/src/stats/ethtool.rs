//! The statistics side of the ethtool surface every OS shim and the `onic` tool share: the
//! `ethtool -S` list (names and values) and the `stats64` view. The settings ethtool changes are
//! [`crate::device::settings`].
//!
//! # `ethtool -S`
//!
//! The list starts with the reference driver's 71 entries in its order (hardware.md §10.5): the 59
//! CMAC counters latched by TICK, the 5 packet-adapter counters, then the 7 XDP counters summed
//! over all queues. Hardware counters are read in full (48-bit CMAC, 64-bit adapter; the reference
//! driver reports the low 32 bits only, see [`crate::stats::hw::read_hw_counters`]). Then, following
//! the conventions of Linux drivers:
//!
//! - per RX queue `q`: `rx{q}_` + each of [`RX_QUEUE_STATS`] (`rx0_packets`, `rx0_xdp_drop`, ...);
//! - per TX queue `q`: `tx{q}_` + each of [`TX_QUEUE_STATS`];
//! - the page pools, summed over queues, with Linux's `page_pool` names ([`PAGE_POOL_STATS`]:
//!   `rx_pp_alloc_fast`, ..., `rx_pp_recycle_released_ref`).
//!
//! Per-queue counters are plain integers owned by their queue (no atomics on the fast path);
//! they are only added up here, when the list is read.

use core::fmt;

use onic_hal::regs::cmac::{ADAPTER_STATS, CMAC_STATS, XDP_STAT_NAMES};

use crate::stats::counters::{counters_add_assign, QueueCounters};
use crate::stats::hw::HW_COUNTERS;

/// Entries of the reference driver's `ethtool -S` list (59 CMAC + 5 adapter + 7 XDP).
pub const C_DRIVER_STATS: usize = HW_COUNTERS + XDP_STAT_NAMES.len();

/// A per-queue counter: its name after the queue prefix, and how to read it.
pub type QueueStat = (&'static str, fn(&QueueCounters) -> u64);

/// The per-RX-queue counters, named `rx{q}_<name>`.
pub const RX_QUEUE_STATS: [QueueStat; 24] = [
    ("packets", |c| c.rx.rx_packets),
    ("bytes", |c| c.rx.rx_bytes),
    ("cmpt_errors", |c| c.rx.rx_cmpt_errors),
    ("bad_length", |c| c.rx.rx_bad_length),
    ("multi_buffer", |c| c.rx.rx_multi_buffer),
    ("no_page", |c| c.rx.rx_no_page),
    ("alloc_fail", |c| c.rx.refill_alloc_failures),
    ("pass_refused", |c| c.pair.rx_pass_refused),
    ("xdp_pass", |c| c.pair.rx_xdp_pass),
    ("xdp_drop", |c| c.pair.rx_xdp_drop),
    ("xdp_tx", |c| c.pair.rx_xdp_tx),
    ("xdp_tx_errors", |c| c.pair.rx_xdp_tx_errors),
    ("xdp_redirect", |c| c.pair.rx_xdp_redirect),
    ("xdp_redirect_errors", |c| c.pair.rx_xdp_redirect_errors),
    ("xdp_aborted", |c| c.pair.rx_xdp_aborted),
    ("xdp_invalid", |c| c.pair.rx_xdp_invalid),
    ("bad_page", |c| c.rx.refill_bad_pages),
    ("stall_polls", |c| c.rx.stall_polls),
    ("queue_errors", |c| c.rx.queue_errors),
    ("restarts", |c| c.rx.restarts),
    ("abandoned", |c| c.rx.rx_abandoned),
    ("xsk_packets", |c| c.xsk.rx_packets),
    ("xsk_bytes", |c| c.xsk.rx_bytes),
    ("xsk_fill_empty", |c| c.xsk.rx_fill_empty),
];

/// The per-TX-queue counters, named `tx{q}_<name>`.
pub const TX_QUEUE_STATS: [QueueStat; 15] = [
    ("packets", |c| c.tx.tx_packets),
    ("bytes", |c| c.tx.tx_bytes),
    ("busy", |c| c.tx.tx_busy),
    ("bad_length", |c| c.tx.tx_bad_length),
    ("stopped", |c| c.tx.stops),
    ("wake", |c| c.tx.wakes),
    ("doorbells", |c| c.tx.doorbells),
    ("xdp_xmit", |c| c.tx.tx_xdp_xmit),
    ("xdp_xmit_errors", |c| c.tx.tx_xdp_xmit_errors),
    ("stall_reclaims", |c| c.tx.stall_reclaims),
    ("queue_errors", |c| c.tx.queue_errors),
    ("restarts", |c| c.tx.restarts),
    ("aborted", |c| c.tx.tx_aborted),
    ("xsk_packets", |c| c.xsk.tx_packets),
    ("xsk_bytes", |c| c.xsk.tx_bytes),
];

/// The page-pool counters, summed over the queues, with Linux's `page_pool` ethtool names.
pub const PAGE_POOL_STATS: [QueueStat; 11] = [
    ("rx_pp_alloc_fast", |c| c.pool.alloc.fast),
    ("rx_pp_alloc_slow", |c| c.pool.alloc.slow),
    ("rx_pp_alloc_slow_ho", |c| c.pool.alloc.slow_high_order),
    ("rx_pp_alloc_empty", |c| c.pool.alloc.empty),
    ("rx_pp_alloc_refill", |c| c.pool.alloc.refill),
    ("rx_pp_alloc_waive", |c| c.pool.alloc.waive),
    ("rx_pp_recycle_cached", |c| c.pool.recycle.cached),
    ("rx_pp_recycle_cache_full", |c| c.pool.recycle.cache_full),
    ("rx_pp_recycle_ring", |c| c.pool.recycle.ring),
    ("rx_pp_recycle_ring_full", |c| c.pool.recycle.ring_full),
    ("rx_pp_recycle_released_ref", |c| c.pool.recycle.released_refcnt),
];

/// The name of one `ethtool -S` entry; `Display` writes it (at most 31 bytes, so it fits
/// `ETH_GSTRING_LEN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatName {
    /// A fixed name (the reference driver's list, the page-pool names).
    Fixed(&'static str),
    /// A per-queue name: `{dir}{queue}_{name}`.
    Queue {
        /// `"rx"` or `"tx"`.
        dir: &'static str,
        /// The queue index.
        queue: u16,
        /// The counter's name.
        name: &'static str,
    },
}

impl fmt::Display for StatName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Fixed(n) => f.write_str(n),
            Self::Queue { dir, queue, name } => write!(f, "{dir}{queue}_{name}"),
        }
    }
}

/// The name of entry `i` of the reference driver's 71 (`None` past them).
#[must_use]
pub fn c_driver_stat_name(i: usize) -> Option<&'static str> {
    CMAC_STATS
        .iter()
        .chain(ADAPTER_STATS.iter())
        .map(|c| c.name)
        .chain(XDP_STAT_NAMES.iter().copied())
        .nth(i)
}

/// The whole `ethtool -S` view of one port: hardware counters read once, and the queues'
/// snapshots.
#[derive(Clone, Copy, Debug)]
pub struct EthtoolStats<'q> {
    hw: [u64; HW_COUNTERS],
    queues: &'q [QueueCounters],
}

impl<'q> EthtoolStats<'q> {
    /// The view over counters already read (`hw` from [`crate::Device::hw_counters`] or
    /// [`crate::stats::hw::read_hw_counters`]).
    #[must_use]
    pub const fn new(hw: [u64; HW_COUNTERS], queues: &'q [QueueCounters]) -> Self {
        Self { hw, queues }
    }

    /// Number of entries (`ethtool --show-stats` count, Linux `get_sset_count`).
    #[must_use]
    pub fn len(&self) -> usize {
        C_DRIVER_STATS
            + self.queues.len() * (RX_QUEUE_STATS.len() + TX_QUEUE_STATS.len())
            + PAGE_POOL_STATS.len()
    }

    /// Whether the list is empty (never: the reference driver's 71 are always there).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The sum of one counter over all queues.
    fn sum(&self, f: fn(&QueueCounters) -> u64) -> u64 {
        self.queues.iter().map(f).fold(0, u64::wrapping_add)
    }

    /// The seven XDP counters of the reference driver's list, in its order.
    fn xdp_totals(&self) -> [u64; 7] {
        [
            self.sum(|c| c.pair.rx_xdp_redirect),
            self.sum(|c| c.pair.rx_xdp_pass),
            self.sum(|c| c.pair.rx_xdp_drop),
            self.sum(|c| c.pair.rx_xdp_tx),
            self.sum(|c| c.pair.rx_xdp_tx_errors),
            self.sum(|c| c.tx.tx_xdp_xmit),
            self.sum(|c| c.tx.tx_xdp_xmit_errors),
        ]
    }

    /// Entry `i`: its name and value (`None` past the end).
    #[must_use]
    pub fn entry(&self, i: usize) -> Option<(StatName, u64)> {
        if i < HW_COUNTERS {
            return Some((StatName::Fixed(c_driver_stat_name(i)?), *self.hw.get(i)?));
        }
        if i < C_DRIVER_STATS {
            let k = i - HW_COUNTERS;
            let name = XDP_STAT_NAMES.get(k)?;
            return Some((StatName::Fixed(name), *self.xdp_totals().get(k)?));
        }
        let mut i = i - C_DRIVER_STATS;
        for (dir, list) in [("rx", &RX_QUEUE_STATS[..]), ("tx", &TX_QUEUE_STATS[..])] {
            let n = self.queues.len() * list.len();
            if i < n {
                let (q, k) = (i / list.len(), i % list.len());
                let (name, get) = list.get(k)?;
                let queue = u16::try_from(q).ok()?;
                let value = get(self.queues.get(q)?);
                return Some((StatName::Queue { dir, queue, name }, value));
            }
            i -= n;
        }
        let (name, get) = PAGE_POOL_STATS.get(i)?;
        Some((StatName::Fixed(name), self.sum(*get)))
    }

    /// Every entry in order.
    pub fn iter(&self) -> impl Iterator<Item = (StatName, u64)> + '_ {
        (0..self.len()).filter_map(|i| self.entry(i))
    }

    /// Writes the values in order into `out` (Linux `get_ethtool_stats`); returns how many were
    /// written (all of them if `out` is long enough).
    pub fn fill(&self, out: &mut [u64]) -> usize {
        let mut n = 0;
        for (slot, (_, v)) in out.iter_mut().zip(self.iter()) {
            *slot = v;
            n += 1;
        }
        n
    }

    /// The value of the entry called `name` (for tests and tools).
    #[must_use]
    pub fn get(&self, name: &str) -> Option<u64> {
        let mut buf = NameBuf::new();
        self.iter().find_map(|(n, v)| {
            buf.clear();
            fmt::write(&mut buf, format_args!("{n}")).ok()?;
            (buf.as_str() == name).then_some(v)
        })
    }
}

/// A name formatted into a fixed buffer (ETH_GSTRING_LEN = 32 bytes).
struct NameBuf {
    bytes: [u8; 32],
    len: usize,
}

impl NameBuf {
    const fn new() -> Self {
        Self {
            bytes: [0; 32],
            len: 0,
        }
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("")
    }
}

impl fmt::Write for NameBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let dst = self.bytes.get_mut(self.len..end).ok_or(fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The `rtnl_link_stats64` view (`ip -s link`, Linux `ndo_get_stats64`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Stats64 {
    /// Frames received and handed on (whatever the XDP verdict).
    pub rx_packets: u64,
    /// Frames the device completed.
    pub tx_packets: u64,
    /// Bytes of `rx_packets`.
    pub rx_bytes: u64,
    /// Bytes of `tx_packets`.
    pub tx_bytes: u64,
    /// Received frames that were bad: completion error bit, impossible length.
    pub rx_errors: u64,
    /// Frames refused for their length on transmit.
    pub tx_errors: u64,
    /// Good frames the driver could not keep: no replacement page, longer than one buffer, the
    /// OS refused the packet, lost in the completion ring when the queue was restarted. (XDP drops are the program's decision and are not counted here,
    /// as in Linux drivers; they are in `ethtool -S`.)
    pub rx_dropped: u64,
    /// Frames a TX queue restart handed back to their owners unsent (`tx_aborted`); a refusal
    /// is not a drop, it hands the frame back to its owner.
    pub tx_dropped: u64,
    /// Frames the packet adapter dropped before the driver saw them (no C2H descriptor, ...):
    /// `stat_adapt_rx_drop`.
    pub rx_missed_errors: u64,
}

counters_add_assign!(Stats64 {
    rx_packets,
    tx_packets,
    rx_bytes,
    tx_bytes,
    rx_errors,
    tx_errors,
    rx_dropped,
    tx_dropped,
    rx_missed_errors,
});

impl Stats64 {
    /// Adds up the queues' counters; `adapter_rx_drops` is the adapter's RX drop counter
    /// ([`crate::Device::adapter_rx_drops`]).
    #[must_use]
    pub fn from_queues(queues: &[QueueCounters], adapter_rx_drops: u64) -> Self {
        let mut s = Self {
            rx_missed_errors: adapter_rx_drops,
            ..Self::default()
        };
        for c in queues {
            let q = QueueStats::from(c);
            s.rx_packets += q.rx_packets;
            s.rx_bytes += q.rx_bytes;
            s.tx_packets += q.tx_packets;
            s.tx_bytes += q.tx_bytes;
            s.rx_errors += c.rx.rx_cmpt_errors + c.rx.rx_bad_length;
            s.rx_dropped +=
                c.rx.rx_no_page + c.rx.rx_multi_buffer + c.pair.rx_pass_refused + c.rx.rx_abandoned;
            s.tx_errors += c.tx.tx_bad_length;
            s.tx_dropped += c.tx.tx_aborted;
        }
        s
    }
}
/// One queue index's statistics as the OS's per-queue interfaces name them (Linux's netdev
/// queue statistics, `netdev_stat_ops`): the same packets and bytes [`Stats64`] adds up, so the
/// queues' statistics sum to the link's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QueueStats {
    /// Frames received and handed on (`rx{q}_packets`).
    pub rx_packets: u64,
    /// Bytes of `rx_packets`.
    pub rx_bytes: u64,
    /// Refills that stopped because no page could be had (`rx{q}_refill_alloc_failures`).
    pub rx_alloc_fail: u64,
    /// Frames the device completed (`tx{q}_packets`).
    pub tx_packets: u64,
    /// Bytes of `tx_packets`.
    pub tx_bytes: u64,
}

counters_add_assign!(QueueStats {
    rx_packets,
    rx_bytes,
    rx_alloc_fail,
    tx_packets,
    tx_bytes,
});

impl From<&QueueCounters> for QueueStats {
    fn from(c: &QueueCounters) -> Self {
        Self {
            rx_packets: c.rx.rx_packets,
            rx_bytes: c.rx.rx_bytes,
            rx_alloc_fail: c.rx.refill_alloc_failures,
            tx_packets: c.tx.tx_packets,
            tx_bytes: c.tx.tx_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::string::ToString;
    use std::vec::Vec;

    use super::*;

    #[test]
    fn counter_structs_add_field_by_field_and_wrap() {
        let mut a = QueueCounters::default();
        a.rx.rx_packets = u64::MAX;
        a.tx.tx_xdp_xmit = 2;
        a.pair.rx_pass_refused = 3;
        a.pool.recycle.released_refcnt = 4;
        a.pool.os_returns = 5;
        let mut b = a;
        b.rx.rx_packets = 2;
        a += b;
        assert_eq!(a.rx.rx_packets, 1, "wraps instead of panicking");
        assert_eq!(
            (
                a.tx.tx_xdp_xmit,
                a.pair.rx_pass_refused,
                a.pool.recycle.released_refcnt,
                a.pool.os_returns
            ),
            (4, 6, 8, 10)
        );
        let mut s = Stats64::from_queues(&[a], 7);
        s += Stats64::from_queues(&[b], 1);
        assert_eq!((s.rx_packets, s.rx_missed_errors), (3, 8));
    }

    #[test]
    fn queue_stats_sum_to_the_link_stats() {
        let mut a = QueueCounters::default();
        a.rx.rx_packets = 5;
        a.rx.rx_bytes = 300;
        a.rx.refill_alloc_failures = 2;
        a.rx.rx_no_page = 9;
        a.tx.tx_packets = 7;
        a.tx.tx_bytes = 420;
        a.tx.queued = 11;
        let mut b = QueueCounters::default();
        b.rx.rx_packets = 1;
        b.rx.rx_bytes = 64;
        b.tx.tx_packets = 3;
        b.tx.tx_bytes = 180;
        let qa = QueueStats::from(&a);
        assert_eq!(
            qa,
            QueueStats {
                rx_packets: 5,
                rx_bytes: 300,
                rx_alloc_fail: 2,
                tx_packets: 7,
                tx_bytes: 420
            }
        );
        let mut sum = qa;
        sum += QueueStats::from(&b);
        let link = Stats64::from_queues(&[a, b], 4);
        assert_eq!(
            (sum.rx_packets, sum.rx_bytes, sum.tx_packets, sum.tx_bytes),
            (link.rx_packets, link.rx_bytes, link.tx_packets, link.tx_bytes)
        );
        assert_eq!(sum.rx_alloc_fail, 2);
    }

    fn counters(q: u64) -> QueueCounters {
        let mut c = QueueCounters::default();
        c.rx.rx_packets = 10 + q;
        c.rx.rx_bytes = 1000 * (q + 1);
        c.rx.rx_no_page = 1;
        c.rx.rx_cmpt_errors = 2;
        c.tx.tx_packets = 5;
        c.tx.tx_xdp_xmit = 3;
        c.pair.rx_xdp_drop = 4 + q;
        c.pair.rx_xdp_redirect = 1;
        c.pool.alloc.fast = 100;
        c.xsk.rx_packets = 6 + q;
        c.xsk.tx_bytes = 700;
        c
    }

    #[test]
    #[cfg_attr(miri, ignore = "plain values only; slow under Miri")]
    fn the_reference_list_comes_first_then_queues_then_pools() {
        let qs = [counters(0), counters(1)];
        let mut hw = [0u64; HW_COUNTERS];
        for (i, v) in hw.iter_mut().enumerate() {
            *v = (1 << 40) + i as u64;
        }
        let s = EthtoolStats::new(hw, &qs);
        assert_eq!(s.len(), 71 + 2 * (24 + 15) + 11);
        let names: Vec<_> = s.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(names.len(), s.len());
        assert_eq!(names[0], "stat_tx_total_pkts");
        assert_eq!(names[58], "stat_rx_truncated");
        assert_eq!(names[59], "stat_adapt_tx_sent");
        assert_eq!(names[63], "stat_adapt_rx_error");
        assert_eq!(names[64..71], XDP_STAT_NAMES);
        assert_eq!(names[71], "rx0_packets");
        assert_eq!(names[71 + 23], "rx0_xsk_fill_empty");
        assert_eq!(names[71 + 24], "rx1_packets");
        assert_eq!(names[71 + 2 * 24], "tx0_packets");
        assert_eq!(names[71 + 2 * 24 + 14], "tx0_xsk_bytes");
        assert_eq!(
            names.last().map(String::as_str),
            Some("rx_pp_recycle_released_ref")
        );
        assert!(names.iter().all(|n| n.len() < 32));
        // Full-width hardware values, sums for the XDP and pool entries.
        assert_eq!(s.get("stat_tx_total_pkts"), Some(1 << 40));
        assert_eq!(s.get("rx_xdp_drop"), Some(9));
        assert_eq!(s.get("rx_xdp_redirect"), Some(2));
        assert_eq!(s.get("tx_xdp_xmit"), Some(6));
        assert_eq!(s.get("rx1_xdp_drop"), Some(5));
        assert_eq!(s.get("rx1_bytes"), Some(2000));
        assert_eq!(s.get("rx1_xsk_packets"), Some(7));
        assert_eq!(s.get("tx0_xsk_bytes"), Some(700));
        assert_eq!(s.get("rx_pp_alloc_fast"), Some(200));
        assert_eq!(s.get("nonexistent"), None);
        let mut out = [0u64; 200];
        assert_eq!(s.fill(&mut out), s.len());
        assert_eq!(out[71], 10);
        let mut short = [0u64; 5];
        assert_eq!(s.fill(&mut short), 5);
        assert_eq!(s.entry(s.len()), None);
        for (i, name) in names.iter().take(71).enumerate() {
            assert_eq!(c_driver_stat_name(i), Some(name.as_str()));
        }
        assert_eq!(c_driver_stat_name(71), None);
    }

    use std::string::String;

    #[test]
    fn stats64_adds_up_queues_and_the_adapter_drops() {
        let qs = [counters(0), counters(1)];
        let s = Stats64::from_queues(&qs, 7);
        assert_eq!(s.rx_packets, 21);
        assert_eq!(s.rx_bytes, 3000);
        assert_eq!(s.tx_packets, 10);
        assert_eq!(s.rx_errors, 4);
        assert_eq!(s.rx_dropped, 2);
        assert_eq!(s.rx_missed_errors, 7);
    }
}

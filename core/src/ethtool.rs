//! The ethtool surface every OS shim and the `onic` tool share: the `ethtool -S` list (names and
//! values), the `stats64` view, and the typed, all-or-nothing checks behind `-X/-x`, `-n/-N
//! rx-flow-hash`, `-L`, `-G`, MTU changes and the link state.
//!
//! # `ethtool -S`
//!
//! The list starts with the reference driver's 71 entries in its order (hardware.md §10.5): the 59
//! CMAC counters latched by TICK, the 5 packet-adapter counters, then the 7 XDP counters summed
//! over all queues. Hardware counters are read in full (48-bit CMAC, 64-bit adapter; the reference
//! driver reports the low 32 bits only, see [`crate::stats::read_hw_counters`]). Then, following
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

use onic_hal::regs::cmac::{self, ADAPTER_STATS, CMAC_STATS, XDP_STAT_NAMES};
use onic_hal::regs::qdma::tables::RING_SIZES;
use onic_hal::RegisterWindow;

use crate::config::{BufSizeIdx, RingSizeIdx};
use crate::rss::RssError;
use crate::stats::{QueueCounters, HW_COUNTERS};

/// Entries of the reference driver's `ethtool -S` list (59 CMAC + 5 adapter + 7 XDP).
pub const C_DRIVER_STATS: usize = HW_COUNTERS + XDP_STAT_NAMES.len();

/// A per-queue counter: its name after the queue prefix, and how to read it.
pub type QueueStat = (&'static str, fn(&QueueCounters) -> u64);

/// The per-RX-queue counters, named `rx{q}_<name>`.
pub const RX_QUEUE_STATS: [QueueStat; 16] = [
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
];

/// The per-TX-queue counters, named `tx{q}_<name>`.
pub const TX_QUEUE_STATS: [QueueStat; 9] = [
    ("packets", |c| c.tx.tx_packets),
    ("bytes", |c| c.tx.tx_bytes),
    ("busy", |c| c.tx.tx_busy),
    ("bad_length", |c| c.tx.tx_bad_length),
    ("stopped", |c| c.tx.stops),
    ("wake", |c| c.tx.wakes),
    ("doorbells", |c| c.tx.doorbells),
    ("xdp_xmit", |c| c.tx.tx_xdp_xmit),
    ("xdp_xmit_errors", |c| c.tx.tx_xdp_xmit_errors),
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
    /// [`crate::stats::read_hw_counters`]).
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
            return Some((StatName::Fixed(c_driver_stat_name(i)?), self.hw[i]));
        }
        if i < C_DRIVER_STATS {
            let k = i - HW_COUNTERS;
            return Some((StatName::Fixed(XDP_STAT_NAMES[k]), self.xdp_totals()[k]));
        }
        let mut i = i - C_DRIVER_STATS;
        for (dir, list) in [("rx", &RX_QUEUE_STATS[..]), ("tx", &TX_QUEUE_STATS[..])] {
            let n = self.queues.len() * list.len();
            if i < n {
                let (q, k) = (i / list.len(), i % list.len());
                let (name, get) = list[k];
                let queue = u16::try_from(q).ok()?;
                return Some((StatName::Queue { dir, queue, name }, get(&self.queues[q])));
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

crate::counters_add_assign!(Stats64 {
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
            s.rx_packets += c.rx.rx_packets;
            s.rx_bytes += c.rx.rx_bytes;
            s.tx_packets += c.tx.tx_packets;
            s.tx_bytes += c.tx.tx_bytes;
            s.rx_errors += c.rx.rx_cmpt_errors + c.rx.rx_bad_length;
            s.rx_dropped +=
                c.rx.rx_no_page + c.rx.rx_multi_buffer + c.pair.rx_pass_refused + c.rx.rx_abandoned;
            s.tx_errors += c.tx.tx_bad_length;
            s.tx_dropped += c.tx.tx_aborted;
        }
        s
    }
}

/// The packet adapter's RX drop counter of `port` (64 bits, read without tearing; no TICK
/// needed, the adapter's counters run free).
pub(crate) fn adapter_rx_drops<W: RegisterWindow>(shell: &W, port: u8) -> u64 {
    crate::stats::read_u64_untorn(shell, cmac::adapter::RX_DROP_PKTS.on(cmac::adapter_base(port)))
}

/// Why an ethtool request was refused. Nothing was changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum EthtoolError {
    /// An RSS request (`-X`) or a channel change the RSS table does not allow.
    Rss(RssError),
    /// `-L combined n` outside `1..=max`.
    Channels {
        /// Count asked for.
        requested: u32,
        /// The function's queue pairs.
        max: u16,
    },
    /// `-L rx n` / `tx n` / `other n`: the queues come in pairs, only `combined` is supported.
    ChannelsNotCombined,
    /// `-G` with a ring size the QDMA ring-size table does not have.
    RingSize {
        /// Descriptors asked for.
        requested: u32,
    },
    /// `-G` for rings this device does not have (mini, jumbo).
    RingKind,
    /// An MTU outside `min..=max`.
    Mtu {
        /// MTU asked for.
        requested: u32,
        /// Smallest accepted.
        min: u32,
        /// Largest accepted.
        max: u32,
    },
    /// `-N rx-flow-hash` asking for other fields than the shell hashes: the shell's hash input
    /// is fixed in the RTL.
    FlowHashFixed {
        /// The flow type.
        flow_type: u32,
        /// The fields asked for (`RXH_*` bits).
        requested: u64,
    },
    /// A flow type ethtool does not define.
    FlowType(u32),
}

impl fmt::Display for EthtoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Rss(e) => write!(f, "RSS: {e}"),
            Self::Channels { requested, max } => {
                write!(f, "{requested} combined channels asked for, the function has 1..={max}")
            }
            Self::ChannelsNotCombined => f.write_str("only combined channels are supported (RX and TX come in pairs)"),
            Self::RingSize { requested } => write!(
                f,
                "no ring of {requested} descriptors in the QDMA ring-size table (sizes: 63, 127, 191, 255, 383, 511, 767, 1023, 1535, 3071, 4095, 6143, 8191, 12287, 16383)"
            ),
            Self::RingKind => f.write_str("only RX and TX rings can be sized"),
            Self::Mtu { requested, min, max } => write!(f, "MTU {requested} is outside {min}..={max}"),
            Self::FlowHashFixed { flow_type, requested } => write!(
                f,
                "flow type {flow_type}: the shell's hash fields are fixed, {requested:#x} cannot be set"
            ),
            Self::FlowType(t) => write!(f, "unknown flow type {t}"),
        }
    }
}

impl core::error::Error for EthtoolError {}

impl From<RssError> for EthtoolError {
    fn from(e: RssError) -> Self {
        Self::Rss(e)
    }
}

/// `ethtool -l`: the channel counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Channels {
    /// Queue pairs the function owns (its FMAP range): the most `-L combined` accepts.
    pub max_combined: u16,
    /// Queue pairs in use (RX queues the RSS table spreads over).
    pub combined: u16,
}

/// An `ethtool -L` request (Linux `struct ethtool_channels`, counts only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ChannelsRequest {
    /// RX-only channels (must be 0).
    pub rx: u32,
    /// TX-only channels (must be 0).
    pub tx: u32,
    /// Other channels (must be 0).
    pub other: u32,
    /// Queue pairs.
    pub combined: u32,
}

/// Checks a channel request against a function with `max` queue pairs; returns the pair count.
///
/// # Errors
///
/// [`EthtoolError::ChannelsNotCombined`], [`EthtoolError::Channels`].
pub fn check_channels(req: ChannelsRequest, max: u16) -> Result<u16, EthtoolError> {
    if req.rx != 0 || req.tx != 0 || req.other != 0 {
        return Err(EthtoolError::ChannelsNotCombined);
    }
    match u16::try_from(req.combined) {
        Ok(n) if n >= 1 && n <= max => Ok(n),
        _ => Err(EthtoolError::Channels {
            requested: req.combined,
            max,
        }),
    }
}

/// The ring size for `descriptors` usable descriptors: the first GLBL_RNG_SZ entry with
/// `descriptors + 1` entries (one is the status slot).
///
/// # Errors
///
/// [`EthtoolError::RingSize`] when the table has no such entry.
fn ring_for(descriptors: u32) -> Result<RingSizeIdx, EthtoolError> {
    let err = EthtoolError::RingSize {
        requested: descriptors,
    };
    let entries = descriptors.checked_add(1).ok_or(err)?;
    let i = RING_SIZES.iter().position(|&n| n == entries).ok_or(err)?;
    RingSizeIdx::new(u8::try_from(i).map_err(|_| err)?).map_err(|_| err)
}

/// `ethtool -g` / `-G` view: descriptors per ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RingParams {
    /// Largest RX ring.
    pub rx_max: u32,
    /// Largest TX ring.
    pub tx_max: u32,
    /// Current RX ring (C2H descriptors; the completion ring has the same size).
    pub rx: u32,
    /// Current TX ring.
    pub tx: u32,
}

/// An `ethtool -G` request (Linux `struct ethtool_ringparam`, pending counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RingRequest {
    /// RX descriptors.
    pub rx: u32,
    /// TX descriptors.
    pub tx: u32,
    /// RX mini ring (must be 0).
    pub rx_mini: u32,
    /// RX jumbo ring (must be 0).
    pub rx_jumbo: u32,
}

/// Smallest MTU (Linux `ETH_MIN_MTU`).
pub const MIN_MTU: u32 = 68;
/// Ethernet header bytes between the MTU and the frame length (the shell's frame length has no
/// FCS).
const ETH_HEADER: u32 = 14;

/// The settings `ethtool -G` and MTU changes act on, validated as a whole; the OS shim recreates
/// the queues with them (rings) or just applies them (MTU).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NetSettings {
    rx_ring: RingSizeIdx,
    tx_ring: RingSizeIdx,
    buf: BufSizeIdx,
    max_frame_len: u32,
    mtu: u32,
}

impl NetSettings {
    /// Settings for queues with these rings and buffer, on a shell passing frames up to
    /// `max_frame_len` bytes (without FCS; the stock shell: 1514), with the largest MTU they
    /// allow.
    #[must_use]
    pub fn new(rx_ring: RingSizeIdx, tx_ring: RingSizeIdx, buf: BufSizeIdx, max_frame_len: u32) -> Self {
        let mut s = Self {
            rx_ring,
            tx_ring,
            buf,
            max_frame_len,
            mtu: MIN_MTU,
        };
        s.mtu = s.max_mtu().max(MIN_MTU);
        s
    }

    /// `ethtool -g`.
    #[must_use]
    pub fn rings(&self) -> RingParams {
        let max = RING_SIZES.iter().copied().max().unwrap_or(0).saturating_sub(1);
        RingParams {
            rx_max: max,
            tx_max: max,
            rx: u32::from(self.rx_ring.usable()),
            tx: u32::from(self.tx_ring.usable()),
        }
    }

    /// The ring sizes.
    #[must_use]
    pub const fn ring_sizes(&self) -> (RingSizeIdx, RingSizeIdx) {
        (self.rx_ring, self.tx_ring)
    }

    /// `ethtool -G`: both sizes must be in the QDMA ring-size table; returns the new sizes.
    ///
    /// # Errors
    ///
    /// [`EthtoolError::RingKind`] for mini or jumbo rings, [`EthtoolError::RingSize`]; nothing
    /// changes then.
    pub fn set_rings(&mut self, req: RingRequest) -> Result<(RingSizeIdx, RingSizeIdx), EthtoolError> {
        if req.rx_mini != 0 || req.rx_jumbo != 0 {
            return Err(EthtoolError::RingKind);
        }
        let rx = ring_for(req.rx)?;
        let tx = ring_for(req.tx)?;
        self.rx_ring = rx;
        self.tx_ring = tx;
        Ok((rx, tx))
    }

    /// The largest MTU: a frame must fit one C2H buffer (frames spanning several buffers are
    /// dropped: no multi-buffer support yet) and the shell's largest frame.
    #[must_use]
    pub fn max_mtu(&self) -> u32 {
        self.buf
            .bytes()
            .min(self.max_frame_len)
            .saturating_sub(ETH_HEADER)
    }

    /// The MTU.
    #[must_use]
    pub const fn mtu(&self) -> u32 {
        self.mtu
    }

    /// Sets the MTU.
    ///
    /// # Errors
    ///
    /// [`EthtoolError::Mtu`] outside [`MIN_MTU`]`..=`[`NetSettings::max_mtu`]; nothing changes.
    pub fn set_mtu(&mut self, mtu: u32) -> Result<(), EthtoolError> {
        let max = self.max_mtu();
        if mtu < MIN_MTU || mtu > max {
            return Err(EthtoolError::Mtu {
                requested: mtu,
                min: MIN_MTU,
                max,
            });
        }
        self.mtu = mtu;
        Ok(())
    }
}

/// ethtool flow types (`ETHTOOL_GRXFH` / `-n rx-flow-hash`) and hash-field bits.
pub mod flow {
    /// `TCP_V4_FLOW`.
    pub const TCP_V4: u32 = 0x01;
    /// `UDP_V4_FLOW`.
    pub const UDP_V4: u32 = 0x02;
    /// `SCTP_V4_FLOW`.
    pub const SCTP_V4: u32 = 0x03;
    /// `AH_ESP_V4_FLOW`.
    pub const AH_ESP_V4: u32 = 0x04;
    /// `TCP_V6_FLOW`.
    pub const TCP_V6: u32 = 0x05;
    /// `UDP_V6_FLOW`.
    pub const UDP_V6: u32 = 0x06;
    /// `SCTP_V6_FLOW`.
    pub const SCTP_V6: u32 = 0x07;
    /// `AH_ESP_V6_FLOW`.
    pub const AH_ESP_V6: u32 = 0x08;
    /// `AH_V4_FLOW`.
    pub const AH_V4: u32 = 0x09;
    /// `ESP_V4_FLOW`.
    pub const ESP_V4: u32 = 0x0a;
    /// `AH_V6_FLOW`.
    pub const AH_V6: u32 = 0x0b;
    /// `ESP_V6_FLOW`.
    pub const ESP_V6: u32 = 0x0c;
    /// `IPV4_USER_FLOW`.
    pub const IPV4_USER: u32 = 0x0d;
    /// `IPV6_USER_FLOW`.
    pub const IPV6_USER: u32 = 0x0e;
    /// `IPV4_FLOW`.
    pub const IPV4: u32 = 0x10;
    /// `IPV6_FLOW`.
    pub const IPV6: u32 = 0x11;
    /// `ETHER_FLOW`.
    pub const ETHER: u32 = 0x12;

    /// `FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS`: flags ethtool may set on a flow type; they do not
    /// change which fields are hashed.
    pub const FLAGS: u32 = 0x8000_0000 | 0x4000_0000 | 0x2000_0000;

    /// `RXH_L3_PROTO`: the IP protocol.
    pub const RXH_L3_PROTO: u64 = 1 << 3;
    /// `RXH_IP_SRC`.
    pub const RXH_IP_SRC: u64 = 1 << 4;
    /// `RXH_IP_DST`.
    pub const RXH_IP_DST: u64 = 1 << 5;
    /// `RXH_L4_B_0_1`: the first two bytes after the IP header (source port).
    pub const RXH_L4_B_0_1: u64 = 1 << 6;
    /// `RXH_L4_B_2_3`: the next two (destination port).
    pub const RXH_L4_B_2_3: u64 = 1 << 7;
}

/// What the shell hashes for a flow type (`ethtool -n eth0 rx-flow-hash udp4`), stated as it is:
/// for every IPv4 frame, whatever its protocol, the protocol number, the source and destination
/// addresses and the 4 bytes after the IPv4 header (hardware.md §9.4; for TCP/UDP/SCTP those are
/// the ports, for other protocols whatever lies there). IPv6 and non-IP frames are not hashed
/// (value 0, table entry 0). The flag bits of [`flow::FLAGS`] are ignored.
///
/// # Errors
///
/// [`EthtoolError::FlowType`] for a value ethtool does not define.
pub const fn rx_flow_hash(flow_type: u32) -> Result<u64, EthtoolError> {
    use flow::*;
    match flow_type & !FLAGS {
        TCP_V4 | UDP_V4 | SCTP_V4 | AH_ESP_V4 | AH_V4 | ESP_V4 | IPV4_USER | IPV4 => {
            Ok(RXH_L3_PROTO | RXH_IP_SRC | RXH_IP_DST | RXH_L4_B_0_1 | RXH_L4_B_2_3)
        }
        TCP_V6 | UDP_V6 | SCTP_V6 | AH_ESP_V6 | AH_V6 | ESP_V6 | IPV6_USER | IPV6 | ETHER => Ok(0),
        other => Err(EthtoolError::FlowType(other)),
    }
}

/// `ethtool -N eth0 rx-flow-hash ...`: accepted only if it asks for exactly what the shell
/// already hashes (the RTL's input is fixed).
///
/// # Errors
///
/// [`EthtoolError::FlowHashFixed`], [`EthtoolError::FlowType`].
pub const fn set_rx_flow_hash(flow_type: u32, fields: u64) -> Result<(), EthtoolError> {
    match rx_flow_hash(flow_type) {
        Ok(f) if f == fields => Ok(()),
        Ok(_) => Err(EthtoolError::FlowHashFixed {
            flow_type,
            requested: fields,
        }),
        Err(e) => Err(e),
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
        assert_eq!(s.len(), 71 + 2 * (16 + 9) + 11);
        let names: Vec<_> = s.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(names.len(), s.len());
        assert_eq!(names[0], "stat_tx_total_pkts");
        assert_eq!(names[58], "stat_rx_truncated");
        assert_eq!(names[59], "stat_adapt_tx_sent");
        assert_eq!(names[63], "stat_adapt_rx_error");
        assert_eq!(names[64..71], XDP_STAT_NAMES);
        assert_eq!(names[71], "rx0_packets");
        assert_eq!(names[71 + 16], "rx1_packets");
        assert_eq!(names[71 + 32], "tx0_packets");
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

    #[test]
    fn channels_are_combined_and_bounded() {
        let ok = ChannelsRequest {
            combined: 4,
            ..ChannelsRequest::default()
        };
        assert_eq!(check_channels(ok, 8), Ok(4));
        assert_eq!(
            check_channels(ChannelsRequest { combined: 9, ..ok }, 8),
            Err(EthtoolError::Channels { requested: 9, max: 8 })
        );
        assert!(check_channels(ChannelsRequest { combined: 0, ..ok }, 8).is_err());
        assert!(check_channels(
            ChannelsRequest {
                combined: u32::MAX,
                ..ok
            },
            8
        )
        .is_err());
        assert_eq!(
            check_channels(ChannelsRequest { rx: 1, ..ok }, 8),
            Err(EthtoolError::ChannelsNotCombined)
        );
    }

    #[test]
    fn rings_come_from_the_table_and_bad_sizes_change_nothing() {
        let r = |i| RingSizeIdx::new(i).unwrap();
        let mut s = NetSettings::new(r(8), r(0), BufSizeIdx::new(5).unwrap(), 1514);
        assert_eq!(
            s.rings(),
            RingParams {
                rx_max: 16383,
                tx_max: 16383,
                rx: 1023,
                tx: 4095
            }
        );
        let before = s;
        for bad in [
            RingRequest {
                rx: 1000,
                tx: 4095,
                ..RingRequest::default()
            },
            RingRequest {
                rx: 1023,
                tx: 0,
                ..RingRequest::default()
            },
            RingRequest {
                rx: u32::MAX,
                tx: 4095,
                ..RingRequest::default()
            },
            RingRequest {
                rx: 1023,
                tx: 4095,
                rx_mini: 1,
                ..RingRequest::default()
            },
        ] {
            assert!(s.set_rings(bad).is_err());
            assert_eq!(s, before);
        }
        let (rx, tx) = s
            .set_rings(RingRequest {
                rx: 511,
                tx: 63,
                ..RingRequest::default()
            })
            .unwrap();
        assert_eq!((rx.entries(), tx.entries()), (512, 64));
        assert_eq!(s.rings().rx, 511);
    }

    #[test]
    fn mtu_is_bounded_by_the_buffer_and_the_shell() {
        let r = RingSizeIdx::new(8).unwrap();
        let mut s = NetSettings::new(r, r, BufSizeIdx::new(5).unwrap(), 1514);
        assert_eq!((s.mtu(), s.max_mtu()), (1500, 1500));
        assert_eq!(
            s.set_mtu(1501),
            Err(EthtoolError::Mtu {
                requested: 1501,
                min: 68,
                max: 1500
            })
        );
        assert!(s.set_mtu(67).is_err());
        assert_eq!(s.mtu(), 1500);
        s.set_mtu(9000 - 8000).unwrap();
        assert_eq!(s.mtu(), 1000);
        // A jumbo shell with 3520-byte buffers: a frame must still fit one buffer.
        let jumbo = NetSettings::new(r, r, BufSizeIdx::new(5).unwrap(), 9600);
        assert_eq!(jumbo.max_mtu(), 3520 - 14);
    }

    #[test]
    fn flow_hash_reports_what_the_shell_hashes_and_refuses_changes() {
        let v4 = flow::RXH_L3_PROTO
            | flow::RXH_IP_SRC
            | flow::RXH_IP_DST
            | flow::RXH_L4_B_0_1
            | flow::RXH_L4_B_2_3;
        assert_eq!(rx_flow_hash(flow::UDP_V4), Ok(v4));
        assert_eq!(rx_flow_hash(flow::IPV4), Ok(v4));
        assert_eq!(rx_flow_hash(flow::UDP_V4 | 0x8000_0000), Ok(v4));
        assert_eq!(rx_flow_hash(flow::TCP_V6), Ok(0));
        assert_eq!(rx_flow_hash(0x77), Err(EthtoolError::FlowType(0x77)));
        assert_eq!(set_rx_flow_hash(flow::TCP_V4, v4), Ok(()));
        assert_eq!(
            set_rx_flow_hash(flow::TCP_V4, flow::RXH_IP_SRC | flow::RXH_IP_DST),
            Err(EthtoolError::FlowHashFixed {
                flow_type: flow::TCP_V4,
                requested: 0x30
            })
        );
    }
}

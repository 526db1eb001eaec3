//! What the C glue and the Rust side share by layout: the `#[repr(C)]` structs passed across
//! the `extern "C"` entry points, the transmit result and the constants that size C arrays.
//!
//! This file and `embed/src/port/abi.rs` (the port's call results, re-exported here) are the one
//! definition. The C declarations the glue uses (`onic_ffi.h`) are generated from the two by
//! cbindgen at every module build (`cargo xtask kmod`, configured by
//! `os-linux/cbindgen.toml`), and [`C_LAYOUTS`] gives the C side compile-time checks of each
//! struct's size, alignment, field offsets and field widths as rustc laid them out (`onic_ffi_layout.h`, from
//! `cargo run -p onic-linux --example c_layout`): a C declaration that drifts from these fails
//! the module build instead of corrupting memory at run time. Nothing here may use a type
//! cbindgen cannot express; kernel types stay on the C side as `void *`.

use core::ffi::c_void;
use core::fmt::{self, Write};
use core::mem::{align_of, offset_of, size_of};

use onic_core::stats::ethtool::Stats64;
use onic_core::stats::MacStatGroups;

pub use onic_embed::port::abi::{PollResult, PortLayout, TxClean, TxState, XmitResult};

/// Queue indices a port may own ([`onic_embed::port::MAX_PORT_QUEUES`], written out as a literal
/// for cbindgen): the C side sizes its array of queue vectors with it.
pub const MAX_QUEUES: u16 = 21;

const _: () = assert!(MAX_QUEUES == onic_embed::port::MAX_PORT_QUEUES);

impl From<Stats64> for LinkStats {
    fn from(s: Stats64) -> Self {
        Self {
            rx_packets: s.rx_packets,
            rx_bytes: s.rx_bytes,
            rx_dropped: s.rx_dropped,
            rx_errors: s.rx_errors,
            tx_packets: s.tx_packets,
            tx_bytes: s.tx_bytes,
            tx_dropped: s.tx_dropped,
            tx_errors: s.tx_errors,
            rx_missed_errors: s.rx_missed_errors,
        }
    }
}

/// The netdev's link statistics (`rtnl_link_stats64` fields the driver fills, from the core's
/// [`onic_core::stats::ethtool::Stats64`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct LinkStats {
    /// Frames received (whatever the XDP verdict).
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Good frames the driver could not keep (no page, too long, refused by the stack); XDP
    /// drops are the program's decision and are counted in `ethtool -S` only.
    pub rx_dropped: u64,
    /// Completions with errors or impossible lengths.
    pub rx_errors: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames not sent (0 here: the glue counts the packets it drops in the kernel's per-CPU
    /// core counter, which `dev_get_stats` adds).
    pub tx_dropped: u64,
    /// Frames refused for their length.
    pub tx_errors: u64,
    /// Frames the packet adapter dropped before the driver saw them (`stat_adapt_rx_drop`).
    pub rx_missed_errors: u64,
}

/// One queue index's statistics for the kernel's netdev queue statistics (`netdev_stat_ops`,
/// `struct netdev_queue_stats_rx`/`_tx`), from the core's
/// [`onic_core::stats::ethtool::QueueStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct QueueStats {
    /// Frames received (whatever the XDP verdict).
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Refills that found no page.
    pub rx_alloc_fail: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
}

impl From<onic_core::stats::ethtool::QueueStats> for QueueStats {
    fn from(s: onic_core::stats::ethtool::QueueStats) -> Self {
        Self {
            rx_packets: s.rx_packets,
            rx_bytes: s.rx_bytes,
            rx_alloc_fail: s.rx_alloc_fail,
            tx_packets: s.tx_packets,
            tx_bytes: s.tx_bytes,
        }
    }
}

/// A UMEM frame as the glue hands it over: the chunk of an RX frame (`xsk_buff_alloc`) or a
/// descriptor of the socket's TX ring (`xsk_tx_peek_release_desc_batch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct XskChunk {
    /// CPU address of the first byte: the chunk's (RX), the frame's (TX).
    pub virt: *mut u8,
    /// Device address of the same byte through the pool's DMA mapping (a pool is only bound
    /// where the DMA API maps for the device).
    pub dma: u64,
    /// UMEM address of the same byte.
    pub addr: u64,
    /// Bytes: the whole chunk, its UMEM headroom included (RX), the frame's length (TX).
    pub len: u32,
    /// The UMEM headroom at the chunk's start the driver leaves alone (RX; 0 for TX).
    pub headroom: u32,
}

impl XskChunk {
    /// A chunk for the glue to fill in.
    #[must_use]
    pub const fn empty() -> Self {
        Self {
            virt: core::ptr::null_mut(),
            dma: 0,
            addr: 0,
            len: 0,
            headroom: 0,
        }
    }
}

/// Why `onic_rs_xsk_source` refused: anything else (the restart on the new buffers failed).
pub const XSK_WHY_NONE: u8 = 0;
/// ... no XSK pool bound to the queue.
pub const XSK_WHY_NOT_BOUND: u8 = 1;
/// ... the pool's chunks are too small for an RX buffer.
pub const XSK_WHY_CHUNK: u8 = 2;

/// Value of a standard statistic the device does not count: the kernel's
/// `ETHTOOL_STAT_NOT_SET`, which ethtool's netlink reply leaves out.
pub const STAT_NOT_SET: u64 = 0xFFFF_FFFF_FFFF_FFFF;

/// `devlink dev info`: the identity registers of the port's device (the core's
/// `DeviceIdentity`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct DevInfo {
    /// BUILD_STATUS: the shell's build stamp.
    pub shell_build: u32,
    /// CORE_VERSION of the port's CMAC.
    pub cmac_version: u32,
}

/// A devlink health dump of one queue index: its contexts as the QDMA holds them (the stack's
/// H2C ring, the C2H ring, its completion and prefetch contexts), decoded, and the queue-health
/// counters its owners published.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct QueueDump {
    /// Absolute queue id.
    pub abs: u32,
    /// H2C software context: producer index, queue enable, error field.
    pub tx_pidx: u32,
    /// H2C queue enabled.
    pub tx_qen: u32,
    /// H2C software context error field.
    pub tx_err: u32,
    /// H2C hardware context: consumer index.
    pub tx_cidx: u32,
    /// H2C hardware context: descriptors pending.
    pub tx_desc_pending: u32,
    /// C2H software context: producer index.
    pub rx_pidx: u32,
    /// C2H queue enabled.
    pub rx_qen: u32,
    /// C2H software context error field.
    pub rx_err: u32,
    /// C2H hardware context: consumer index.
    pub rx_cidx: u32,
    /// Completion context: producer index.
    pub cmpt_pidx: u32,
    /// Completion context: consumer index.
    pub cmpt_cidx: u32,
    /// Completion context: the color the device writes.
    pub cmpt_color: u32,
    /// Completion context valid.
    pub cmpt_valid: u32,
    /// Completion context error field.
    pub cmpt_err: u32,
    /// Completion context: the timer index of the queue's trigger (C2H_TIMER_CNT), as the
    /// card holds it (set by the queue's CMPT CIDX doorbells, onic_core::moderation).
    pub cmpt_timer_idx: u32,
    /// Completion context: the count threshold index (C2H_CNT_TH).
    pub cmpt_counter_idx: u32,
    /// Prefetch context valid.
    pub pfch_valid: u32,
    /// Prefetch context error.
    pub pfch_err: u32,
    /// `rx{q}_queue_errors`.
    pub rx_queue_errors: u64,
    /// `rx{q}_restarts`.
    pub rx_restarts: u64,
    /// `rx{q}_stall_polls`.
    pub rx_stall_polls: u64,
    /// `rx{q}_bad_length`.
    pub rx_bad_length: u64,
    /// `tx{q}_queue_errors`.
    pub tx_queue_errors: u64,
    /// `tx{q}_restarts`.
    pub tx_restarts: u64,
    /// `tx{q}_stall_reclaims`.
    pub tx_stall_reclaims: u64,
}

impl QueueDump {
    /// The dump of `c` with `counters`.
    #[must_use]
    pub fn new(c: &onic_core::device::health::QueueContexts, counters: &onic_core::QueueCounters) -> Self {
        let (rx, tx) = (&counters.rx, &counters.tx);
        Self {
            abs: u32::from(c.abs),
            tx_pidx: u32::from(c.tx_sw.pidx()),
            tx_qen: u32::from(c.tx_sw.qen()),
            tx_err: u32::from(c.tx_sw.err()),
            tx_cidx: u32::from(c.tx_hw.cidx()),
            tx_desc_pending: u32::from(c.tx_hw.desc_pending()),
            rx_pidx: u32::from(c.rx_sw.pidx()),
            rx_qen: u32::from(c.rx_sw.qen()),
            rx_err: u32::from(c.rx_sw.err()),
            rx_cidx: u32::from(c.rx_hw.cidx()),
            cmpt_pidx: u32::from(c.cmpt.pidx()),
            cmpt_cidx: u32::from(c.cmpt.cidx()),
            cmpt_color: u32::from(c.cmpt.color()),
            cmpt_valid: u32::from(c.cmpt.valid()),
            cmpt_err: u32::from(c.cmpt.err()),
            cmpt_timer_idx: u32::from(c.cmpt.timer_idx()),
            cmpt_counter_idx: u32::from(c.cmpt.counter_idx()),
            pfch_valid: u32::from(c.pfch.valid()),
            pfch_err: u32::from(c.pfch.err()),
            rx_queue_errors: rx.queue_errors,
            rx_restarts: rx.restarts,
            rx_stall_polls: rx.stall_polls,
            rx_bad_length: rx.rx_bad_length,
            tx_queue_errors: tx.queue_errors,
            tx_restarts: tx.restarts,
            tx_stall_reclaims: tx.stall_reclaims,
        }
    }
}

/// Results of `ethtool -t` (`crate::ethtool::SELF_TESTS`, the `ETH_SS_TEST` set), written out
/// as a literal for cbindgen.
pub const SELF_TESTS: usize = 2;
/// Index of the register test's result.
pub const TEST_REGISTERS: usize = 0;
/// Index of the loopback test's result.
pub const TEST_LOOPBACK: usize = 1;
/// Length of a loopback test frame (the core's `LOOPBACK_FRAME_LEN`).
pub const LB_FRAME_LEN: usize = 60;
/// EtherType of the loopback test's frames (the core's `LOOPBACK_ETHERTYPE`).
pub const LB_ETHERTYPE: u16 = 0x88B5;

const _: () = assert!(LB_FRAME_LEN == onic_core::device::line::LOOPBACK_FRAME_LEN);
const _: () = assert!(LB_ETHERTYPE == onic_core::device::line::LOOPBACK_ETHERTYPE);

/// Buckets of the RMON histograms (the kernel's `ETHTOOL_RMON_HIST_MAX`, the core's
/// [`onic_core::stats::mac::RMON_BUCKETS`]), written out as a literal for cbindgen.
pub const RMON_HIST: usize = 10;

const _: () = assert!(RMON_HIST == onic_core::stats::mac::RMON_BUCKETS);

/// One RMON histogram range, laid out as the kernel's `struct ethtool_rmon_hist_range`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct RmonRange {
    /// Shortest frame, bytes on the wire with FCS.
    pub low: u16,
    /// Longest frame.
    pub high: u16,
}

/// The standard statistic groups of a port's MAC, as the C glue copies them into the kernel's
/// `ethtool_eth_mac_stats`, `ethtool_eth_phy_stats`, `ethtool_eth_ctrl_stats`,
/// `ethtool_rmon_stats` and `ethtool_pause_stats` (field names after the kernel's, which follow
/// IEEE 802.3 and RFC 2819). [`STAT_NOT_SET`] where the CMAC has no such counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct MacGroups {
    /// eth-mac FramesTransmittedOK.
    pub frames_transmitted_ok: u64,
    /// eth-mac FramesReceivedOK.
    pub frames_received_ok: u64,
    /// eth-mac FrameCheckSequenceErrors.
    pub frame_check_sequence_errors: u64,
    /// eth-mac OctetsTransmittedOK.
    pub octets_transmitted_ok: u64,
    /// eth-mac OctetsReceivedOK.
    pub octets_received_ok: u64,
    /// eth-mac MulticastFramesXmittedOK.
    pub multicast_frames_xmitted_ok: u64,
    /// eth-mac BroadcastFramesXmittedOK.
    pub broadcast_frames_xmitted_ok: u64,
    /// eth-mac MulticastFramesReceivedOK.
    pub multicast_frames_received_ok: u64,
    /// eth-mac BroadcastFramesReceivedOK.
    pub broadcast_frames_received_ok: u64,
    /// eth-mac InRangeLengthErrors.
    pub in_range_length_errors: u64,
    /// eth-mac FrameTooLongErrors.
    pub frame_too_long_errors: u64,
    /// eth-phy SymbolErrorDuringCarrier.
    pub symbol_error_during_carrier: u64,
    /// eth-ctrl MACControlFramesTransmitted.
    pub mac_control_frames_transmitted: u64,
    /// eth-ctrl MACControlFramesReceived.
    pub mac_control_frames_received: u64,
    /// rmon undersize_pkts.
    pub undersize_pkts: u64,
    /// rmon oversize_pkts.
    pub oversize_pkts: u64,
    /// rmon fragments.
    pub fragments: u64,
    /// rmon jabbers.
    pub jabbers: u64,
    /// rmon hist: received frames per range of [`RMON_RANGES`].
    pub hist: [u64; RMON_HIST],
    /// rmon hist_tx: transmitted frames per range.
    pub hist_tx: [u64; RMON_HIST],
    /// Pause tx_pause_frames.
    pub tx_pause_frames: u64,
    /// Pause rx_pause_frames.
    pub rx_pause_frames: u64,
}

impl From<MacStatGroups> for MacGroups {
    fn from(g: MacStatGroups) -> Self {
        let v = |x: Option<u64>| x.unwrap_or(STAT_NOT_SET);
        Self {
            frames_transmitted_ok: v(g.mac.frames_transmitted_ok),
            frames_received_ok: v(g.mac.frames_received_ok),
            frame_check_sequence_errors: v(g.mac.frame_check_sequence_errors),
            octets_transmitted_ok: v(g.mac.octets_transmitted_ok),
            octets_received_ok: v(g.mac.octets_received_ok),
            multicast_frames_xmitted_ok: v(g.mac.multicast_frames_xmitted_ok),
            broadcast_frames_xmitted_ok: v(g.mac.broadcast_frames_xmitted_ok),
            multicast_frames_received_ok: v(g.mac.multicast_frames_received_ok),
            broadcast_frames_received_ok: v(g.mac.broadcast_frames_received_ok),
            in_range_length_errors: v(g.mac.in_range_length_errors),
            frame_too_long_errors: v(g.mac.frame_too_long_errors),
            symbol_error_during_carrier: v(g.phy.symbol_error_during_carrier),
            mac_control_frames_transmitted: v(g.ctrl.mac_control_frames_transmitted),
            mac_control_frames_received: v(g.ctrl.mac_control_frames_received),
            undersize_pkts: v(g.rmon.undersize_pkts),
            oversize_pkts: v(g.rmon.oversize_pkts),
            fragments: v(g.rmon.fragments),
            jabbers: v(g.rmon.jabbers),
            hist: g.rmon.hist.map(v),
            hist_tx: g.rmon.hist_tx.map(v),
            tx_pause_frames: v(g.pause.tx_pause_frames),
            rx_pause_frames: v(g.pause.rx_pause_frames),
        }
    }
}

/// The RMON histogram ranges the glue hands the kernel with [`MacGroups::hist`]: the core's
/// [`onic_core::stats::mac::RMON_RANGES`], then the all-zero entry that ends the kernel's list.
pub const RMON_RANGES: [RmonRange; RMON_HIST + 1] = {
    let mut out = [RmonRange { low: 0, high: 0 }; RMON_HIST + 1];
    let mut i = 0;
    while i < RMON_HIST {
        let r = onic_core::stats::mac::RMON_RANGES[i];
        out[i] = RmonRange {
            low: r.low,
            high: r.high,
        };
        i += 1;
    }
    out
};

/// What the C glue chooses for a port (`struct onic_port_params`).
#[repr(C)]
pub struct PortParams {
    /// The card's context-command mutex (`struct mutex *`), shared by its functions.
    pub card_lock: *mut c_void,
    /// Simulation mode: the platform device whose DMA API the model sits behind, or null for
    /// the model's own memory. Unused on a card.
    pub dma_dev: *mut c_void,
    /// Queue indices the function may use (MSI-X queue vectors).
    pub max_queues: u16,
    /// Queue indices in use at start.
    pub queues: u16,
    /// PCI function.
    pub func: u8,
    /// Enable RS-FEC on the CMACs.
    pub rs_fec: bool,
}

/// A struct's layout as rustc computed it, under the name the C glue knows it by.
#[derive(Clone, Copy, Debug)]
pub struct CLayout {
    /// The C struct tag (`struct <c_name>`), as `cbindgen.toml` renames the Rust type.
    pub c_name: &'static str,
    /// The Rust type.
    pub rust_name: &'static str,
    /// `size_of`.
    pub size: usize,
    /// `align_of`.
    pub align: usize,
    /// Every field, in declaration order: name, `offset_of`, size.
    pub fields: &'static [(&'static str, usize, usize)],
}

/// The size of the field `get` borrows (never called).
const fn field_size<T, F>(_get: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// The layout of `$t`, with every field listed: the destructuring pattern fails to compile if a
/// field is missing from the list.
macro_rules! c_layout {
    ($t:ident => $c:literal { $($f:ident),* $(,)? }) => {{
        #[allow(dead_code)]
        fn all_fields_listed(v: $t) {
            let $t { $($f: _),* } = v;
        }
        CLayout {
            c_name: $c,
            rust_name: stringify!($t),
            size: size_of::<$t>(),
            align: align_of::<$t>(),
            fields: &[$((
                stringify!($f),
                offset_of!($t, $f),
                field_size::<$t, _>(|v: &$t| &v.$f),
            )),*],
        }
    }};
}

/// Every struct shared with the C glue.
pub const C_LAYOUTS: [CLayout; 12] = [
    c_layout!(PollResult => "onic_poll_result" {
        done, more, redirected, tx_pending, error, adaptive, level, rx_packets, rx_bytes
    }),
    c_layout!(TxClean => "onic_tx_clean" { bytes, packets, in_flight, free, wake_at, error }),
    c_layout!(TxState => "onic_tx_state" {
        next_to_clean, next_to_use, device_cidx, in_flight, free, running, error
    }),
    c_layout!(PortParams => "onic_port_params" {
        card_lock, dma_dev, max_queues, queues, func, rs_fec
    }),
    c_layout!(LinkStats => "onic_link_stats" {
        rx_packets, rx_bytes, rx_dropped, rx_errors, tx_packets, tx_bytes, tx_dropped,
        tx_errors, rx_missed_errors
    }),
    c_layout!(QueueStats => "onic_queue_stats" { rx_packets, rx_bytes, rx_alloc_fail, tx_packets, tx_bytes }),
    c_layout!(PortLayout => "onic_layout" { max_queues, queues, tx_ring, rx_ring, max_ring }),
    c_layout!(RmonRange => "onic_rmon_range" { low, high }),
    c_layout!(MacGroups => "onic_mac_groups" {
        frames_transmitted_ok, frames_received_ok, frame_check_sequence_errors,
        octets_transmitted_ok, octets_received_ok, multicast_frames_xmitted_ok,
        broadcast_frames_xmitted_ok, multicast_frames_received_ok, broadcast_frames_received_ok,
        in_range_length_errors, frame_too_long_errors, symbol_error_during_carrier,
        mac_control_frames_transmitted, mac_control_frames_received, undersize_pkts,
        oversize_pkts, fragments, jabbers, hist, hist_tx, tx_pause_frames, rx_pause_frames
    }),
    c_layout!(DevInfo => "onic_dev_info" { shell_build, cmac_version }),
    c_layout!(XskChunk => "onic_xsk_chunk" { virt, dma, addr, len, headroom }),
    c_layout!(QueueDump => "onic_queue_dump" {
        abs, tx_pidx, tx_qen, tx_err, tx_cidx, tx_desc_pending, rx_pidx, rx_qen, rx_err, rx_cidx,
        cmpt_pidx, cmpt_cidx, cmpt_color, cmpt_valid, cmpt_err, cmpt_timer_idx, cmpt_counter_idx,
        pfch_valid, pfch_err,
        rx_queue_errors, rx_restarts, rx_stall_polls, rx_bad_length, tx_queue_errors, tx_restarts,
        tx_stall_reclaims
    }),
];

/// Writes the C11 `static_assert`s that pin each struct of [`C_LAYOUTS`] (size, alignment,
/// every field's offset and size) to rustc's layout, for a file the glue includes after the generated
/// declarations.
///
/// # Errors
///
/// Those of `out`.
pub fn write_c_asserts(out: &mut impl Write) -> fmt::Result {
    for l in &C_LAYOUTS {
        let (c, r) = (l.c_name, l.rust_name);
        writeln!(out, "/* struct {c} = Rust's {r} */")?;
        writeln!(
            out,
            "static_assert(sizeof(struct {c}) == {}, \"struct {c}: size differs from Rust's {r}\");",
            l.size
        )?;
        writeln!(
            out,
            "static_assert(__alignof__(struct {c}) == {}, \"struct {c}: alignment differs from Rust's {r}\");",
            l.align
        )?;
        for (f, off, size) in l.fields {
            writeln!(
                out,
                "static_assert(offsetof(struct {c}, {f}) == {off}, \"struct {c}: {f} is not where Rust's {r} has it\");"
            )?;
            writeln!(
                out,
                "static_assert(sizeof_field(struct {c}, {f}) == {size}, \"struct {c}: {f} is not as wide as in Rust's {r}\");"
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use std::string::String;

    #[test]
    #[cfg_attr(miri, ignore = "plain values only; slow under Miri")]
    fn asserts_cover_every_field_of_every_struct() {
        let mut s = String::new();
        write_c_asserts(&mut s).unwrap();
        let fields: usize = C_LAYOUTS.iter().map(|l| l.fields.len()).sum();
        assert_eq!(
            s.matches("static_assert(").count(),
            2 * C_LAYOUTS.len() + 2 * fields
        );
        assert!(s.contains("static_assert(sizeof(struct onic_tx_clean) == 32, "));
        assert!(s.contains("static_assert(offsetof(struct onic_tx_clean, error) == 24, "));
        assert!(s.contains("static_assert(sizeof_field(struct onic_tx_clean, packets) == 4, "));
        assert!(s.contains("static_assert(sizeof(struct onic_link_stats) == 72, "));
    }

    #[test]
    fn counters_the_cmac_lacks_are_not_set_and_the_ranges_end_with_zero() {
        let c = MacGroups::from(MacStatGroups::default());
        assert_eq!(c.frames_received_ok, STAT_NOT_SET);
        assert!(c.hist.iter().chain(c.hist_tx.iter()).all(|&v| v == STAT_NOT_SET));
        let mut g = MacStatGroups::default();
        g.rmon.hist[2] = Some(7);
        g.pause.rx_pause_frames = Some(3);
        let c = MacGroups::from(g);
        assert_eq!(
            (c.hist[2], c.rx_pause_frames, c.tx_pause_frames),
            (7, 3, STAT_NOT_SET)
        );
        assert_eq!(RMON_RANGES[0], RmonRange { low: 64, high: 64 });
        assert_eq!(RMON_RANGES[RMON_HIST], RmonRange { low: 0, high: 0 });
        assert!(RMON_RANGES[..RMON_HIST]
            .iter()
            .all(|r| r.high >= r.low && r.low > 0));
    }

    #[test]
    fn offsets_increase_and_fit_the_size() {
        for l in &C_LAYOUTS {
            assert!(
                l.fields.windows(2).all(|w| w[0].1 + w[0].2 <= w[1].1),
                "{}",
                l.c_name
            );
            let (_, off, size) = l.fields.last().unwrap();
            assert!(off + size <= l.size, "{}", l.c_name);
        }
    }
}

//! The standard statistic groups of a port's MAC, as Linux's ethtool names them (`ethtool -S
//! --groups eth-mac eth-phy eth-ctrl rmon`, `ethtool -I --show-pause`): IEEE 802.3 clause 30
//! MAC, PHY and MAC-control counters, the RMON (RFC 2819) size histogram and error classes, and
//! the pause-frame counts, all from the CMAC's statistics counters (hardware.md §10.4, §10.5,
//! §10.7).
//!
//! This is the one place that says which CMAC counter stands for which standard counter. The
//! counters themselves (offsets, widths, the histogram's buckets) are `onic_hal::regs::cmac`'s;
//! the OS shims only copy these typed groups into their own structures.
//!
//! A field is an `Option`: `None` where the CMAC has no counter for the standard one (the
//! collision counters of a full-duplex-only MAC, alignment errors, ...), so a shim can leave it
//! "not reported" instead of claiming zero.

use onic_hal::regs::cmac::{self, stat, Counter, CMAC_STATS, SIZE_BUCKETS};
use onic_hal::{RegisterAccess, RegisterWindow};

use crate::stats::hw::read_latched;

/// One TICK's worth of a port's CMAC counters: the `ethtool -S` list and the latched counters
/// outside it ([`cmac::CMAC_STATS_EXTRA`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmacSnapshot {
    list: [u64; CMAC_STATS.len()],
    extra: [u64; cmac::CMAC_STATS_EXTRA.len()],
}

impl CmacSnapshot {
    /// A TICK latches every counter of `port`'s CMAC, then each counter is read in full (48 bits,
    /// low word then high word).
    pub fn read<W: RegisterWindow>(shell: &W, port: u8) -> Self {
        let base = cmac::cmac_base(port);
        shell.write(cmac::TICK.on(base), cmac::TICK_LATCH);
        let mut s = Self {
            list: [0; CMAC_STATS.len()],
            extra: [0; cmac::CMAC_STATS_EXTRA.len()],
        };
        for (slot, c) in s.list.iter_mut().zip(CMAC_STATS.iter()) {
            *slot = read_latched(shell, base, c);
        }
        for (slot, c) in s.extra.iter_mut().zip(cmac::CMAC_STATS_EXTRA.iter()) {
            *slot = read_latched(shell, base, c);
        }
        s
    }

    /// A snapshot of known values, `list` in [`CMAC_STATS`] order (for tests and tools).
    #[must_use]
    pub const fn from_values(
        list: [u64; CMAC_STATS.len()],
        extra: [u64; cmac::CMAC_STATS_EXTRA.len()],
    ) -> Self {
        Self { list, extra }
    }

    /// The value of counter `c`; `None` for a counter TICK does not latch.
    #[must_use]
    pub fn get(&self, c: Counter) -> Option<u64> {
        let find = |list: &[Counter], values: &[u64]| {
            let i = list.iter().position(|k| k.low == c.low)?;
            values.get(i).copied()
        };
        find(&CMAC_STATS, &self.list).or_else(|| find(&cmac::CMAC_STATS_EXTRA, &self.extra))
    }

    /// The sum of counters `cs` (`None` if any is not latched).
    fn sum(&self, cs: &[Counter]) -> Option<u64> {
        cs.iter()
            .try_fold(0u64, |acc, c| Some(acc.wrapping_add(self.get(*c)?)))
    }
}

/// IEEE 802.3 clause 30 MAC counters (ethtool group `eth-mac`, Linux `ethtool_eth_mac_stats`).
///
/// Octet counts are the CMAC's good-byte counters: whole frames, header and FCS included (clause
/// 30 counts data and padding only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EthMacStats {
    /// aFramesTransmittedOK: `stat_tx_total_good_pkts`.
    pub frames_transmitted_ok: Option<u64>,
    /// aFramesReceivedOK: `stat_rx_total_good_pkts`.
    pub frames_received_ok: Option<u64>,
    /// aFrameCheckSequenceErrors: `stat_rx_pkt_bad_fcs` (frames of a legal size whose FCS is
    /// wrong; runts and giants are counted by RMON).
    pub frame_check_sequence_errors: Option<u64>,
    /// aOctetsTransmittedOK: `stat_tx_total_good_bytes`.
    pub octets_transmitted_ok: Option<u64>,
    /// aOctetsReceivedOK: `stat_rx_total_good_bytes`.
    pub octets_received_ok: Option<u64>,
    /// aMulticastFramesXmittedOK: `stat_tx_multicast`.
    pub multicast_frames_xmitted_ok: Option<u64>,
    /// aBroadcastFramesXmittedOK: `stat_tx_broadcast`.
    pub broadcast_frames_xmitted_ok: Option<u64>,
    /// aMulticastFramesReceivedOK: `stat_rx_multicast`.
    pub multicast_frames_received_ok: Option<u64>,
    /// aBroadcastFramesReceivedOK: `stat_rx_broadcast`.
    pub broadcast_frames_received_ok: Option<u64>,
    /// aInRangeLengthErrors: `stat_rx_inrangeerr` (a length field that disagrees with the frame).
    pub in_range_length_errors: Option<u64>,
    /// aFrameTooLongErrors: `stat_rx_toolong` (frames above the CMAC's largest frame).
    pub frame_too_long_errors: Option<u64>,
}

/// IEEE 802.3 clause 30 PHY counters (ethtool group `eth-phy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EthPhyStats {
    /// aSymbolErrorDuringCarrier: `stat_rx_bad_code`, 64B/66B blocks the PCS could not decode.
    pub symbol_error_during_carrier: Option<u64>,
}

/// IEEE 802.3 clause 30 MAC-control counters (ethtool group `eth-ctrl`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EthCtrlStats {
    /// aMACControlFramesTransmitted: global and priority pause frames sent
    /// (`stat_tx_pause` + `stat_tx_user_pause`), the only MAC control frames the CMAC sends.
    pub mac_control_frames_transmitted: Option<u64>,
    /// aMACControlFramesReceived: global and priority pause frames received
    /// (`stat_rx_pause` + `stat_rx_user_pause`).
    pub mac_control_frames_received: Option<u64>,
}

/// Buckets of the RMON histograms (Linux's `ETHTOOL_RMON_HIST_MAX`).
pub const RMON_BUCKETS: usize = 10;

/// One bucket of the RMON histograms: frames of `low..=high` bytes on the wire, FCS included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmonRange {
    /// Shortest frame.
    pub low: u16,
    /// Longest frame.
    pub high: u16,
}

/// Which of the CMAC's 12 size buckets ([`SIZE_BUCKETS`]) make each RMON bucket: the three
/// between 1519 and 2047 bytes are added up so that the histogram fits the kernel's 10.
const RMON_SPANS: [(usize, usize); RMON_BUCKETS] = [
    (0, 0),
    (1, 1),
    (2, 2),
    (3, 3),
    (4, 4),
    (5, 5),
    (6, 8),
    (9, 9),
    (10, 10),
    (11, 11),
];

const fn rmon_ranges() -> [RmonRange; RMON_BUCKETS] {
    let mut out = [RmonRange { low: 0, high: 0 }; RMON_BUCKETS];
    let mut i = 0;
    while i < RMON_BUCKETS {
        let (first, last) = RMON_SPANS[i];
        out[i] = RmonRange {
            low: SIZE_BUCKETS[first].low,
            high: SIZE_BUCKETS[last].high,
        };
        i += 1;
    }
    out
}

/// The ranges of the RMON histograms, in increasing size: 64, 65-127, 128-255, 256-511,
/// 512-1023, 1024-1518, 1519-2047, 2048-4095, 4096-8191, 8192-9215 bytes. Frames above 9215
/// bytes (`stat_*_pkt_large`) are in no bucket.
pub const RMON_RANGES: [RmonRange; RMON_BUCKETS] = rmon_ranges();

/// RMON (RFC 2819) counters (ethtool group `rmon`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RmonStats {
    /// etherStatsUndersizePkts: `stat_rx_undersize` (under 64 bytes, good FCS).
    pub undersize_pkts: Option<u64>,
    /// etherStatsOversizePkts: `stat_rx_oversize` (above the largest frame, good FCS).
    pub oversize_pkts: Option<u64>,
    /// etherStatsFragments: `stat_rx_fragment` (under 64 bytes, bad FCS).
    pub fragments: Option<u64>,
    /// etherStatsJabbers: `stat_rx_jabber` (above the largest frame, bad FCS).
    pub jabbers: Option<u64>,
    /// Received frames per [`RMON_RANGES`] bucket (`stat_rx_pkt_*`).
    pub hist: [Option<u64>; RMON_BUCKETS],
    /// Transmitted frames per [`RMON_RANGES`] bucket (`stat_tx_pkt_*`).
    pub hist_tx: [Option<u64>; RMON_BUCKETS],
}

/// Global (IEEE 802.3x) pause frames (`ethtool -I --show-pause`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PauseStats {
    /// `stat_tx_pause`.
    pub tx_pause_frames: Option<u64>,
    /// `stat_rx_pause`.
    pub rx_pause_frames: Option<u64>,
}

/// Every standard group of one port, from one TICK.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MacStatGroups {
    /// `eth-mac`.
    pub mac: EthMacStats,
    /// `eth-phy`.
    pub phy: EthPhyStats,
    /// `eth-ctrl`.
    pub ctrl: EthCtrlStats,
    /// `rmon`.
    pub rmon: RmonStats,
    /// Pause frames.
    pub pause: PauseStats,
}

impl MacStatGroups {
    /// Latches and reads `port`'s CMAC counters ([`CmacSnapshot::read`]) and maps them.
    pub fn read<W: RegisterWindow>(shell: &W, port: u8) -> Self {
        Self::from_snapshot(&CmacSnapshot::read(shell, port))
    }

    /// The groups of a snapshot.
    #[must_use]
    pub fn from_snapshot(s: &CmacSnapshot) -> Self {
        Self {
            mac: EthMacStats {
                frames_transmitted_ok: s.get(stat::TX_TOTAL_GOOD_PKTS),
                frames_received_ok: s.get(stat::RX_TOTAL_GOOD_PKTS),
                frame_check_sequence_errors: s.get(stat::RX_PKT_BAD_FCS),
                octets_transmitted_ok: s.get(stat::TX_TOTAL_GOOD_BYTES),
                octets_received_ok: s.get(stat::RX_TOTAL_GOOD_BYTES),
                multicast_frames_xmitted_ok: s.get(stat::TX_MULTICAST),
                broadcast_frames_xmitted_ok: s.get(stat::TX_BROADCAST),
                multicast_frames_received_ok: s.get(stat::RX_MULTICAST),
                broadcast_frames_received_ok: s.get(stat::RX_BROADCAST),
                in_range_length_errors: s.get(stat::RX_INRANGEERR),
                frame_too_long_errors: s.get(stat::RX_TOOLONG),
            },
            phy: EthPhyStats {
                symbol_error_during_carrier: s.get(cmac::STAT_RX_BAD_CODE),
            },
            ctrl: EthCtrlStats {
                mac_control_frames_transmitted: s.sum(&[stat::TX_PAUSE, stat::TX_USER_PAUSE]),
                mac_control_frames_received: s.sum(&[stat::RX_PAUSE, stat::RX_USER_PAUSE]),
            },
            rmon: RmonStats {
                undersize_pkts: s.get(stat::RX_UNDERSIZE),
                oversize_pkts: s.get(stat::RX_OVERSIZE),
                fragments: s.get(stat::RX_FRAGMENT),
                jabbers: s.get(stat::RX_JABBER),
                hist: histogram(s, |b| b.rx),
                hist_tx: histogram(s, |b| b.tx),
            },
            pause: PauseStats {
                tx_pause_frames: s.get(stat::TX_PAUSE),
                rx_pause_frames: s.get(stat::RX_PAUSE),
            },
        }
    }
}

/// One direction's RMON histogram: each bucket the sum of its CMAC buckets.
fn histogram(s: &CmacSnapshot, counter: fn(&cmac::SizeBucket) -> Counter) -> [Option<u64>; RMON_BUCKETS] {
    let mut out = [None; RMON_BUCKETS];
    for (slot, &(first, last)) in out.iter_mut().zip(RMON_SPANS.iter()) {
        *slot = SIZE_BUCKETS.get(first..=last).and_then(|bs| {
            bs.iter()
                .try_fold(0u64, |acc, b| Some(acc.wrapping_add(s.get(counter(b))?)))
        });
    }
    out
}

/// Pause settings of a port's CMAC (`ethtool -a`): whether global pause frames are acted on (RX)
/// and may be sent (TX). There is no pause autonegotiation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PauseParams {
    /// CONF_RX_FC_CTRL_1 has the global pause enable.
    pub rx: bool,
    /// CONF_TX_FC_CTRL_1 has the global pause enable.
    pub tx: bool,
}

impl PauseParams {
    /// Reads the pause enables of `port`'s CMAC (the master PF writes them at bring-up,
    /// hardware.md §10.2 steps 8 and 14).
    pub fn read<W: RegisterWindow>(shell: &W, port: u8) -> Self {
        let base = cmac::cmac_base(port);
        Self {
            rx: shell.read(cmac::CONF_RX_FC_CTRL_1.on(base)) & cmac::PAUSE_GLOBAL != 0,
            tx: shell.read(cmac::CONF_TX_FC_CTRL_1.on(base)) & cmac::PAUSE_GLOBAL != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onic_hal::recording::Recorder;
    use onic_hal::Bar;

    /// Counter `i` of the list reads `1000 + i`, the extra counters `5000 + i`.
    fn numbered() -> CmacSnapshot {
        let mut list = [0; CMAC_STATS.len()];
        for (i, v) in list.iter_mut().enumerate() {
            *v = 1000 + i as u64;
        }
        let mut extra = [0; cmac::CMAC_STATS_EXTRA.len()];
        for (i, v) in extra.iter_mut().enumerate() {
            *v = 5000 + i as u64;
        }
        CmacSnapshot::from_values(list, extra)
    }

    fn by_name(s: &CmacSnapshot, name: &str) -> u64 {
        let c = CMAC_STATS
            .iter()
            .chain(cmac::CMAC_STATS_EXTRA.iter())
            .find(|c| c.name == name)
            .copied();
        c.and_then(|c| s.get(c)).unwrap_or(u64::MAX)
    }

    #[test]
    fn every_group_field_comes_from_its_named_counter() {
        let s = numbered();
        let g = MacStatGroups::from_snapshot(&s);
        let n = |name| Some(by_name(&s, name));
        assert_eq!(g.mac.frames_transmitted_ok, n("stat_tx_total_good_pkts"));
        assert_eq!(g.mac.frames_received_ok, n("stat_rx_total_good_pkts"));
        assert_eq!(g.mac.frame_check_sequence_errors, n("stat_rx_pkt_bad_fcs"));
        assert_eq!(g.mac.octets_transmitted_ok, n("stat_tx_total_good_bytes"));
        assert_eq!(g.mac.octets_received_ok, n("stat_rx_total_good_bytes"));
        assert_eq!(g.mac.multicast_frames_xmitted_ok, n("stat_tx_multicast"));
        assert_eq!(g.mac.broadcast_frames_received_ok, n("stat_rx_broadcast"));
        assert_eq!(g.mac.in_range_length_errors, n("stat_rx_inrangeerr"));
        assert_eq!(g.mac.frame_too_long_errors, n("stat_rx_toolong"));
        assert_eq!(g.phy.symbol_error_during_carrier, Some(5000));
        assert_eq!(
            g.ctrl.mac_control_frames_received,
            Some(by_name(&s, "stat_rx_pause") + by_name(&s, "stat_rx_user_pause"))
        );
        assert_eq!(g.rmon.undersize_pkts, n("stat_rx_undersize"));
        assert_eq!(g.rmon.jabbers, n("stat_rx_jabber"));
        assert_eq!(g.pause.tx_pause_frames, n("stat_tx_pause"));
        assert_eq!(g.pause.rx_pause_frames, n("stat_rx_pause"));
        // Every bucket is set; the 1519-2047 bucket adds up the CMAC's three.
        assert_eq!(g.rmon.hist[0], n("stat_rx_pkt_64_bytes"));
        assert_eq!(g.rmon.hist_tx[5], n("stat_tx_pkt_1024_1518_bytes"));
        let merged = ["1519_1522", "1523_1548", "1549_2047"]
            .iter()
            .map(|r| by_name(&s, &std::format!("stat_rx_pkt_{r}_bytes")))
            .sum::<u64>();
        assert_eq!(g.rmon.hist[6], Some(merged));
        assert_eq!(g.rmon.hist[9], n("stat_rx_pkt_8192_9215_bytes"));
        assert!(g
            .rmon
            .hist
            .iter()
            .chain(g.rmon.hist_tx.iter())
            .all(Option::is_some));
    }

    #[test]
    fn rmon_ranges_cover_64_to_9215_bytes_in_order() {
        assert_eq!(RMON_RANGES[0], RmonRange { low: 64, high: 64 });
        assert_eq!(
            RMON_RANGES[6],
            RmonRange {
                low: 1519,
                high: 2047
            }
        );
        assert_eq!(
            RMON_RANGES[9],
            RmonRange {
                low: 8192,
                high: 9215
            }
        );
        for pair in RMON_RANGES.windows(2) {
            assert_eq!(pair[0].high + 1, pair[1].low);
        }
        // The spans use every CMAC bucket once.
        let used: usize = RMON_SPANS.iter().map(|(a, b)| b - a + 1).sum();
        assert_eq!(used, SIZE_BUCKETS.len());
    }

    #[test]
    fn one_tick_then_every_counter_in_full() {
        let rec = Recorder::opennic();
        let g = MacStatGroups::read(&rec.window(Bar::Shell), 1);
        let log = rec.log();
        // TICK, then low and high word of the 59 listed counters and of stat_rx_bad_code.
        assert_eq!(log.len(), 1 + 2 * (CMAC_STATS.len() + 1));
        assert_eq!(log[0].offset, cmac::TICK.on(cmac::cmac_base(1)).offset());
        assert!(g.mac.frames_received_ok.is_some());
    }

    fn frame(dst: [u8; 6], ethertype: u16, len: usize) -> std::vec::Vec<u8> {
        let mut f = std::vec![0u8; len];
        f[..6].copy_from_slice(&dst);
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f
    }

    /// Frames of known sizes and kinds arrive at the model's port 0; the groups read back over
    /// its shell window count them where the standards put them.
    #[test]
    fn the_models_mac_counts_land_in_the_standard_groups() {
        let card = onic_sim::Card::new(onic_sim::CardConfig::default());
        let shell = card.shell();
        shell.write(cmac::CONF_RX_1.on(cmac::cmac_base(0)), 1);
        let uni = [0x02, 0, 0, 0, 0, 1];
        for _ in 0..3 {
            card.inject(0, &frame(uni, 0x0800, 60)); // 64 bytes on the wire
        }
        for _ in 0..2 {
            card.inject(0, &frame([0xFF; 6], 0x0800, 600)); // 604
        }
        let mut pause = frame([0x01, 0x80, 0xC2, 0, 0, 1], 0x8808, 60);
        pause[14..16].copy_from_slice(&1u16.to_be_bytes());
        card.inject(0, &pause);
        card.inject(0, &frame(uni, 0x0800, 1600)); // 1604: above the stock shell's largest frame
        card.run_until_idle();
        card.faults().bad_fcs_next_frames(2);
        card.inject(0, &frame(uni, 0x0800, 1100)); // bad FCS, legal size: 1104
        card.inject(0, &frame(uni, 0x0800, 40)); // bad FCS, runt: a fragment
        card.inject(0, &frame(uni, 0x0800, 30)); // good FCS, runt: undersize
        card.run_until_idle();

        let g = MacStatGroups::read(&shell, 0);
        assert_eq!(g.mac.frames_received_ok, Some(6));
        assert_eq!(g.mac.frame_too_long_errors, Some(1));
        assert_eq!(g.rmon.oversize_pkts, Some(1));
        assert_eq!(g.mac.broadcast_frames_received_ok, Some(2));
        assert_eq!(g.mac.multicast_frames_received_ok, Some(1), "the pause frame");
        assert_eq!(g.mac.frame_check_sequence_errors, Some(1));
        assert_eq!(g.mac.octets_received_ok, Some(4 * 64 + 2 * 604));
        assert_eq!(g.ctrl.mac_control_frames_received, Some(1));
        assert_eq!(g.pause.rx_pause_frames, Some(1));
        assert_eq!(g.pause.tx_pause_frames, Some(0));
        assert_eq!((g.rmon.undersize_pkts, g.rmon.fragments), (Some(1), Some(1)));
        assert_eq!(g.rmon.hist[0], Some(4));
        assert_eq!(g.rmon.hist[4], Some(2));
        assert_eq!(g.rmon.hist[5], Some(1), "the bad 1104-byte frame is still sized");
        assert_eq!(
            g.rmon.hist[6],
            Some(1),
            "the giant, in the merged 1519-2047 bucket"
        );
        assert_eq!(g.phy.symbol_error_during_carrier, Some(0));
        assert!(card.violations().is_empty());
    }

    #[test]
    fn pause_enables_are_the_global_bit() {
        let rec = Recorder::opennic();
        let w = rec.window(Bar::Shell);
        let base = cmac::cmac_base(0);
        w.write(cmac::CONF_RX_FC_CTRL_1.on(base), 0x3DFF);
        w.write(cmac::CONF_TX_FC_CTRL_1.on(base), 0xFF);
        let p = PauseParams::read(&w, 0);
        assert!(p.rx && !p.tx);
    }
}

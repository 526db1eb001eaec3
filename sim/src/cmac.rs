//! CMAC ports and packet adapters: enable bits, link status, statistics counters with the TICK
//! latch (hardware.md §10), and the adapters' free-running counters (hardware.md §10.6).
//!
//! Sizes on the wire: the MAC appends a 4-byte FCS, so a frame of `len` bytes counts as `len + 4`
//! bytes in every CMAC counter and histogram bucket. The model does not pad short frames (the
//! driver pads to 60 bytes, hardware.md §7.1), so a frame under 60 bytes is a runt on the wire: TX
//! counts it as `pkt_small`, the receiving MAC counts it as `pkt_small` + `undersize` and drops it.

use alloc::collections::BTreeMap;

use onic_hal::regs::cmac::{self as regs, adapter, Counter, CMAC_STATS, CMAC_STATS_EXTRA, RSFEC_STATS};

/// Bytes the MAC adds to every frame.
pub const FCS_LEN: usize = 4;
/// Smallest legal frame on the wire, FCS included.
pub const MIN_WIRE_LEN: usize = 64;

const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_MAC_CONTROL: u16 = 0x8808;
const OPCODE_PAUSE: u16 = 0x0001;
const OPCODE_PFC: u16 = 0x0101;
/// Largest value of the EtherType field that is an 802.3 length.
const MAX_LENGTH_FIELD: u16 = 1500;

/// Live (not yet latched) counters of one CMAC, keyed by direction ("tx"/"rx") and the rest of
/// the ethtool name: `("rx", "pkt_64_bytes")` is `stat_rx_pkt_64_bytes`.
#[derive(Clone, Debug, Default)]
pub(crate) struct MacCounters(BTreeMap<(&'static str, &'static str), u64>);

/// Splits an ethtool counter name `stat_<dir>_<rest>` into (dir, rest).
fn split_name(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix("stat_")?.split_once('_')
}

impl MacCounters {
    fn add(&mut self, dir: &'static str, what: &'static str, n: u64) {
        let c = self.0.entry((dir, what)).or_insert(0);
        *c = c.wrapping_add(n) & ((1 << 48) - 1);
    }

    fn inc(&mut self, dir: &'static str, what: &'static str) {
        self.add(dir, what, 1);
    }

    /// The value of counter `name` (an ethtool name), 0 if never counted.
    pub(crate) fn get(&self, name: &str) -> u64 {
        split_name(name)
            .and_then(|(dir, what)| self.0.iter().find(|((d, w), _)| *d == dir && *w == what))
            .map_or(0, |(_, v)| *v)
    }

    #[cfg(test)]
    fn names(&self) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
        self.0.keys().copied()
    }
}

/// Adapter counters: (packets, bytes) per class.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AdapterCounters {
    pub tx_sent: (u64, u64),
    pub tx_drop: (u64, u64),
    pub rx_recv: (u64, u64),
    pub rx_drop: (u64, u64),
    pub rx_err: (u64, u64),
}

fn bump(c: &mut (u64, u64), len: usize) {
    c.0 = c.0.wrapping_add(1);
    c.1 = c.1.wrapping_add(len as u64);
}

impl AdapterCounters {
    pub(crate) fn count(c: &mut (u64, u64), len: usize) {
        bump(c, len);
    }

    /// The 32-bit register at `offset` in the adapter block, `None` if unimplemented.
    pub(crate) fn read(&self, offset: u32) -> Option<u32> {
        const TX_SENT_PKTS: u32 = adapter::TX_SENT_PKTS.offset();
        const TX_DROP_PKTS: u32 = adapter::TX_DROP_PKTS.offset();
        const RX_RECV_PKTS: u32 = adapter::RX_RECV_PKTS.offset();
        const RX_DROP_PKTS: u32 = adapter::RX_DROP_PKTS.offset();
        const RX_ERR_PKTS: u32 = adapter::RX_ERR_PKTS.offset();
        let pair = match offset & !0xF {
            TX_SENT_PKTS => self.tx_sent,
            TX_DROP_PKTS => self.tx_drop,
            RX_RECV_PKTS => self.rx_recv,
            RX_DROP_PKTS => self.rx_drop,
            RX_ERR_PKTS => self.rx_err,
            _ => return None,
        };
        let v = if offset & 0x8 == 0 { pair.0 } else { pair.1 };
        Some(if offset & 0x4 == 0 {
            v as u32
        } else {
            (v >> 32) as u32
        })
    }
}

/// One CMAC port and its packet adapter.
#[derive(Clone, Debug, Default)]
pub(crate) struct Port {
    /// Registers written (configuration), by offset relative to the CMAC base.
    pub regs: BTreeMap<u32, u32>,
    pub live: MacCounters,
    /// Latched counter values by low-word offset.
    pub latched: BTreeMap<u32, u64>,
    pub adapter: AdapterCounters,
    pub link_up: bool,
    /// Set when the link went down; the next STAT_RX_STATUS read returns 0 and clears it.
    pub link_down_latched: bool,
}

/// Every counter TICK latches.
fn latched() -> impl Iterator<Item = &'static Counter> {
    CMAC_STATS
        .iter()
        .chain(CMAC_STATS_EXTRA.iter())
        .chain(RSFEC_STATS.iter())
}

/// Size bucket of a wire length, as the rest of the `stat_<dir>_pkt_*` counter name.
fn bucket(wire: usize) -> &'static str {
    match wire {
        0..=63 => "pkt_small",
        64 => "pkt_64_bytes",
        65..=127 => "pkt_65_127_bytes",
        128..=255 => "pkt_128_255_bytes",
        256..=511 => "pkt_256_511_bytes",
        512..=1023 => "pkt_512_1023_bytes",
        1024..=1518 => "pkt_1024_1518_bytes",
        1519..=1522 => "pkt_1519_1522_bytes",
        1523..=1548 => "pkt_1523_1548_bytes",
        1549..=2047 => "pkt_1549_2047_bytes",
        2048..=4095 => "pkt_2048_4095_bytes",
        4096..=8191 => "pkt_4096_8191_bytes",
        8192..=9215 => "pkt_8192_9215_bytes",
        _ => "pkt_large",
    }
}

/// Destination class of a frame.
fn cast_suffix(frame: &[u8]) -> Option<&'static str> {
    let dst = frame.get(..6)?;
    Some(if dst.iter().all(|&b| b == 0xFF) {
        "broadcast"
    } else if dst[0] & 1 == 1 {
        "multicast"
    } else {
        "unicast"
    })
}

fn ethertype(frame: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]))
}

/// MAC control opcode if the frame is a MAC control frame.
fn control_opcode(frame: &[u8]) -> Option<u16> {
    if ethertype(frame)? != ETHERTYPE_MAC_CONTROL {
        return None;
    }
    Some(u16::from_be_bytes([*frame.get(14)?, *frame.get(15)?]))
}

/// Symbol errors a frame picked up on the line, as an RS(528,514) decoder sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LineError {
    /// Few enough symbols wrong in one codeword for the code to correct them.
    Correctable,
    /// More symbols wrong in one codeword than the code corrects.
    Uncorrectable,
}

/// What a receiving MAC decided about a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RxVerdict {
    /// Good frame, handed to the packet adapter.
    Deliver,
    /// Good MAC control (pause) frame, consumed by the MAC.
    Consumed,
    /// Bad frame (FCS, size), handed to the adapter marked with an error.
    Error,
}

impl Port {
    pub(crate) fn new() -> Self {
        Self {
            link_up: true,
            ..Self::default()
        }
    }

    pub(crate) fn reg(&self, offset: u32) -> u32 {
        self.regs.get(&offset).copied().unwrap_or(0)
    }

    pub(crate) fn rx_enabled(&self) -> bool {
        self.reg(regs::CONF_RX_1.offset()) & 1 == 1
    }

    pub(crate) fn tx_enabled(&self) -> bool {
        self.reg(regs::CONF_TX_1.offset()) & 1 == 1
    }

    pub(crate) fn gt_loopback(&self) -> bool {
        self.reg(regs::GT_LOOPBACK.offset()) == regs::GT_LOOPBACK_NEAR_END
    }

    /// Whether the receiver decodes RS-FEC (RSFEC_CONF_ENABLE \[0\]).
    pub(crate) fn rsfec_rx(&self) -> bool {
        self.reg(regs::RSFEC_CONF_ENABLE.offset()) & regs::RSFEC_ENABLE_RX != 0
    }

    /// Whether the transmitter encodes RS-FEC (RSFEC_CONF_ENABLE \[1\]).
    pub(crate) fn rsfec_tx(&self) -> bool {
        self.reg(regs::RSFEC_CONF_ENABLE.offset()) & regs::RSFEC_ENABLE_TX != 0
    }

    /// What the RS-FEC decoder makes of a frame that arrived with symbol errors, counting the
    /// codewords it corrected or could not correct; `true` if the frame comes out intact.
    ///
    /// - RS-FEC RX on, correction on: a correctable error is corrected (one codeword counted in
    ///   `stat_rx_rsfec_corrected_cw`), the frame is intact;
    /// - RS-FEC RX on, correction off: nothing is corrected or counted, the frame keeps its errors;
    /// - an uncorrectable error: one codeword counted in `stat_rx_rsfec_uncorrected_cw` (with the
    ///   decoder on), the frame keeps its errors (with indication on the PCS is told so; either
    ///   way its FCS no longer matches);
    /// - RS-FEC RX off: the errors reach the MAC as they are.
    pub(crate) fn fec_decode(&mut self, error: LineError) -> bool {
        if !self.rsfec_rx() {
            return false;
        }
        let correct = self.reg(regs::RSFEC_CONF_IND_CORRECTION.offset()) & regs::RSFEC_CORRECTION != 0;
        match error {
            LineError::Correctable if correct => {
                self.live.inc("rx", "rsfec_corrected_cw");
                true
            }
            LineError::Correctable => false,
            LineError::Uncorrectable => {
                self.live.inc("rx", "rsfec_uncorrected_cw");
                false
            }
        }
    }

    /// Resets the CMAC subsystem: configuration and statistics.
    pub(crate) fn reset_mac(&mut self) {
        self.regs.clear();
        self.live = MacCounters::default();
        self.latched.clear();
    }

    /// Resets the packet adapter's counters.
    pub(crate) fn reset_adapter(&mut self) {
        self.adapter = AdapterCounters::default();
    }

    /// Copies every live counter into the STAT_* registers (TICK): the list's, code violations
    /// ([`CMAC_STATS_EXTRA`], which stay 0: the model has no PCS) and the RS-FEC codeword counts
    /// ([`RSFEC_STATS`]).
    pub(crate) fn tick(&mut self) {
        for c in latched() {
            self.latched.insert(c.low.offset(), self.live.get(c.name));
        }
    }

    /// Latched value of the STAT register containing `offset` (low word or high 16 bits).
    pub(crate) fn read_stat(&self, offset: u32) -> Option<u32> {
        if let Some(v) = self.latched.get(&offset) {
            return Some(*v as u32);
        }
        let low = offset.checked_sub(4)?;
        if latched().any(|c| c.low.offset() == low) {
            return Some((self.latched.get(&low).copied().unwrap_or(0) >> 32) as u32 & 0xFFFF);
        }
        if latched().any(|c| c.low.offset() == offset) {
            return Some(0);
        }
        None
    }

    /// Counts a frame the MAC transmits (no FCS errors are generated on TX).
    pub(crate) fn count_tx(&mut self, frame: &[u8]) {
        let wire = frame.len() + FCS_LEN;
        let c = &mut self.live;
        c.inc("tx", "total_pkts");
        c.add("tx", "total_bytes", wire as u64);
        c.inc("tx", "total_good_pkts");
        c.add("tx", "total_good_bytes", wire as u64);
        c.inc("tx", bucket(wire));
        count_classes(c, "tx", frame);
    }

    /// Counts a frame arriving at the MAC and decides its fate.
    pub(crate) fn count_rx(&mut self, frame: &[u8], fcs_ok: bool, max_frame_len: usize) -> RxVerdict {
        let wire = frame.len() + FCS_LEN;
        let max_wire = max_frame_len + FCS_LEN;
        let c = &mut self.live;
        c.inc("rx", "total_pkts");
        c.add("rx", "total_bytes", wire as u64);
        c.inc("rx", bucket(wire));
        let small = wire < MIN_WIRE_LEN;
        let long = wire > max_wire;
        if small {
            c.inc("rx", if fcs_ok { "undersize" } else { "fragment" });
        }
        if long {
            c.inc("rx", "toolong");
            c.inc("rx", "truncated");
            c.inc("rx", if fcs_ok { "oversize" } else { "jabber" });
        }
        if !fcs_ok {
            c.inc("rx", "bad_fcs");
            if !small && !long {
                c.inc("rx", "pkt_bad_fcs");
            }
        }
        if let Some(t) = ethertype(frame) {
            if t <= MAX_LENGTH_FIELD && usize::from(t) != frame.len().saturating_sub(14) {
                c.inc("rx", "inrangeerr");
            }
        }
        if !fcs_ok || small || long {
            return RxVerdict::Error;
        }
        c.inc("rx", "total_good_pkts");
        c.add("rx", "total_good_bytes", wire as u64);
        count_classes(c, "rx", frame);
        if control_opcode(frame).is_some() {
            RxVerdict::Consumed
        } else {
            RxVerdict::Deliver
        }
    }
}

/// Unicast/multicast/broadcast, VLAN and pause classes of a good frame.
fn count_classes(c: &mut MacCounters, dir: &'static str, frame: &[u8]) {
    if let Some(s) = cast_suffix(frame) {
        c.inc(dir, s);
    }
    if ethertype(frame) == Some(ETHERTYPE_VLAN) {
        c.inc(dir, "vlan");
    }
    match control_opcode(frame) {
        Some(OPCODE_PAUSE) => c.inc(dir, "pause"),
        Some(OPCODE_PFC) => c.inc(dir, "user_pause"),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::vec::Vec;

    fn frame(dst: [u8; 6], ethertype: u16, len: usize) -> Vec<u8> {
        let mut f = alloc::vec![0u8; len];
        f[..6].copy_from_slice(&dst);
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f
    }

    /// Every counter the model can bump is one of the spec's counters, and TICK latches it at the
    /// offset hal lists for that name.
    #[test]
    fn every_counted_name_is_a_spec_counter() {
        let mut p = Port::new();
        for len in [
            40, 60, 61, 124, 200, 400, 800, 1400, 1516, 1530, 1600, 3000, 5000, 9000, 9300,
        ] {
            for dst in [[0xFF; 6], [1, 0, 0x5E, 0, 0, 1], [0, 1, 2, 3, 4, 5]] {
                for t in [0x0800, 0x8100, 0x0020] {
                    let f = frame(dst, t, len);
                    p.count_tx(&f);
                    for fcs in [true, false] {
                        p.count_rx(&f, fcs, 9600);
                        p.count_rx(&f, fcs, 1514);
                    }
                }
            }
        }
        for op in [OPCODE_PAUSE, OPCODE_PFC] {
            let mut f = frame([1, 0x80, 0xC2, 0, 0, 1], ETHERTYPE_MAC_CONTROL, 60);
            f[14..16].copy_from_slice(&op.to_be_bytes());
            p.count_tx(&f);
            p.count_rx(&f, true, 1514);
        }
        let names: Vec<_> = p.live.names().collect();
        for (dir, what) in &names {
            let full = format!("stat_{dir}_{what}");
            assert!(
                CMAC_STATS.iter().any(|c| c.name == full),
                "{full} is not a spec counter"
            );
        }
        // Everything but TX bad FCS and stomped FCS (never generated by the model) is exercised.
        assert_eq!(names.len(), CMAC_STATS.len() - 2);
        p.tick();
        for c in CMAC_STATS {
            assert_eq!(
                p.read_stat(c.low.offset()),
                Some(p.live.get(c.name) as u32),
                "{}",
                c.name
            );
        }
        // Code violations are latched too, and the model (no PCS) has none.
        assert_eq!(p.read_stat(regs::STAT_RX_BAD_CODE.low.offset()), Some(0));
        assert_eq!(p.read_stat(regs::STAT_RX_BAD_CODE.high().offset()), Some(0));
        // Half of the data frames had a bad FCS; the two MAC control frames were good.
        assert_eq!(
            p.live.get("stat_rx_bad_fcs") * 2 + 2,
            p.live.get("stat_rx_total_pkts")
        );
    }
}

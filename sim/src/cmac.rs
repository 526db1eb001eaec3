//! CMAC ports and packet adapters: enable bits, link status, statistics counters with the TICK
//! latch (spec §10), and the adapters' free-running counters (spec §10.6).
//!
//! Sizes on the wire: the MAC appends a 4-byte FCS, so a frame of `len` bytes counts as `len + 4`
//! bytes in every CMAC counter and histogram bucket. The model does not pad short frames (the
//! driver pads to 60 bytes, spec §7.1), so a frame under 60 bytes is a runt on the wire: TX counts it
//! as `pkt_small`, the receiving MAC counts it as `pkt_small` + `undersize` and drops it.

use alloc::collections::BTreeMap;

use onic_hal::regs::cmac::{self as regs, adapter, CMAC_STATS};

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

/// Live (not yet latched) counters of one direction of one CMAC, by ethtool name.
#[derive(Clone, Debug, Default)]
pub(crate) struct MacCounters(BTreeMap<&'static str, u64>);

impl MacCounters {
    fn add(&mut self, name: &'static str, n: u64) {
        let c = self.0.entry(name).or_insert(0);
        *c = c.wrapping_add(n) & ((1 << 48) - 1);
    }

    fn inc(&mut self, name: &'static str) {
        self.add(name, 1);
    }

    pub(crate) fn get(&self, name: &str) -> u64 {
        self.0.get(name).copied().unwrap_or(0)
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
        let pair = match offset & !0xF {
            adapter::TX_SENT_PKTS => self.tx_sent,
            adapter::TX_DROP_PKTS => self.tx_drop,
            adapter::RX_RECV_PKTS => self.rx_recv,
            adapter::RX_DROP_PKTS => self.rx_drop,
            adapter::RX_ERR_PKTS => self.rx_err,
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

/// Size bucket of a wire length, as the `_pkt_*` counter suffix.
fn bucket(wire: usize) -> &'static str {
    match wire {
        0..=63 => "small",
        64 => "64_bytes",
        65..=127 => "65_127_bytes",
        128..=255 => "128_255_bytes",
        256..=511 => "256_511_bytes",
        512..=1023 => "512_1023_bytes",
        1024..=1518 => "1024_1518_bytes",
        1519..=1522 => "1519_1522_bytes",
        1523..=1548 => "1523_1548_bytes",
        1549..=2047 => "1549_2047_bytes",
        2048..=4095 => "2048_4095_bytes",
        4096..=8191 => "4096_8191_bytes",
        8192..=9215 => "8192_9215_bytes",
        _ => "large",
    }
}

/// The counter name for direction `dir` ("tx"/"rx") and suffix, as listed in `CMAC_STATS`.
fn stat_name(dir: &str, suffix: &str) -> &'static str {
    CMAC_STATS
        .iter()
        .map(|c| c.name)
        .find(|n| {
            n.strip_prefix("stat_")
                .and_then(|r| r.strip_prefix(dir))
                .and_then(|r| r.strip_prefix('_'))
                .is_some_and(|r| r == suffix || r.strip_prefix("pkt_") == Some(suffix))
        })
        .unwrap_or("stat_unknown")
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
        self.reg(regs::CONF_RX_1) & 1 == 1
    }

    pub(crate) fn tx_enabled(&self) -> bool {
        self.reg(regs::CONF_TX_1) & 1 == 1
    }

    pub(crate) fn gt_loopback(&self) -> bool {
        self.reg(regs::GT_LOOPBACK) & 1 == 1
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

    /// Copies every live counter into the STAT_* registers (TICK).
    pub(crate) fn tick(&mut self) {
        for c in CMAC_STATS {
            self.latched.insert(c.offset, self.live.get(c.name));
        }
    }

    /// Latched value of the STAT register containing `offset` (low word or high 16 bits).
    pub(crate) fn read_stat(&self, offset: u32) -> Option<u32> {
        if let Some(v) = self.latched.get(&offset) {
            return Some(*v as u32);
        }
        let low = offset.checked_sub(4)?;
        if CMAC_STATS.iter().any(|c| c.offset == low) {
            return Some((self.latched.get(&low).copied().unwrap_or(0) >> 32) as u32 & 0xFFFF);
        }
        if CMAC_STATS.iter().any(|c| c.offset == offset) {
            return Some(0);
        }
        None
    }

    /// Counts a frame the MAC transmits (no FCS errors are generated on TX).
    pub(crate) fn count_tx(&mut self, frame: &[u8]) {
        let wire = frame.len() + FCS_LEN;
        let c = &mut self.live;
        c.inc(stat_name("tx", "total_pkts"));
        c.add(stat_name("tx", "total_bytes"), wire as u64);
        c.inc(stat_name("tx", "total_good_pkts"));
        c.add(stat_name("tx", "total_good_bytes"), wire as u64);
        c.inc(stat_name("tx", bucket(wire)));
        count_classes(c, "tx", frame);
    }

    /// Counts a frame arriving at the MAC and decides its fate.
    pub(crate) fn count_rx(&mut self, frame: &[u8], fcs_ok: bool, max_frame_len: usize) -> RxVerdict {
        let wire = frame.len() + FCS_LEN;
        let max_wire = max_frame_len + FCS_LEN;
        let c = &mut self.live;
        c.inc(stat_name("rx", "total_pkts"));
        c.add(stat_name("rx", "total_bytes"), wire as u64);
        c.inc(stat_name("rx", bucket(wire)));
        let small = wire < MIN_WIRE_LEN;
        let long = wire > max_wire;
        if small {
            c.inc(stat_name("rx", if fcs_ok { "undersize" } else { "fragment" }));
        }
        if long {
            c.inc(stat_name("rx", "toolong"));
            c.inc(stat_name("rx", "truncated"));
            c.inc(stat_name("rx", if fcs_ok { "oversize" } else { "jabber" }));
        }
        if !fcs_ok {
            c.inc(stat_name("rx", "bad_fcs"));
            if !small && !long {
                c.inc(stat_name("rx", "pkt_bad_fcs"));
            }
        }
        if let Some(t) = ethertype(frame) {
            if t <= MAX_LENGTH_FIELD && usize::from(t) != frame.len().saturating_sub(14) {
                c.inc(stat_name("rx", "inrangeerr"));
            }
        }
        if !fcs_ok || small || long {
            return RxVerdict::Error;
        }
        c.inc(stat_name("rx", "total_good_pkts"));
        c.add(stat_name("rx", "total_good_bytes"), wire as u64);
        count_classes(c, "rx", frame);
        if control_opcode(frame).is_some() {
            RxVerdict::Consumed
        } else {
            RxVerdict::Deliver
        }
    }
}

/// Unicast/multicast/broadcast, VLAN and pause classes of a good frame.
fn count_classes(c: &mut MacCounters, dir: &str, frame: &[u8]) {
    if let Some(s) = cast_suffix(frame) {
        c.inc(stat_name(dir, s));
    }
    if ethertype(frame) == Some(ETHERTYPE_VLAN) {
        c.inc(stat_name(dir, "vlan"));
    }
    match control_opcode(frame) {
        Some(OPCODE_PAUSE) => c.inc(stat_name(dir, "pause")),
        Some(OPCODE_PFC) => c.inc(stat_name(dir, "user_pause")),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_name_resolves() {
        let suffixes = [
            "total_pkts",
            "total_good_pkts",
            "total_bytes",
            "total_good_bytes",
            "small",
            "large",
            "unicast",
            "multicast",
            "broadcast",
            "vlan",
            "pause",
            "user_pause",
            "64_bytes",
            "1024_1518_bytes",
            "8192_9215_bytes",
        ];
        for dir in ["tx", "rx"] {
            for s in suffixes {
                assert_ne!(stat_name(dir, s), "stat_unknown", "{dir} {s}");
            }
        }
        for s in [
            "undersize",
            "fragment",
            "oversize",
            "toolong",
            "jabber",
            "bad_fcs",
            "pkt_bad_fcs",
            "inrangeerr",
            "truncated",
        ] {
            assert_ne!(stat_name("rx", s), "stat_unknown", "rx {s}");
        }
        assert_eq!(stat_name("rx", "bad_fcs"), "stat_rx_bad_fcs");
        assert_eq!(stat_name("rx", "pkt_bad_fcs"), "stat_rx_pkt_bad_fcs");
        assert_eq!(stat_name("tx", "small"), "stat_tx_pkt_small");
    }
}

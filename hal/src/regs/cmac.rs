//! CMAC subsystems and packet adapters in the shell (BAR2), hardware.md §10.
//!
//! Registers in this module are [`BlockReg`]s, relative to a CMAC base ([`cmac_base`]) or an
//! adapter base ([`adapter_base`]); [`BlockReg::on`] places one at a port's base, for example
//! `CORE_VERSION.on(cmac_base(port))`.

use super::BlockReg;

/// Number of CMAC ports a shell can have.
pub const MAX_PORTS: u8 = 2;

/// BAR2 base of CMAC `port`'s registers (0x8000 / 0xC000).
#[must_use]
pub const fn cmac_base(port: u8) -> u32 {
    if port == 0 {
        0x8000
    } else {
        0xC000
    }
}

/// BAR2 base of packet adapter `port` (CMAC subsystem base + 0x3000: 0xB000 / 0xF000).
#[must_use]
pub const fn adapter_base(port: u8) -> u32 {
    cmac_base(port) + 0x3000
}

/// GT_RESET.
pub const GT_RESET: BlockReg<u32> = BlockReg::at(0x000);
/// RESET.
pub const RESET: BlockReg<u32> = BlockReg::at(0x004);
/// SWITCH_CORE_MODE.
pub const SWITCH_CORE_MODE: BlockReg<u32> = BlockReg::at(0x008);
/// CONF_TX_1: \[0\] ctl_tx_enable, \[4\] ctl_tx_send_rfi.
pub const CONF_TX_1: BlockReg<u32> = BlockReg::at(0x00C);
/// CONF_RX_1: \[0\] ctl_rx_enable.
pub const CONF_RX_1: BlockReg<u32> = BlockReg::at(0x014);
/// CORE_MODE.
pub const CORE_MODE: BlockReg<u32> = BlockReg::at(0x020);
/// CORE_VERSION: reads [`CORE_VERSION_EXPECTED`] on the shell's CMAC.
pub const CORE_VERSION: BlockReg<u32> = BlockReg::at(0x024);
/// CONF_TX_BIP_OVERRIDE.
pub const CONF_TX_BIP_OVERRIDE: BlockReg<u32> = BlockReg::at(0x02C);
/// CONF_TX_FC_CTRL_1: \[8:0\] TX pause enable ([`PAUSE_GLOBAL`] and the eight priorities).
pub const CONF_TX_FC_CTRL_1: BlockReg<u32> = BlockReg::at(0x030);
/// CONF_TX_FC_RFRH_1..5: pause refresh timers, two per register (the fifth holds one).
pub const CONF_TX_FC_RFRH: [BlockReg<u32>; 5] = [
    BlockReg::at(0x034),
    BlockReg::at(0x038),
    BlockReg::at(0x03C),
    BlockReg::at(0x040),
    BlockReg::at(0x044),
];
/// CONF_TX_FC_QNTA_1..5: pause quanta, two per register (the fifth holds one).
pub const CONF_TX_FC_QNTA: [BlockReg<u32>; 5] = [
    BlockReg::at(0x048),
    BlockReg::at(0x04C),
    BlockReg::at(0x050),
    BlockReg::at(0x054),
    BlockReg::at(0x058),
];
/// CONF_RX_FC_CTRL_1: \[8:0\] RX pause enable ([`PAUSE_GLOBAL`] and the eight priorities), \[13:10\]
/// the GCP/PCP/GPP/PPP checks.
pub const CONF_RX_FC_CTRL_1: BlockReg<u32> = BlockReg::at(0x084);
/// CONF_RX_FC_CTRL_2: RX pause check enables.
pub const CONF_RX_FC_CTRL_2: BlockReg<u32> = BlockReg::at(0x088);
/// GT_LOOPBACK: [`GT_LOOPBACK_NEAR_END`] loops the port's transmit back into its receive inside
/// the transceivers (hardware.md §10.2: documented for manual testing; the reference driver never
/// writes it). 0 = normal operation, the reset value.
pub const GT_LOOPBACK: BlockReg<u32> = BlockReg::at(0x090);
/// GT_LOOPBACK value of near-end loopback: what the port sends comes back to it, nothing leaves.
pub const GT_LOOPBACK_NEAR_END: u32 = 1;
/// USER_0: a register of the CMAC's AXI interface for the user, readable and writable, that
/// controls nothing (the register self-test's scratch register).
pub const USER_0: BlockReg<u32> = BlockReg::at(0x0CC);
/// STAT_TX_STATUS.
pub const STAT_TX_STATUS: BlockReg<u32> = BlockReg::at(0x200);
/// STAT_RX_STATUS: latched; read twice, the second value counts (hardware.md §10.3).
pub const STAT_RX_STATUS: BlockReg<u32> = BlockReg::at(0x204);
/// STAT_STATUS_1.
pub const STAT_STATUS_1: BlockReg<u32> = BlockReg::at(0x208);
/// TICK: write 1 to latch every statistics counter (self-clearing).
pub const TICK: BlockReg<u32> = BlockReg::at(0x2B0);
/// STAT_CYCLE_COUNT.
pub const STAT_CYCLE_COUNT: BlockReg<u32> = BlockReg::at(0x2B8);
/// RSFEC_CONF_IND_CORRECTION: \[0\] RX correction ([`RSFEC_CORRECTION`]), \[1\] RX
/// indication ([`RSFEC_INDICATION`]), \[2\] IEEE error indication ([`RSFEC_IEEE_INDICATION`]).
pub const RSFEC_CONF_IND_CORRECTION: BlockReg<u32> = BlockReg::at(0x1000);
/// RSFEC_STATUS.
pub const RSFEC_STATUS: BlockReg<u32> = BlockReg::at(0x1004);
/// RSFEC_CONF_ENABLE: \[0\] RX RS-FEC ([`RSFEC_ENABLE_RX`]), \[1\] TX RS-FEC
/// ([`RSFEC_ENABLE_TX`]).
pub const RSFEC_CONF_ENABLE: BlockReg<u32> = BlockReg::at(0x107C);

/// RSFEC_CONF_ENABLE bit: the receiver decodes RS-FEC codewords.
pub const RSFEC_ENABLE_RX: u32 = 1 << 0;
/// RSFEC_CONF_ENABLE bit: the transmitter sends RS-FEC codewords.
pub const RSFEC_ENABLE_TX: u32 = 1 << 1;
/// RSFEC_CONF_IND_CORRECTION bit: the decoder corrects the codewords it can.
pub const RSFEC_CORRECTION: u32 = 1 << 0;
/// RSFEC_CONF_IND_CORRECTION bit: a codeword the decoder cannot correct is marked to the PCS, so
/// the frame it carries is errored instead of passed on with wrong bits.
pub const RSFEC_INDICATION: u32 = 1 << 1;
/// RSFEC_CONF_IND_CORRECTION bit: the IEEE 802.3 clause 91 error-indication mode.
pub const RSFEC_IEEE_INDICATION: u32 = 1 << 2;

/// Bit of the \[8:0\] pause enables of CONF_TX_FC_CTRL_1 and CONF_RX_FC_CTRL_1 for global
/// (IEEE 802.3x) pause frames; bits 7:0 are the eight priority (PFC) classes (the CMAC's
/// `ctl_tx_pause_enable` / `ctl_rx_pause_enable`, PG203).
pub const PAUSE_GLOBAL: u32 = 1 << 8;

/// CORE_VERSION of the CMAC the shell instantiates.
pub const CORE_VERSION_EXPECTED: u32 = 0x0000_0301;
/// STAT_RX_STATUS value of a link that is up and aligned with no fault bit set.
pub const STAT_RX_STATUS_UP: u32 = 0x3;
/// TICK value that latches the counters.
pub const TICK_LATCH: u32 = 1;

/// One register write of the CMAC enable sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfWrite {
    /// Register written (relative to the CMAC base).
    pub reg: BlockReg<u32>,
    /// Value written.
    pub value: u32,
}

/// RS-FEC writes of the enable sequence (hardware.md §10.2 steps 3-4), made when RS-FEC is enabled.
pub const ENABLE_RSFEC: [ConfWrite; 2] = [
    ConfWrite {
        reg: RSFEC_CONF_ENABLE,
        value: RSFEC_ENABLE_RX | RSFEC_ENABLE_TX,
    },
    ConfWrite {
        reg: RSFEC_CONF_IND_CORRECTION,
        value: RSFEC_CORRECTION | RSFEC_INDICATION | RSFEC_IEEE_INDICATION,
    },
];

/// The write that turns RS-FEC off in both directions (`ethtool --set-fec encoding off`); the
/// correction and indication settings stay for the next enable.
pub const DISABLE_RSFEC: ConfWrite = ConfWrite {
    reg: RSFEC_CONF_ENABLE,
    value: 0,
};

/// The rest of the enable sequence (hardware.md §10.2 steps 5-14), in order.
pub const ENABLE_MAC: [ConfWrite; 16] = [
    ConfWrite {
        reg: CONF_RX_1,
        value: 0x1,
    },
    ConfWrite {
        reg: CONF_TX_1,
        value: 0x10,
    },
    ConfWrite {
        reg: CONF_TX_1,
        value: 0x1,
    },
    ConfWrite {
        reg: CONF_RX_FC_CTRL_1,
        value: 0x00003DFF,
    },
    ConfWrite {
        reg: CONF_RX_FC_CTRL_2,
        value: 0x0001C631,
    },
    ConfWrite {
        reg: CONF_TX_FC_QNTA[0],
        value: 0xFFFFFFFF,
    },
    ConfWrite {
        reg: CONF_TX_FC_QNTA[1],
        value: 0xFFFFFFFF,
    },
    ConfWrite {
        reg: CONF_TX_FC_QNTA[2],
        value: 0xFFFFFFFF,
    },
    ConfWrite {
        reg: CONF_TX_FC_QNTA[3],
        value: 0xFFFFFFFF,
    },
    ConfWrite {
        reg: CONF_TX_FC_QNTA[4],
        value: 0x0000FFFF,
    },
    ConfWrite {
        reg: CONF_TX_FC_RFRH[0],
        value: 0xFFFFFFFF,
    },
    ConfWrite {
        reg: CONF_TX_FC_RFRH[1],
        value: 0xFFFFFFFF,
    },
    ConfWrite {
        reg: CONF_TX_FC_RFRH[2],
        value: 0xFFFFFFFF,
    },
    ConfWrite {
        reg: CONF_TX_FC_RFRH[3],
        value: 0xFFFFFFFF,
    },
    ConfWrite {
        reg: CONF_TX_FC_RFRH[4],
        value: 0x0000FFFF,
    },
    ConfWrite {
        reg: CONF_TX_FC_CTRL_1,
        value: 0x000001FF,
    },
];

/// One statistics counter: its ethtool name and its low word (relative to the CMAC or adapter
/// base). The high bits, where the hardware has them, are in the next register ([`Counter::high`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter {
    /// Name in `ethtool -S`, as the reference driver prints it.
    pub name: &'static str,
    /// Register of the low 32 bits.
    pub low: BlockReg<u32>,
    /// Width of the counter in bits (48 for CMAC counters, 64 for adapter counters).
    pub bits: u8,
}

impl Counter {
    /// Register of the high bits, the one after the low word.
    #[must_use]
    pub const fn high(&self) -> BlockReg<u32> {
        self.low.next()
    }
}

const fn c(name: &'static str, offset: u32) -> Counter {
    Counter {
        name,
        low: BlockReg::at(offset),
        bits: 48,
    }
}

/// Defines each CMAC counter of the `ethtool -S` list once: a named constant in [`stat`] and its
/// place in [`CMAC_STATS`].
macro_rules! cmac_counters {
    ($($id:ident = $name:literal @ $off:literal),* $(,)?) => {
        /// The CMAC statistics counters by name, relative to the CMAC base (hardware.md §10.5).
        pub mod stat {
            use super::{c, Counter};
            $(
                #[doc = concat!("`", $name, "`.")]
                pub const $id: Counter = c($name, $off);
            )*
        }

        /// The 59 CMAC statistics in `ethtool -S` order (hardware.md §10.5 entries 0-58).
        pub const CMAC_STATS: [Counter; [$($off),*].len()] = [$(stat::$id),*];
    };
}

cmac_counters! {
    TX_TOTAL_PKTS = "stat_tx_total_pkts" @ 0x0500,
    TX_TOTAL_GOOD_PKTS = "stat_tx_total_good_pkts" @ 0x0508,
    TX_TOTAL_BYTES = "stat_tx_total_bytes" @ 0x0510,
    TX_TOTAL_GOOD_BYTES = "stat_tx_total_good_bytes" @ 0x0518,
    TX_PKT_64_BYTES = "stat_tx_pkt_64_bytes" @ 0x0520,
    TX_PKT_65_127_BYTES = "stat_tx_pkt_65_127_bytes" @ 0x0528,
    TX_PKT_128_255_BYTES = "stat_tx_pkt_128_255_bytes" @ 0x0530,
    TX_PKT_256_511_BYTES = "stat_tx_pkt_256_511_bytes" @ 0x0538,
    TX_PKT_512_1023_BYTES = "stat_tx_pkt_512_1023_bytes" @ 0x0540,
    TX_PKT_1024_1518_BYTES = "stat_tx_pkt_1024_1518_bytes" @ 0x0548,
    TX_PKT_1519_1522_BYTES = "stat_tx_pkt_1519_1522_bytes" @ 0x0550,
    TX_PKT_1523_1548_BYTES = "stat_tx_pkt_1523_1548_bytes" @ 0x0558,
    TX_PKT_1549_2047_BYTES = "stat_tx_pkt_1549_2047_bytes" @ 0x0560,
    TX_PKT_2048_4095_BYTES = "stat_tx_pkt_2048_4095_bytes" @ 0x0568,
    TX_PKT_4096_8191_BYTES = "stat_tx_pkt_4096_8191_bytes" @ 0x0570,
    TX_PKT_8192_9215_BYTES = "stat_tx_pkt_8192_9215_bytes" @ 0x0578,
    TX_PKT_LARGE = "stat_tx_pkt_large" @ 0x0580,
    TX_PKT_SMALL = "stat_tx_pkt_small" @ 0x0588,
    TX_BAD_FCS = "stat_tx_bad_fcs" @ 0x05B8,
    TX_UNICAST = "stat_tx_unicast" @ 0x05D0,
    TX_MULTICAST = "stat_tx_multicast" @ 0x05D8,
    TX_BROADCAST = "stat_tx_broadcast" @ 0x05E0,
    TX_VLAN = "stat_tx_vlan" @ 0x05E8,
    TX_PAUSE = "stat_tx_pause" @ 0x05F0,
    TX_USER_PAUSE = "stat_tx_user_pause" @ 0x05F8,
    RX_TOTAL_PKTS = "stat_rx_total_pkts" @ 0x0608,
    RX_TOTAL_GOOD_PKTS = "stat_rx_total_good_pkts" @ 0x0610,
    RX_TOTAL_BYTES = "stat_rx_total_bytes" @ 0x0618,
    RX_TOTAL_GOOD_BYTES = "stat_rx_total_good_bytes" @ 0x0620,
    RX_PKT_64_BYTES = "stat_rx_pkt_64_bytes" @ 0x0628,
    RX_PKT_65_127_BYTES = "stat_rx_pkt_65_127_bytes" @ 0x0630,
    RX_PKT_128_255_BYTES = "stat_rx_pkt_128_255_bytes" @ 0x0638,
    RX_PKT_256_511_BYTES = "stat_rx_pkt_256_511_bytes" @ 0x0640,
    RX_PKT_512_1023_BYTES = "stat_rx_pkt_512_1023_bytes" @ 0x0648,
    RX_PKT_1024_1518_BYTES = "stat_rx_pkt_1024_1518_bytes" @ 0x0650,
    RX_PKT_1519_1522_BYTES = "stat_rx_pkt_1519_1522_bytes" @ 0x0658,
    RX_PKT_1523_1548_BYTES = "stat_rx_pkt_1523_1548_bytes" @ 0x0660,
    RX_PKT_1549_2047_BYTES = "stat_rx_pkt_1549_2047_bytes" @ 0x0668,
    RX_PKT_2048_4095_BYTES = "stat_rx_pkt_2048_4095_bytes" @ 0x0670,
    RX_PKT_4096_8191_BYTES = "stat_rx_pkt_4096_8191_bytes" @ 0x0678,
    RX_PKT_8192_9215_BYTES = "stat_rx_pkt_8192_9215_bytes" @ 0x0680,
    RX_PKT_LARGE = "stat_rx_pkt_large" @ 0x0688,
    RX_PKT_SMALL = "stat_rx_pkt_small" @ 0x0690,
    RX_UNDERSIZE = "stat_rx_undersize" @ 0x0698,
    RX_FRAGMENT = "stat_rx_fragment" @ 0x06A0,
    RX_OVERSIZE = "stat_rx_oversize" @ 0x06A8,
    RX_TOOLONG = "stat_rx_toolong" @ 0x06B0,
    RX_JABBER = "stat_rx_jabber" @ 0x06B8,
    RX_BAD_FCS = "stat_rx_bad_fcs" @ 0x06C0,
    RX_PKT_BAD_FCS = "stat_rx_pkt_bad_fcs" @ 0x06C8,
    RX_STOMPED_FCS = "stat_rx_stomped_fcs" @ 0x06D0,
    RX_UNICAST = "stat_rx_unicast" @ 0x06D8,
    RX_MULTICAST = "stat_rx_multicast" @ 0x06E0,
    RX_BROADCAST = "stat_rx_broadcast" @ 0x06E8,
    RX_VLAN = "stat_rx_vlan" @ 0x06F0,
    RX_PAUSE = "stat_rx_pause" @ 0x06F8,
    RX_USER_PAUSE = "stat_rx_user_pause" @ 0x0700,
    RX_INRANGEERR = "stat_rx_inrangeerr" @ 0x0708,
    RX_TRUNCATED = "stat_rx_truncated" @ 0x0710,
}

/// `stat_rx_bad_code`: 64B/66B code violations the PCS saw (hardware.md §10.7; 48 bits, latched
/// by TICK like the counters of the list, but not in the reference driver's `ethtool -S`).
pub const STAT_RX_BAD_CODE: Counter = c("stat_rx_bad_code", 0x0418);

/// `stat_rx_rsfec_corrected_cw`: RS-FEC codewords the decoder found errors in and corrected
/// (hardware.md §10.7, 0x1008; 48 bits, latched by TICK).
pub const STAT_RX_RSFEC_CORRECTED_CW: Counter = c("stat_rx_rsfec_corrected_cw", 0x1008);
/// `stat_rx_rsfec_uncorrected_cw`: RS-FEC codewords with more errors than the code corrects
/// (hardware.md §10.7, 0x1010; 48 bits, latched by TICK).
pub const STAT_RX_RSFEC_UNCORRECTED_CW: Counter = c("stat_rx_rsfec_uncorrected_cw", 0x1010);

/// Counters of the MAC's statistics TICK latches besides [`CMAC_STATS`].
pub const CMAC_STATS_EXTRA: [Counter; 1] = [STAT_RX_BAD_CODE];

/// The RS-FEC decoder's codeword counters, latched by TICK like the MAC's.
pub const RSFEC_STATS: [Counter; 2] = [STAT_RX_RSFEC_CORRECTED_CW, STAT_RX_RSFEC_UNCORRECTED_CW];

/// The CMAC's frame-size histogram, one bucket per counter pair, by frame length on the wire (FCS
/// included): `stat_tx_pkt_*` / `stat_rx_pkt_*` of hardware.md §10.5 from 64 to 9215 bytes.
/// Shorter frames are counted in `pkt_small`, longer ones in `pkt_large`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeBucket {
    /// Shortest frame of the bucket, in bytes.
    pub low: u16,
    /// Longest frame of the bucket, in bytes.
    pub high: u16,
    /// Its transmit counter.
    pub tx: Counter,
    /// Its receive counter.
    pub rx: Counter,
}

const fn bucket(low: u16, high: u16, tx: Counter, rx: Counter) -> SizeBucket {
    SizeBucket { low, high, tx, rx }
}

/// The histogram buckets in increasing size.
pub const SIZE_BUCKETS: [SizeBucket; 12] = [
    bucket(64, 64, stat::TX_PKT_64_BYTES, stat::RX_PKT_64_BYTES),
    bucket(65, 127, stat::TX_PKT_65_127_BYTES, stat::RX_PKT_65_127_BYTES),
    bucket(128, 255, stat::TX_PKT_128_255_BYTES, stat::RX_PKT_128_255_BYTES),
    bucket(256, 511, stat::TX_PKT_256_511_BYTES, stat::RX_PKT_256_511_BYTES),
    bucket(
        512,
        1023,
        stat::TX_PKT_512_1023_BYTES,
        stat::RX_PKT_512_1023_BYTES,
    ),
    bucket(
        1024,
        1518,
        stat::TX_PKT_1024_1518_BYTES,
        stat::RX_PKT_1024_1518_BYTES,
    ),
    bucket(
        1519,
        1522,
        stat::TX_PKT_1519_1522_BYTES,
        stat::RX_PKT_1519_1522_BYTES,
    ),
    bucket(
        1523,
        1548,
        stat::TX_PKT_1523_1548_BYTES,
        stat::RX_PKT_1523_1548_BYTES,
    ),
    bucket(
        1549,
        2047,
        stat::TX_PKT_1549_2047_BYTES,
        stat::RX_PKT_1549_2047_BYTES,
    ),
    bucket(
        2048,
        4095,
        stat::TX_PKT_2048_4095_BYTES,
        stat::RX_PKT_2048_4095_BYTES,
    ),
    bucket(
        4096,
        8191,
        stat::TX_PKT_4096_8191_BYTES,
        stat::RX_PKT_4096_8191_BYTES,
    ),
    bucket(
        8192,
        9215,
        stat::TX_PKT_8192_9215_BYTES,
        stat::RX_PKT_8192_9215_BYTES,
    ),
];

const fn a(name: &'static str, offset: u32) -> Counter {
    Counter {
        name,
        low: BlockReg::at(offset),
        bits: 64,
    }
}

/// The 5 packet-adapter counters the reference driver reports (hardware.md §10.5 entries 59-63),
/// offsets relative to [`adapter_base`].
pub const ADAPTER_STATS: [Counter; 5] = [
    a("stat_adapt_tx_sent", 0x000),
    a("stat_adapt_tx_drop", 0x010),
    a("stat_adapt_rx_recv", 0x020),
    a("stat_adapt_rx_drop", 0x030),
    a("stat_adapt_rx_error", 0x040),
];

/// The full packet-adapter block (hardware.md §10.6): 64-bit free-running counters, low word first.
pub mod adapter {
    use super::BlockReg;

    /// TX packets sent to the CMAC.
    pub const TX_SENT_PKTS: BlockReg<u32> = BlockReg::at(0x000);
    /// TX bytes sent.
    pub const TX_SENT_BYTES: BlockReg<u32> = BlockReg::at(0x008);
    /// TX packets dropped.
    pub const TX_DROP_PKTS: BlockReg<u32> = BlockReg::at(0x010);
    /// TX bytes dropped.
    pub const TX_DROP_BYTES: BlockReg<u32> = BlockReg::at(0x018);
    /// RX packets received from the CMAC.
    pub const RX_RECV_PKTS: BlockReg<u32> = BlockReg::at(0x020);
    /// RX bytes received.
    pub const RX_RECV_BYTES: BlockReg<u32> = BlockReg::at(0x028);
    /// RX packets dropped (no C2H buffer, ...).
    pub const RX_DROP_PKTS: BlockReg<u32> = BlockReg::at(0x030);
    /// RX bytes dropped.
    pub const RX_DROP_BYTES: BlockReg<u32> = BlockReg::at(0x038);
    /// RX packets marked with an error.
    pub const RX_ERR_PKTS: BlockReg<u32> = BlockReg::at(0x040);
    /// RX bytes marked with an error.
    pub const RX_ERR_BYTES: BlockReg<u32> = BlockReg::at(0x048);
    /// Size of the block in bytes.
    pub const BLOCK_LEN: u32 = 0x050;
}

/// Names of the driver's XDP software counters that follow the hardware counters in `ethtool -S`
/// (hardware.md §10.5 entries 64-70).
pub const XDP_STAT_NAMES: [&str; 7] = [
    "rx_xdp_redirect",
    "rx_xdp_pass",
    "rx_xdp_drop",
    "rx_xdp_tx",
    "rx_xdp_tx_errors",
    "tx_xdp_xmit",
    "tx_xdp_xmit_errors",
];

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::format;

    #[test]
    fn size_buckets_are_contiguous_and_named_after_their_range() {
        for pair in SIZE_BUCKETS.windows(2) {
            assert_eq!(pair[0].high + 1, pair[1].low);
        }
        for b in SIZE_BUCKETS {
            let range = if b.low == b.high {
                format!("{}_bytes", b.low)
            } else {
                format!("{}_{}_bytes", b.low, b.high)
            };
            assert_eq!(b.tx.name, format!("stat_tx_pkt_{range}"));
            assert_eq!(b.rx.name, format!("stat_rx_pkt_{range}"));
        }
    }

    #[test]
    fn the_named_counters_are_the_list() {
        assert_eq!(CMAC_STATS.len(), 59);
        assert_eq!(CMAC_STATS[48], stat::RX_BAD_FCS);
        assert_eq!(stat::RX_PKT_BAD_FCS.low.offset(), 0x06C8);
        for extra in CMAC_STATS_EXTRA.iter().chain(RSFEC_STATS.iter()) {
            assert!(CMAC_STATS
                .iter()
                .all(|c| c.low != extra.low && c.name != extra.name));
        }
    }
}

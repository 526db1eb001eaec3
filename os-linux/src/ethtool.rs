//! `ethtool` string sets and statistics layout.
//!
//! `ethtool -S` lists the reference driver's 71 names first, in its order (spec §10.5: 59 CMAC
//! counters, 5 packet-adapter counters, 7 XDP totals), then this driver's per-queue counters
//! (`rx_queue_<q>_<name>` for every RX queue, then `tx_queue_<q>_<name>` for every TX queue).

use core::fmt::Write;

use onic_core::stats::HW_COUNTERS;
use onic_hal::regs::cmac::{ADAPTER_STATS, CMAC_STATS};

use crate::counters::{RX_QUEUE_STATS, TX_QUEUE_STATS};
use crate::errno::{Errno, EOPNOTSUPP};

/// Bytes of one ethtool string (`ETH_GSTRING_LEN`), NUL padded.
pub const ETH_GSTRING_LEN: usize = 32;

/// The string set of `ethtool -S` (`ETH_SS_STATS`).
pub const ETH_SS_STATS: u32 = 1;

/// The reference driver's software XDP counters (spec §10.5 entries 64-70).
pub const XDP_TOTALS: [&str; 7] = [
    "rx_xdp_redirect",
    "rx_xdp_pass",
    "rx_xdp_drop",
    "rx_xdp_tx",
    "rx_xdp_tx_errors",
    "tx_xdp_xmit",
    "tx_xdp_xmit_errors",
];

/// Entries of the reference driver's list: 59 + 5 + 7.
pub const REFERENCE_STATS: usize = HW_COUNTERS + XDP_TOTALS.len();

/// Number of `ethtool -S` entries for a port with `rx` RX queues and `tx` TX queues.
#[must_use]
pub const fn stats_count(rx: usize, tx: usize) -> usize {
    REFERENCE_STATS + rx * RX_QUEUE_STATS.len() + tx * TX_QUEUE_STATS.len()
}

/// `get_sset_count`: the size of string set `sset`. Only `ETH_SS_STATS` exists.
///
/// # Errors
///
/// `EOPNOTSUPP` for any other set.
pub const fn sset_count(sset: u32, rx: usize, tx: usize) -> Result<usize, Errno> {
    if sset == ETH_SS_STATS {
        Ok(stats_count(rx, tx))
    } else {
        Err(EOPNOTSUPP)
    }
}

/// A fixed buffer that `write!` fills and silently truncates (always leaving a NUL).
struct GString<'a> {
    out: &'a mut [u8; ETH_GSTRING_LEN],
    len: usize,
}

impl Write for GString<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for &b in s.as_bytes() {
            if self.len + 1 >= ETH_GSTRING_LEN {
                break;
            }
            self.out[self.len] = b;
            self.len += 1;
        }
        Ok(())
    }
}

/// Writes the name of statistic `index` into `out` (NUL padded). Returns `false` for an index
/// past the end of the list.
pub fn stat_name(index: usize, rx: usize, tx: usize, out: &mut [u8; ETH_GSTRING_LEN]) -> bool {
    out.fill(0);
    let mut w = GString { out, len: 0 };
    let mut i = index;
    if i < CMAC_STATS.len() {
        return w.write_str(CMAC_STATS[i].name).is_ok();
    }
    i -= CMAC_STATS.len();
    if i < ADAPTER_STATS.len() {
        return w.write_str(ADAPTER_STATS[i].name).is_ok();
    }
    i -= ADAPTER_STATS.len();
    if i < XDP_TOTALS.len() {
        return w.write_str(XDP_TOTALS[i]).is_ok();
    }
    i -= XDP_TOTALS.len();
    if i < rx * RX_QUEUE_STATS.len() {
        let (q, f) = (i / RX_QUEUE_STATS.len(), i % RX_QUEUE_STATS.len());
        return write!(w, "rx_queue_{q}_{}", RX_QUEUE_STATS[f]).is_ok();
    }
    i -= rx * RX_QUEUE_STATS.len();
    if i < tx * TX_QUEUE_STATS.len() {
        let (q, f) = (i / TX_QUEUE_STATS.len(), i % TX_QUEUE_STATS.len());
        return write!(w, "tx_queue_{q}_{}", TX_QUEUE_STATS[f]).is_ok();
    }
    false
}

/// Fills `out` (the `ethtool -S` values buffer of [`stats_count`] entries) from the hardware
/// counters, the XDP totals and the per-queue counter rows. Entries beyond what is supplied
/// stay 0; a short `out` is filled as far as it goes.
pub fn fill_stats<'a>(
    out: &mut [u64],
    hw: &[u64; HW_COUNTERS],
    xdp: &[u64; 7],
    rx_rows: impl Iterator<Item = [u64; RX_QUEUE_STATS.len()]>,
    tx_rows: impl Iterator<Item = [u64; TX_QUEUE_STATS.len()]> + 'a,
) {
    let values = hw
        .iter()
        .copied()
        .chain(xdp.iter().copied())
        .chain(rx_rows.flatten())
        .chain(tx_rows.flatten());
    for (slot, v) in out.iter_mut().zip(values) {
        *slot = v;
    }
}

/// `ethtool -n <dev> rx-flow-hash <type>` (ETHTOOL_GRXFH): which fields the shell's RSS hash
/// really covers for a flow type (spec §9.4). For (VLAN-)IPv4 it takes the protocol, both
/// addresses and the first four bytes after the IP header, whatever the protocol; anything that is
/// not IPv4 hashes to 0, so nothing is reported for it.
#[must_use]
pub const fn rx_flow_hash_fields(flow_type: u32) -> u64 {
    // Flow types of the UAPI (<linux/ethtool.h>) without the FLOW_EXT / FLOW_MAC_EXT / FLOW_RSS
    // flags.
    const TCP_V4_FLOW: u32 = 0x01;
    const UDP_V4_FLOW: u32 = 0x02;
    const SCTP_V4_FLOW: u32 = 0x03;
    const AH_ESP_V4_FLOW: u32 = 0x04;
    const AH_V4_FLOW: u32 = 0x09;
    const ESP_V4_FLOW: u32 = 0x0a;
    const IPV4_USER_FLOW: u32 = 0x0d;
    const IPV4_FLOW: u32 = 0x10;
    const FLOW_FLAGS: u32 = 0x8000_0000 | 0x4000_0000 | 0x2000_0000;
    const RXH_L3_PROTO: u64 = 1 << 3;
    const RXH_IP_SRC: u64 = 1 << 4;
    const RXH_IP_DST: u64 = 1 << 5;
    const RXH_L4_B_0_1: u64 = 1 << 6;
    const RXH_L4_B_2_3: u64 = 1 << 7;
    match flow_type & !FLOW_FLAGS {
        TCP_V4_FLOW | UDP_V4_FLOW | SCTP_V4_FLOW | AH_ESP_V4_FLOW | AH_V4_FLOW | ESP_V4_FLOW
        | IPV4_USER_FLOW | IPV4_FLOW => RXH_L3_PROTO | RXH_IP_SRC | RXH_IP_DST | RXH_L4_B_0_1 | RXH_L4_B_2_3,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::String;
    use std::vec;

    fn name(i: usize, rx: usize, tx: usize) -> String {
        let mut b = [0xFFu8; ETH_GSTRING_LEN];
        assert!(stat_name(i, rx, tx, &mut b), "index {i}");
        let end = b.iter().position(|&c| c == 0).unwrap();
        assert!(b[end..].iter().all(|&c| c == 0), "NUL padded");
        String::from_utf8(b[..end].to_vec()).unwrap()
    }

    #[test]
    fn reference_names_come_first_in_order() {
        assert_eq!(REFERENCE_STATS, 71);
        assert_eq!(name(0, 2, 2), "stat_tx_total_pkts");
        assert_eq!(name(18, 2, 2), "stat_tx_bad_fcs");
        assert_eq!(name(58, 2, 2), "stat_rx_truncated");
        assert_eq!(name(59, 2, 2), "stat_adapt_tx_sent");
        assert_eq!(name(63, 2, 2), "stat_adapt_rx_error");
        assert_eq!(name(64, 2, 2), "rx_xdp_redirect");
        assert_eq!(name(70, 2, 2), "tx_xdp_xmit_errors");
    }

    #[test]
    fn per_queue_names_follow() {
        assert_eq!(name(71, 2, 3), "rx_queue_0_packets");
        assert_eq!(name(71 + 10, 2, 3), "rx_queue_1_packets");
        assert_eq!(name(71 + 20, 2, 3), "tx_queue_0_packets");
        let last = stats_count(2, 3) - 1;
        assert_eq!(name(last, 2, 3), "tx_queue_2_xdp_xmit_errors");
        let mut b = [0u8; ETH_GSTRING_LEN];
        assert!(!stat_name(last + 1, 2, 3, &mut b));
    }

    #[test]
    fn long_names_are_truncated_with_a_nul() {
        let mut b = [0u8; ETH_GSTRING_LEN];
        let i = REFERENCE_STATS + 63 * RX_QUEUE_STATS.len() + 9; // rx_queue_63_xdp_tx_errors
        assert!(stat_name(i, 64, 64, &mut b));
        assert_eq!(b[ETH_GSTRING_LEN - 1], 0);
    }

    #[test]
    fn flow_hash_is_ipv4_only() {
        assert_eq!(rx_flow_hash_fields(0x01), 0xF8); // tcp4: proto, src, dst, ports
        assert_eq!(rx_flow_hash_fields(0x02 | 0x8000_0000), 0xF8);
        assert_eq!(rx_flow_hash_fields(0x05), 0); // tcp6: the shell hashes it to 0
        assert_eq!(rx_flow_hash_fields(0x12), 0); // ether
    }

    #[test]
    fn sset_count_is_per_set() {
        assert_eq!(sset_count(ETH_SS_STATS, 1, 1), Ok(71 + 16));
        assert_eq!(sset_count(0, 1, 1), Err(EOPNOTSUPP));
        assert_eq!(sset_count(2, 1, 1), Err(EOPNOTSUPP));
    }

    #[test]
    fn values_line_up_with_names() {
        let mut hw = [0u64; HW_COUNTERS];
        for (i, v) in hw.iter_mut().enumerate() {
            *v = i as u64;
        }
        let xdp = [100, 101, 102, 103, 104, 105, 106];
        let mut out = vec![u64::MAX; stats_count(1, 1)];
        let rx = [[7u64; RX_QUEUE_STATS.len()]];
        let tx = [[9u64; TX_QUEUE_STATS.len()]];
        fill_stats(&mut out, &hw, &xdp, rx.into_iter(), tx.into_iter());
        assert_eq!(out[63], 63);
        assert_eq!(out[64], 100);
        assert_eq!(out[70], 106);
        assert_eq!(out[71], 7);
        assert_eq!(out[71 + RX_QUEUE_STATS.len()], 9);
        assert_eq!(*out.last().unwrap(), 9);
    }
}

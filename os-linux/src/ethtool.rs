//! `ethtool` string sets and statistics layout.
//!
//! `ethtool -S` is the core's list ([`onic_core::stats::ethtool::EthtoolStats`]): the reference driver's
//! 71 names first, in its order (hardware.md §10.5: 59 CMAC counters, 5 packet-adapter counters, 7
//! XDP totals), then `rx{q}_<name>` and `tx{q}_<name>` for every queue pair the function owns, then
//! the page-pool counters with Linux's names (`rx_pp_alloc_fast`, ...), summed over the queues.

use core::fmt::Write;

use onic_core::stats::ethtool::{
    c_driver_stat_name, EthtoolStats, StatName, C_DRIVER_STATS, PAGE_POOL_STATS, RX_QUEUE_STATS,
    TX_QUEUE_STATS,
};
use onic_core::stats::HW_COUNTERS;
use onic_embed::port::{Control, Host, Port, Token};

use crate::errno::{Errno, EOPNOTSUPP};
use crate::text::FixedBuf;

/// Bytes of one ethtool string (`ETH_GSTRING_LEN`), NUL padded.
pub const ETH_GSTRING_LEN: usize = 32;

/// The string set of `ethtool -S` (`ETH_SS_STATS`).
pub const ETH_SS_STATS: u32 = 1;
/// The string set of `ethtool -t` (`ETH_SS_TEST`): one name per self-test result.
pub const ETH_SS_TEST: u32 = 0;

/// `ethtool -t` results, in order: the register test runs always, the loopback test only when
/// an offline test is asked for (ethtool's default). A result is 0 for a pass, otherwise the
/// error number of what failed.
pub const SELF_TESTS: [&str; crate::abi::SELF_TESTS] =
    ["Register test  (online)", "Loopback test  (offline)"];
pub use crate::abi::{TEST_LOOPBACK, TEST_REGISTERS};

/// Entries of the reference driver's list: 59 CMAC + 5 adapter + 7 XDP totals.
pub const REFERENCE_STATS: usize = C_DRIVER_STATS;

/// Number of `ethtool -S` entries for a port listing `queues` queue pairs: the reference list,
/// `rx{q}_*` and `tx{q}_*` per queue, then the page-pool counters (the core's layout,
/// [`onic_core::stats::ethtool`]).
#[must_use]
pub const fn stats_count(queues: usize) -> usize {
    C_DRIVER_STATS + queues * (RX_QUEUE_STATS.len() + TX_QUEUE_STATS.len()) + PAGE_POOL_STATS.len()
}

/// `get_sset_count`: the size of string set `sset` (`ETH_SS_STATS`, `ETH_SS_TEST`).
///
/// # Errors
///
/// `EOPNOTSUPP` for any other set.
pub const fn sset_count(sset: u32, queues: usize) -> Result<usize, Errno> {
    match sset {
        ETH_SS_STATS => Ok(stats_count(queues)),
        ETH_SS_TEST => Ok(SELF_TESTS.len()),
        _ => Err(EOPNOTSUPP),
    }
}

/// The `ethtool -t` names (`ETH_SS_TEST`), each NUL padded.
pub fn self_test_names(mut out: impl FnMut(usize, &[u8; ETH_GSTRING_LEN])) {
    let mut b = [0u8; ETH_GSTRING_LEN];
    for (i, name) in SELF_TESTS.iter().enumerate() {
        write_name(StatName::Fixed(name), &mut b);
        out(i, &b);
    }
}

/// `ethtool -S` names of `port`: `out` gets [`stats_count`] strings of `ETH_GSTRING_LEN`, every
/// queue the function owns listed (so the count stays the same when `ethtool -L` changes the
/// queues in use). Nothing when the snapshots cannot be taken.
pub fn stat_names<H: Host>(
    port: &Port<H>,
    ctl: &mut Token<'_, Control>,
    mut out: impl FnMut(usize, &[u8; ETH_GSTRING_LEN]),
) {
    let Ok(v) = port.queue_snapshots(ctl) else {
        return;
    };
    let view = EthtoolStats::new([0; HW_COUNTERS], &v);
    let mut b = [0u8; ETH_GSTRING_LEN];
    for (i, (name, _)) in view.iter().enumerate() {
        write_name(name, &mut b);
        out(i, &b);
    }
}

/// `ethtool -S` values of `port`: its hardware counters (TICK + reads), the XDP totals, the
/// per-queue counters and the page pools. Nothing when the snapshots cannot be taken.
pub fn stat_values<H: Host>(port: &Port<H>, ctl: &mut Token<'_, Control>, out: &mut [u64]) {
    let Ok(v) = port.queue_snapshots(ctl) else {
        return;
    };
    EthtoolStats::new(port.hw_counters(), &v).fill(out);
}

/// Writes `name` into `out`, NUL padded (truncated to 31 bytes).
pub fn write_name(name: StatName, out: &mut [u8; ETH_GSTRING_LEN]) {
    out.fill(0);
    // One byte short of the field: the last stays NUL.
    let mut w = FixedBuf::<{ ETH_GSTRING_LEN - 1 }>::new();
    let _ = write!(w, "{name}");
    for (d, s) in out.iter_mut().zip(w.as_bytes()) {
        *d = *s;
    }
}

/// The name of entry `index` of the reference driver's 71 (for the VM test's expected list).
pub fn reference_name(index: usize, out: &mut [u8; ETH_GSTRING_LEN]) -> bool {
    match c_driver_stat_name(index) {
        Some(n) => {
            write_name(StatName::Fixed(n), out);
            true
        }
        None => false,
    }
}

/// `ethtool -n <dev> rx-flow-hash <type>` (ETHTOOL_GRXFH): the `RXH_*` fields the shell's RSS
/// hash really covers for a flow type, as the core states them
/// ([`onic_core::device::settings::rx_flow_hash`]); nothing for a flow type ethtool does not define.
#[must_use]
pub const fn rx_flow_hash_fields(flow_type: u32) -> u64 {
    match onic_core::device::settings::rx_flow_hash(flow_type) {
        Ok(fields) => fields,
        Err(_) => 0,
    }
}

/// `ethtool -N <dev> rx-flow-hash <type> <fields>` (ETHTOOL_SRXFH): the core's rule (accepted
/// only if it asks for exactly what the shell hashes), as an errno.
///
/// # Errors
///
/// `EOPNOTSUPP` for other fields, `EINVAL` for a flow type ethtool does not define.
pub fn set_rx_flow_hash(flow_type: u32, fields: u64) -> Result<(), Errno> {
    onic_core::device::settings::set_rx_flow_hash(flow_type, fields)
        .map_err(|e| crate::errno::from_ethtool(&e))
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::String;

    fn name(i: usize) -> String {
        let mut b = [0xFFu8; ETH_GSTRING_LEN];
        assert!(reference_name(i, &mut b), "index {i}");
        let end = b.iter().position(|&c| c == 0).unwrap();
        assert!(b[end..].iter().all(|&c| c == 0), "NUL padded");
        String::from_utf8(b[..end].to_vec()).unwrap()
    }

    #[test]
    fn reference_names_come_first_in_order() {
        assert_eq!(REFERENCE_STATS, 71);
        assert_eq!(name(0), "stat_tx_total_pkts");
        assert_eq!(name(18), "stat_tx_bad_fcs");
        assert_eq!(name(58), "stat_rx_truncated");
        assert_eq!(name(59), "stat_adapt_tx_sent");
        assert_eq!(name(63), "stat_adapt_rx_error");
        assert_eq!(name(64), "rx_xdp_redirect");
        assert_eq!(name(70), "tx_xdp_xmit_errors");
        let mut b = [0u8; ETH_GSTRING_LEN];
        assert!(!reference_name(71, &mut b));
    }

    #[test]
    fn long_names_are_truncated_with_a_nul() {
        let mut b = [0xFFu8; ETH_GSTRING_LEN];
        let long = StatName::Queue {
            dir: "rx",
            queue: 63,
            name: "xdp_redirect_errors_and_then_some",
        };
        write_name(long, &mut b);
        assert_eq!(b[ETH_GSTRING_LEN - 1], 0);
        assert_eq!(&b[..5], b"rx63_");
    }

    #[test]
    fn flow_hash_is_ipv4_only() {
        assert_eq!(rx_flow_hash_fields(0x01), 0xF8); // tcp4: proto, src, dst, ports
        assert_eq!(rx_flow_hash_fields(0x02 | 0x8000_0000), 0xF8);
        assert_eq!(rx_flow_hash_fields(0x05), 0); // tcp6: the shell hashes it to 0
        assert_eq!(rx_flow_hash_fields(0x12), 0); // ether
        assert_eq!(set_rx_flow_hash(0x01 | 0x8000_0000, 0xF8), Ok(()));
        assert_eq!(set_rx_flow_hash(0x01, 0x30), Err(EOPNOTSUPP));
        assert_eq!(set_rx_flow_hash(0x77, 0xF8), Err(crate::errno::EINVAL));
    }

    #[test]
    fn self_test_names_fit_and_come_in_order() {
        let mut names = std::vec::Vec::new();
        self_test_names(|i, b| {
            let end = b.iter().position(|&c| c == 0).unwrap();
            names.push((i, String::from_utf8(b[..end].to_vec()).unwrap()));
        });
        assert_eq!(names.len(), SELF_TESTS.len());
        assert_eq!(names[TEST_REGISTERS].1, SELF_TESTS[0]);
        assert!(names[TEST_LOOPBACK].1.starts_with("Loopback"));
        assert_eq!(sset_count(ETH_SS_TEST, 4), Ok(2));
    }

    #[test]
    fn sset_count_is_per_set() {
        assert_eq!(sset_count(ETH_SS_STATS, 1), Ok(71 + 24 + 15 + 11));
        assert_eq!(sset_count(ETH_SS_TEST, 1), Ok(2));
        assert_eq!(sset_count(2, 1), Err(EOPNOTSUPP));
    }
}

//! The hardware counters of a port: the CMAC counters latched by TICK, the free-running
//! packet-adapter counters (hardware.md §10.4-§10.6), and the link state.

use onic_hal::regs::cmac;
use onic_hal::{Reg, RegisterAccess, RegisterWindow};

/// Number of hardware counters in the reference driver's `ethtool -S` list (59 CMAC + 5 adapter).
pub const HW_COUNTERS: usize = cmac::CMAC_STATS.len() + cmac::ADAPTER_STATS.len();

/// Mask of the 16 meaningful bits of a CMAC counter's high register (counters are 48 bits).
const CMAC_HIGH_MASK: u32 = 0xFFFF;

/// Reads one port's hardware counters in `ethtool -S` order: a TICK write latches the CMAC
/// counters, then each counter is read in full.
///
/// Deviation: the reference driver reads only the low 32 bits of each counter (64 reads). Here a
/// CMAC counter is read as low word then high word (48 bits; both are latched by the TICK), and a
/// free-running packet-adapter counter as high, low, high, taking the low word again if the high
/// word moved in between, so the 64-bit value is never torn.
pub fn read_hw_counters<W: RegisterWindow>(shell: &W, port: u8) -> [u64; HW_COUNTERS] {
    let base = cmac::cmac_base(port);
    shell.write(cmac::TICK.on(base), cmac::TICK_LATCH);
    let mut out = [0u64; HW_COUNTERS];
    for (slot, c) in out.iter_mut().zip(cmac::CMAC_STATS.iter()) {
        *slot = read_latched(shell, base, c);
    }
    let abase = cmac::adapter_base(port);
    for (slot, c) in out[cmac::CMAC_STATS.len()..]
        .iter_mut()
        .zip(cmac::ADAPTER_STATS.iter())
    {
        *slot = read_u64_untorn(shell, c.low.on(abase));
    }
    out
}

/// Reads one CMAC counter latched by the last TICK: low word, then the 16 bits of the high word.
pub(crate) fn read_latched<W: RegisterWindow>(shell: &W, base: u32, c: &cmac::Counter) -> u64 {
    let lo = shell.read(c.low.on(base));
    let hi = shell.read(c.high().on(base)) & CMAC_HIGH_MASK;
    u64::from(hi) << 32 | u64::from(lo)
}

/// Reads a free-running 64-bit counter made of the low register `low` and the high register after
/// it without tearing.
pub(crate) fn read_u64_untorn<W: RegisterWindow>(w: &W, low: Reg<u32>) -> u64 {
    let hi1 = w.read(low.next());
    let lo = w.read(low);
    let hi2 = w.read(low.next());
    let lo = if hi1 == hi2 { lo } else { w.read(low) };
    u64::from(hi2) << 32 | u64::from(lo)
}

/// Link state of a port: STAT_RX_STATUS read twice, the second value must be exactly "up and
/// aligned" (hardware.md §10.3; the first read clears stale latched bits).
pub fn link_up<W: RegisterWindow>(shell: &W, port: u8) -> bool {
    let reg = cmac::STAT_RX_STATUS.on(cmac::cmac_base(port));
    let _stale = shell.read(reg);
    shell.read(reg) == cmac::STAT_RX_STATUS_UP
}

/// The packet adapter's RX drop counter of `port` (64 bits, read without tearing; no TICK
/// needed, the adapter's counters run free).
pub(crate) fn adapter_rx_drops<W: RegisterWindow>(shell: &W, port: u8) -> u64 {
    read_u64_untorn(shell, cmac::adapter::RX_DROP_PKTS.on(cmac::adapter_base(port)))
}
